/*
 * eval.h — the task file of `kvik eval` (the task regression gate), the
 * checks that decide whether a reply passes, and the results file an
 * earlier run wrote, read back as a baseline.
 *
 * A task file is JSON Lines: one object per non-blank line, one case:
 *
 *   id          string, unique in the file
 *   tags        array of strings (may be empty)
 *   prompt      string: the raw prompt text (control-token text stays text)
 *   messages    or an array of {"role","content"}: rendered with the model's
 *               chat template, with the generation prompt
 *   max_tokens  tokens to generate, 1..4096 (default 64)
 *   temperature 0 (default): greedy; > 0: sampled
 *   seed        the sampler's seed, 0..2^32-2 (default 0)
 *   check       an object, one of:
 *     {"type":"exact","value":S}     the reply without leading and trailing
 *                                    white space is S
 *     {"type":"contains","value":S,"all":[...],"any":[...],"none":[...]}
 *                                    each one given holds: the reply holds
 *                                    S, holds every "all" string, holds at
 *                                    least one "any" string, holds no
 *                                    "none" string (bytes, case matters)
 *     {"type":"regex","pattern":P}   POSIX extended regex (regcomp with
 *                                    REG_EXTENDED), search semantics: it
 *                                    matches anywhere in the reply unless P
 *                                    anchors itself with ^ and $; ^ and $
 *                                    are the reply's ends, not its lines
 *     {"type":"json"}                the trimmed reply is one JSON value
 *     {"type":"json_schema","schema":S}
 *                                    ... that S accepts. S is a subset of
 *                                    JSON Schema: type (a name or a list),
 *                                    enum (strings, non-negative integers,
 *                                    booleans, null), required, properties,
 *                                    items, minItems, maxItems; title,
 *                                    description and $schema are ignored,
 *                                    any other keyword is an error
 *     {"type":"choice","options":[...],"answer":I}
 *                                    nothing is generated: each option is
 *                                    scored by its log-likelihood after the
 *                                    prompt; passes when option I scores
 *                                    strictly highest
 *
 * Unknown keys are errors, so a misspelt key never passes silently.
 */
#ifndef KVIK_TOOLS_EVAL_H
#define KVIK_TOOLS_EVAL_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

enum { EVAL_DEFAULT_MAX_TOKENS = 64, EVAL_MAX_TOKENS = 4096 };

enum eval_check {
    EVAL_CHECK_EXACT,
    EVAL_CHECK_CONTAINS,
    EVAL_CHECK_REGEX,
    EVAL_CHECK_JSON,
    EVAL_CHECK_CHOICE,
    EVAL_CHECK_JSON_SCHEMA,
};

struct json_value;

/* A list of owned NUL-terminated strings. */
struct eval_strs {
    char **s; // [n]
    int n;
};

struct eval_msg {
    char *role, *content; // owned
};

/* One case of a task file. */
struct eval_case {
    char *id;
    int line;                 // its line in the file (1-based)
    struct eval_strs tags;
    char *prompt;             // NULL when messages are given
    struct eval_msg *msgs;    // [n_msgs]
    int n_msgs;
    int max_tokens;
    double temperature;
    uint64_t seed;
    enum eval_check check;
    char *value;              // exact, contains (NULL: none)
    struct eval_strs all, any, none; // contains
    char *pattern;            // regex
    regex_t re;               // regex, compiled
    bool has_re;
    struct eval_strs options; // choice
    int answer;               // choice: index into options
    struct json_value *doc;   // json_schema: the case's parsed line (owned)
    const struct json_value *schema; // json_schema: the schema, inside doc
};

/* A parsed task file. */
struct eval_set {
    struct eval_case *cases; // [n]
    int n;
};

/* Parses a whole task file buf[0..len). KVIK_ERR_FORMAT with
 * "line N: what is wrong" (the first error), KVIK_ERR_NOMEM; on failure
 * *out holds nothing to free. An empty file is an error. */
kvik_status eval_set_parse(const char *buf, size_t len, struct eval_set *out, struct kvik_err *err);
void eval_set_free(struct eval_set *s);

const char *eval_check_name(enum eval_check c);

/* Whether reply[0..len) passes c's check (any but choice). */
bool eval_check_reply(const struct eval_case *c, const char *reply, size_t len);

/* Whether option c->answer has the strictly highest of scores[0..n). */
bool eval_choice_pass(const struct eval_case *c, const double *scores);

/* ---- results ------------------------------------------------------------ */

/* One tag's tally; rate = 100 * pass / total. */
struct eval_tally {
    char *tag; // owned; "" is the overall tally
    int pass, total;
};

static inline double eval_rate(const struct eval_tally *t) {
    return t->total ? 100.0 * t->pass / t->total : 0;
}

/* The part of a results file the gate reads. */
struct eval_results {
    char **ids;   // [n_cases]
    bool *pass;   // [n_cases]
    int n_cases;
    struct eval_tally *tags; // [n_tags]
    int n_tags;
    struct eval_tally overall; // "overall", when has_overall
    bool has_overall;
};

/* Reads a results file as `kvik eval -o` writes it: "cases" (each with a
 * string "id" and a boolean "pass") and "tags" (each tag an object with
 * integer "pass" and "total"), and optionally "overall" of the same
 * form. KVIK_ERR_FORMAT names what is wrong. */
kvik_status eval_results_parse(const char *buf, size_t len, struct eval_results *out, struct kvik_err *err);
void eval_results_free(struct eval_results *r);

#endif /* KVIK_TOOLS_EVAL_H */
