/*
 * semantic.c — the semantic cache's key, entries and answers (semantic.h).
 */
#include <jansson.h>
#include <stdlib.h>
#include <strings.h>

#include "server/response.h"
#include "server/semantic.h"

enum semantic_mode semantic_mode_of(const char *h) {
    if (!h) return SEMANTIC_DEFAULT;
    if (!strcasecmp(h, "off") || !strcasecmp(h, "no-cache")) return SEMANTIC_OFF;
    if (!strcasecmp(h, "sampled")) return SEMANTIC_SAMPLED;
    if (!strcasecmp(h, "on")) return SEMANTIC_DEFAULT;
    return SEMANTIC_BAD;
}

bool semantic_eligible(const struct api_request *req, enum semantic_mode mode) {
    if (mode == SEMANTIC_OFF || mode == SEMANTIC_BAD || req->route != API_ROUTE_CHAT) return false;
    if (req->n != 1 || req->logprobs || req->n_msgs == 0 || req->ignore_eos) return false;
    if (strcmp(req->msgs[req->n_msgs - 1].role, "user")) return false;
    /* tools: an answer may be a call, which the cache does not keep */
    if (req->tools_json || req->grammar_kind != API_GRAMMAR_NONE) return false;
    for (size_t i = 0; req->msg_extra && i < req->n_msgs; i++)
        if (req->msg_extra[i]) return false;
    return req->sp.temp <= 0 || mode == SEMANTIC_SAMPLED;
}

const char *semantic_question(const struct api_request *req, size_t *len) {
    const char *q = req->msgs[req->n_msgs - 1].content;
    *len = strlen(q);
    return q;
}

static void put(struct sha256 *h, const void *p, size_t n) {
    uint64_t len = n; /* length first, so no two field lists hash alike */
    sha256_update(h, &len, sizeof len);
    sha256_update(h, p, n);
}

static void put_str(struct sha256 *h, const char *s) { put(h, s ? s : "", s ? strlen(s) + 1 : 0); }

void semantic_key(const struct api_request *req, const uint8_t tenant[16], const char *model,
                  uint64_t model_identity, const char *template_name, uint8_t key[SEMCACHE_KEY]) {
    struct sha256 h;
    sha256_init(&h);
    put_str(&h, "kvik semantic cache 1");
    put(&h, tenant, 16);
    put_str(&h, model);
    put(&h, &model_identity, sizeof model_identity);
    put_str(&h, template_name);
    uint64_t n = req->n_msgs - 1;
    put(&h, &n, sizeof n);
    for (size_t i = 0; i + 1 < req->n_msgs; i++) {
        put_str(&h, req->msgs[i].role);
        put_str(&h, req->msgs[i].content);
    }
    const struct sampler_params *sp = &req->sp;
    float f[6] = {sp->temp > 0 ? sp->temp : 0, sp->top_p, sp->min_p, sp->repeat_penalty, sp->frequency_penalty,
                  sp->presence_penalty};
    int32_t i32[3] = {sp->top_k, sp->repeat_last_n, req->max_tokens};
    put(&h, f, sizeof f);
    put(&h, i32, sizeof i32);
    uint64_t seed = sp->temp > 0 && sp->seed != SAMPLER_SEED_RANDOM ? sp->seed : 0;
    put(&h, &seed, sizeof seed);
    uint64_t ns = (uint64_t)req->n_stop;
    put(&h, &ns, sizeof ns);
    for (int i = 0; i < req->n_stop; i++) put_str(&h, req->stop[i]);
    sha256_final(&h, key);
}

char *semantic_entry(const char *content, size_t len, const char *finish, int completion_tokens, size_t *out_len) {
    json_t *o = json_pack("{s:s%, s:s, s:i}", "content", content, len, "finish_reason", finish, "completion_tokens",
                          completion_tokens);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (s) *out_len = strlen(s);
    return s;
}

char *semantic_reply(const char *entry, size_t len, const char *model, int prompt_tokens, bool stream,
                     bool include_usage, size_t *out_len) {
    json_error_t je;
    json_t *e = json_loadb(entry, len, 0, &je);
    json_t *content = json_object_get(e, "content"), *finish = json_object_get(e, "finish_reason");
    json_t *ct = json_object_get(e, "completion_tokens");
    if (!json_is_string(content) || !json_is_string(finish) || !json_is_integer(ct)) {
        json_decref(e);
        return NULL;
    }
    struct resp_ctx rc;
    resp_ctx_init(&rc, API_ROUTE_CHAT, model);
    json_int_t c = json_integer_value(ct);
    json_t *usage = json_pack("{s:i, s:I, s:I, s:{s:i}}", "prompt_tokens", prompt_tokens, "completion_tokens", c,
                              "total_tokens", (json_int_t)prompt_tokens + c, "prompt_tokens_details",
                              "cached_tokens", 0);
    char *out = NULL;
    if (!stream) {
        json_t *root = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:O, s:n}, s:n, s:O}], s:O}", "id", rc.id,
                                 "object", "chat.completion", "created", (json_int_t)rc.created, "model", model,
                                 "choices", "index", 0, "message", "role", "assistant", "content", content,
                                 "refusal", "logprobs", "finish_reason", finish, "usage", usage);
        out = root ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
    } else {
        struct sbuf b = {0};
        json_t *chunks[3] = {
            json_pack("{s:{s:s, s:s}, s:n}", "delta", "role", "assistant", "content", "", "finish_reason"),
            json_pack("{s:{s:O}, s:n}", "delta", "content", content, "finish_reason"),
            json_pack("{s:{}, s:O}", "delta", "finish_reason", finish),
        };
        for (int i = 0; i < 3; i++) {
            json_t *ev = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", rc.id, "object", "chat.completion.chunk",
                                   "created", (json_int_t)rc.created, "model", model, "choices", chunks[i]);
            if (ev) {
                json_object_set_new(json_array_get(json_object_get(ev, "choices"), 0), "index", json_integer(0));
                if (include_usage) json_object_set_new(ev, "usage", json_null());
            }
            char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
            json_decref(ev);
            sbuf_add(&b, "data: ", 6);
            if (s) sbuf_add(&b, s, strlen(s));
            else b.failed = true;
            sbuf_add(&b, "\n\n", 2);
            free(s);
        }
        if (include_usage) {
            json_t *ev = json_pack("{s:s, s:s, s:I, s:s, s:[], s:O}", "id", rc.id, "object", "chat.completion.chunk",
                                   "created", (json_int_t)rc.created, "model", model, "choices", "usage", usage);
            char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
            json_decref(ev);
            sbuf_add(&b, "data: ", 6);
            if (s) sbuf_add(&b, s, strlen(s));
            else b.failed = true;
            sbuf_add(&b, "\n\n", 2);
            free(s);
        }
        sbuf_add(&b, "data: [DONE]\n\n", 14);
        if (b.failed) sbuf_free(&b);
        else sbuf_add(&b, "", 1), out = b.p;
    }
    json_decref(usage);
    json_decref(e);
    if (out) *out_len = strlen(out);
    return out;
}
