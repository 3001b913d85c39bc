/*
 * eval_url.h — the cases of a `kvik eval` task file (tools/eval.h) run
 * against any OpenAI-compatible server (`kvik eval --url`), over HTTP with
 * libcurl:
 *
 *   raw prompt   POST /v1/completions {"prompt"}: choices[0].text
 *   messages     POST /v1/chat/completions {"messages"}: the message content
 *   choice       (raw prompts only) POST /v1/completions {"prompt","echo":true,"logprobs":1,
 *                "max_tokens":0}, once for the prompt and once for the
 *                prompt followed by each option: an option scores the sum
 *                of the echoed token_logprobs after the prompt's tokens
 *                (the legacy completions API's prompt log-probabilities)
 *
 * Sampling: temperature and seed as the case says; a sampled case also
 * sends kvik's command-line cut-offs (top_k 40, top_p 0.95, min_p 0.05),
 * as `kvik eval -m` samples. The server tokenizes and applies its own chat
 * template.
 */
#ifndef KVIK_CLI_EVAL_URL_H
#define KVIK_CLI_EVAL_URL_H

#include "base/base.h"
#include "tools/eval.h"

struct eval_url;

/* A client of the server at url ("http://HOST:PORT", with or without a
 * trailing "/v1"); api_key NULL: none; model NULL: the first model of
 * GET /v1/models. NULL with err set when the server cannot be reached or
 * names no model. */
struct eval_url *eval_url_new(const char *url, const char *api_key, const char *model, struct kvik_err *err);
void eval_url_free(struct eval_url *u);

/* The model name sent with every request. */
const char *eval_url_model(const struct eval_url *u);

/* The reply to a generated case (malloc'd, NUL-terminated, *len bytes).
 * KVIK_ERR_INVALID_ARG: the server refused this request (4xx; its message
 * in err); KVIK_ERR_FORMAT: its answer has no choices[0] text or
 * message; KVIK_ERR_IO: no answer at all (or 5xx). */
kvik_status eval_url_generate(struct eval_url *u, const struct eval_case *c, char **reply, size_t *len,
                              struct kvik_err *err);

/* The log-likelihood of every option of a choice case with a raw prompt
 * (scores[options.n]; a case with messages cannot be scored: the server
 * renders its chat template only for chat completions, which echo no
 * prompt). KVIK_ERR_UNSUPPORTED: the server returns no prompt
 * log-probabilities (it answers nothing for them, or refuses echo,
 * logprobs or max_tokens 0); otherwise as above. */
kvik_status eval_url_score(struct eval_url *u, const struct eval_case *c, double *scores, struct kvik_err *err);

#endif /* KVIK_CLI_EVAL_URL_H */
