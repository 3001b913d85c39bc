/*
 * semantic.h — what `kvik serve --semantic-cache` keys, stores and answers
 * with (the cache itself is retrieval/semcache.h). Pure: no sockets.
 *
 * A chat request is looked up when it asks for one choice without
 * logprobs, its last message is the user's, and it is greedy (temperature
 * 0) unless the request allows sampled answers (header X-Kvik-Cache:
 * sampled); X-Kvik-Cache: off skips the cache.
 *
 * The hard key is SHA-256 over: the tenant (the hash of the API key), the
 * served model's name and identity, the chat template, every message but
 * the last (role and content), the sampling parameters (temperature,
 * top_k, top_p, min_p, penalties, the seed when one is given), max_tokens
 * and the stop strings. Only the last user message is compared by
 * similarity.
 *
 * An entry is {"content", "finish_reason", "completion_tokens"} as JSON.
 */
#ifndef KVIK_SERVER_SEMANTIC_H
#define KVIK_SERVER_SEMANTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retrieval/semcache.h"
#include "server/request.h"

/* What the X-Kvik-Cache request header asks (NULL: nothing). */
enum semantic_mode { SEMANTIC_DEFAULT, SEMANTIC_OFF, SEMANTIC_SAMPLED, SEMANTIC_BAD };
enum semantic_mode semantic_mode_of(const char *header);

/* Whether req may be answered from, and stored in, the cache. */
bool semantic_eligible(const struct api_request *req, enum semantic_mode mode);

/* The last user message (eligible requests): its content and length. */
const char *semantic_question(const struct api_request *req, size_t *len);

void semantic_key(const struct api_request *req, const uint8_t tenant[16], const char *model,
                  uint64_t model_identity, const char *template_name, uint8_t key[SEMCACHE_KEY]);

/* An entry's bytes (malloc'd, NUL-terminated, length in *out_len); NULL if
 * out of memory. */
char *semantic_entry(const char *content, size_t len, const char *finish, int completion_tokens, size_t *out_len);

/* A hit as the response: a chat.completion body, or (stream) its SSE
 * events through [DONE] (with the usage chunk when include_usage).
 * NULL if out of memory or the entry is not one semantic_entry made. */
char *semantic_reply(const char *entry, size_t len, const char *model, int prompt_tokens, bool stream,
                     bool include_usage, size_t *out_len);

#endif /* KVIK_SERVER_SEMANTIC_H */
