/*
 * grammar.h — grammar-constrained decoding: grammars over bytes, a
 * pushdown matcher of the text generated so far, and the mask of the
 * tokens that may come next.
 *
 * A grammar comes from GBNF (llama.cpp's grammar format: docs/grammar.md
 * lists what kvik reads) or from a JSON Schema (schema.c turns it into
 * GBNF). It is compiled to rules over bytes: a character class becomes
 * the UTF-8 byte sequences of its code points, a repetition helper rules.
 * The start rule is "root". Left recursion is refused.
 *
 * The matcher keeps the set of parser stacks that the bytes accepted so
 * far leave alive (each a chain of positions in the rules; the same chain
 * is one stack, however it was reached). A token is allowed when its bytes
 * keep some stack alive; an end-of-generation token when some stack has
 * finished the start rule. The mask walks the vocabulary as a trie of
 * token bytes, so a prefix that kills every stack rules out all the tokens
 * under it.
 */
#ifndef KVIK_GRAMMAR_GRAMMAR_H
#define KVIK_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct grammar;

/* Compiles GBNF text src[0..len). On failure *out is NULL and err says
 * what and where (KVIK_ERR_FORMAT: line and column; KVIK_ERR_UNSUPPORTED:
 * left recursion, a rule too large). */
kvik_status grammar_from_gbnf(const char *src, size_t len, struct grammar **out, struct kvik_err *err);

/* Compiles a JSON Schema (a JSON text) through GBNF. KVIK_ERR_UNSUPPORTED
 * names a keyword kvik does not constrain; KVIK_ERR_FORMAT a schema that
 * is not valid. gbnf_out (may be NULL) gets the GBNF text (malloc'd). */
kvik_status grammar_from_json_schema(const char *schema, size_t len, struct grammar **out, char **gbnf_out,
                                     struct kvik_err *err);

/* The same from a schema already parsed (convert/json.h). */
struct json_value;
kvik_status grammar_from_schema_value(const struct json_value *schema, struct grammar **out, char **gbnf_out,
                                      struct kvik_err *err);

/*
 * The rest of a tool call whose start the prompt holds (tool_choice
 * required or a named function): for each function of tools_json (an
 * OpenAI tools array; only the one named `only`, when given) its name's
 * JSON text less the opening quote and `, "arguments": ` (`, "parameters":
 * ` with llama3), then arguments valid against its parameters schema
 * (any object without one), then the call's closing brace. With `only`
 * the name is in the prompt too: the arguments come first.
 */
kvik_status grammar_from_tool_calls(const char *tools_json, size_t len, const char *only, bool llama3,
                                    struct grammar **out, char **gbnf_out, struct kvik_err *err);

/* The GBNF of any JSON object (response_format json_object). */
const char *grammar_json_object_gbnf(void);

void grammar_free(struct grammar *g); /* NULL is fine */

/* Rules and symbols after compilation (for tests and the bench). */
int grammar_n_rules(const struct grammar *g);
int grammar_n_symbols(const struct grammar *g);

/* ---- the vocabulary as a trie ---------------------------------------------- */

struct grammar_vocab;

/* Token i's bytes are pieces[i][0..lens[i]) (empty: never allowed, e.g.
 * a control token); eog[0..n_eog) the end-of-generation ids. */
struct grammar_vocab *grammar_vocab_new(int32_t n_vocab, const char *const *pieces, const uint32_t *lens,
                                        const int32_t *eog, int n_eog, struct kvik_err *err);
struct tokenizer;
/* The vocabulary of tok: each token's bytes as the detokenizer writes them
 * (control tokens none); eog the end-of-generation ids. */
struct grammar_vocab *grammar_vocab_from_tokenizer(const struct tokenizer *tok, const int32_t *eog, int n_eog,
                                                   struct kvik_err *err);
void grammar_vocab_free(struct grammar_vocab *v);
int32_t grammar_vocab_size(const struct grammar_vocab *v);

/* ---- matching ------------------------------------------------------------- */

struct grammar_matcher;

/* A matcher at the start of g over v (both must outlive it). */
struct grammar_matcher *grammar_matcher_new(const struct grammar *g, const struct grammar_vocab *v,
                                            struct kvik_err *err);
void grammar_matcher_free(struct grammar_matcher *m);

/* Takes bytes s[0..n) (a token's, or text given to the matcher directly).
 * False, with the matcher unchanged, when no stack survives them. */
bool grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t n);

/* Takes token id (its vocabulary bytes; an end-of-generation token: true
 * when the grammar may end here). */
bool grammar_matcher_accept_token(struct grammar_matcher *m, int32_t id);

/* Some stack has finished the start rule: the text so far is a sentence. */
bool grammar_matcher_can_end(const struct grammar_matcher *m);
/* No stack can take another byte: only the end may follow. */
bool grammar_matcher_must_end(const struct grammar_matcher *m);

/* The allowed next tokens as bits (bit i of mask[i / 32]), for
 * ceil(n_vocab / 32) words. Returns how many are allowed. */
int64_t grammar_matcher_fill_mask(struct grammar_matcher *m, uint32_t *mask);

#endif /* KVIK_GRAMMAR_GRAMMAR_H */
