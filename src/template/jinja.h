/*
 * jinja.h — a Jinja2 template engine for chat templates.
 *
 * It runs the Hugging Face chat template a GGUF ships in
 * tokenizer.chat_template, as transformers' apply_chat_template does: a
 * sandboxed, immutable Jinja2 environment with trim_blocks and
 * lstrip_blocks, the loop controls (break, continue), `tojson` as Python's
 * json.dumps with ensure_ascii off, and the globals raise_exception and
 * strftime_now. docs/templates.md lists the statements, filters, tests and
 * methods it has; anything else is an error naming it.
 *
 * Values follow Python's rules (ints and floats, truthiness, repr when a
 * list or dict is printed, code-point string lengths and slices) and
 * Jinja2's undefined: printing or iterating an undefined value gives
 * nothing; using it otherwise is an error.
 *
 * Data and template text: every string of the input variables (the JSON
 * object) is data; strings written in the template, and the BOS and EOS
 * texts, are not. The rendered output says which of its bytes came from
 * data, through concatenation, slicing and stripping (other string
 * operations on data give data), so a tokenizer can keep message contents
 * plain text while it parses the template's own control tokens.
 */
#ifndef KVIK_TEMPLATE_JINJA_H
#define KVIK_TEMPLATE_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct jinja_template;

/* Parses src[0..len) (name is used in messages). On failure *out is NULL
 * and err says what and on which line (KVIK_ERR_FORMAT). */
kvik_status jinja_compile(const char *src, size_t len, const char *name, struct jinja_template **out,
                          struct kvik_err *err);
void jinja_free(struct jinja_template *t);

/* The inputs of one rendering. */
struct jinja_input {
    const char *vars_json; /* a JSON object: its members are the variables */
    size_t vars_len;       /* (messages, tools, add_generation_prompt, ...) */
    const char *bos_token; /* NULL: "" */
    const char *eos_token; /* NULL: "" */
    int64_t now;           /* strftime_now's time, Unix seconds (UTC) */
};

/* A byte range [begin, end) of the output that came from data. */
struct jinja_span {
    size_t begin, end;
};

struct jinja_output {
    char *text; /* len bytes + NUL, owned */
    size_t len;
    struct jinja_span *data; /* n_data ranges, sorted, disjoint, owned */
    size_t n_data;
};

/* Renders t with in. On failure out holds nothing and err says why:
 * KVIK_ERR_INVALID_ARG for bad variables, KVIK_ERR_FORMAT for an error the
 * template raises or runs into (raise_exception's text is the message),
 * KVIK_ERR_NOMEM. */
kvik_status jinja_render(const struct jinja_template *t, const struct jinja_input *in, struct jinja_output *out,
                         struct kvik_err *err);
void jinja_output_free(struct jinja_output *o);

#endif
