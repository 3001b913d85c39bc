/*
 * engine_api.c — the public sampling, engine and generation functions of
 * kvik.h over the serving engine (engine/engine.h).
 *
 * Each submitted request gets a small state of its own: one streaming
 * detokenizer per choice, so every event carries whole UTF-8 characters.
 * The engine thread calls on_event below for every engine event; it turns
 * the event into a kvik_event and calls the caller's callback. The state
 * goes with the last choice's final event. kvik_generate_tokens submits
 * with a callback of its own that collects the text and wakes the waiting
 * caller.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

#include "api/api.h"
#include "engine/engine.h"

_Static_assert((int)KVIK_FINISH_STOP == (int)ENGINE_FINISH_STOP && (int)KVIK_FINISH_LENGTH == (int)ENGINE_FINISH_LENGTH &&
                   (int)KVIK_FINISH_CANCELLED == (int)ENGINE_FINISH_CANCELLED &&
                   (int)KVIK_FINISH_ERROR == (int)ENGINE_FINISH_ERROR,
               "kvik_finish follows enum engine_finish");
_Static_assert((int)KVIK_MAX_TOP_LOGPROBS == (int)ENGINE_MAX_TOP_LOGPROBS, "the same top-logprobs limit");
_Static_assert((int)KVIK_KV_F32 == TENSOR_TYPE_F32 && (int)KVIK_KV_F16 == TENSOR_TYPE_F16 &&
                   (int)KVIK_KV_Q8_0 == TENSOR_TYPE_Q8_0,
               "KV types are GGUF type ids");
_Static_assert(KVIK_SEED_RANDOM == SAMPLER_SEED_RANDOM, "the same random-seed value");

/* A params struct must at least carry its size. */
#define API_CHECK_SIZE(e, p, what)                                                                           \
    ((p)->size < sizeof(size_t)                                                                              \
         ? err_set(e, KVIK_ERR_INVALID_ARG, "%s.size is %zu; start from kvik_%s_default_params()", what, \
                   (p)->size, what)                                                                          \
         : KVIK_OK)

/* ---- parameters --------------------------------------------------------- */

KVIK_API void kvik_sampling_params_init(struct kvik_sampling_params *p, size_t size) {
    struct sampler_params d = sampler_params_default();
    struct kvik_sampling_params lib = {
        .size = sizeof lib,
        .temperature = d.temp,
        .top_k = d.top_k,
        .top_p = d.top_p,
        .min_p = d.min_p,
        .repeat_penalty = d.repeat_penalty,
        .repeat_last_n = d.repeat_last_n,
        .frequency_penalty = d.frequency_penalty,
        .presence_penalty = d.presence_penalty,
        .seed = d.seed,
    };
    API_INIT(p, size, &lib);
}

/* The sampler's parameters from the caller's (NULL: the defaults). */
static kvik_status take_sampling(const struct kvik_sampling_params *in, struct sampler_params *out,
                                 struct kvik_err *e) {
    struct kvik_sampling_params p = kvik_sampling_default_params();
    if (in) {
        if (API_CHECK_SIZE(e, in, "sampling")) return e->code;
        API_TAKE(&p, in, temperature);
        API_TAKE(&p, in, top_k);
        API_TAKE(&p, in, top_p);
        API_TAKE(&p, in, min_p);
        API_TAKE(&p, in, repeat_penalty);
        API_TAKE(&p, in, repeat_last_n);
        API_TAKE(&p, in, frequency_penalty);
        API_TAKE(&p, in, presence_penalty);
        API_TAKE(&p, in, seed);
    }
    *out = (struct sampler_params){
        .temp = p.temperature,
        .top_k = p.top_k,
        .top_p = p.top_p,
        .min_p = p.min_p,
        .repeat_penalty = p.repeat_penalty,
        .repeat_last_n = p.repeat_last_n,
        .frequency_penalty = p.frequency_penalty,
        .presence_penalty = p.presence_penalty,
        .seed = p.seed,
    };
    return sampler_params_validate(out, e);
}

KVIK_API void kvik_engine_params_init(struct kvik_engine_params *p, size_t size) {
    struct engine_config d = engine_config_default();
    struct kvik_engine_params lib = {
        .size = sizeof lib,
        .n_threads = d.n_threads,
        .n_ctx = d.n_ctx,
        .max_seqs = d.max_seqs,
        .max_batch_tokens = d.max_batch_tokens,
        .prefill_chunk = d.prefill_chunk,
        .max_queue = d.max_queue,
        .kv_mem_mib = d.kv_mem_mib,
        .kv_type = d.kv_type,
        .prefix_cache = d.prefix_cache,
    };
    API_INIT(p, size, &lib);
}

KVIK_API void kvik_request_params_init(struct kvik_request_params *p, size_t size) {
    struct kvik_request_params lib = {.size = sizeof lib, .n = 1};
    API_INIT(p, size, &lib);
}

KVIK_API const char *kvik_finish_string(kvik_finish f) {
    switch (f) {
    case KVIK_FINISH_NONE: return "none";
    case KVIK_FINISH_STOP: return "stop";
    case KVIK_FINISH_LENGTH: return "length";
    case KVIK_FINISH_CANCELLED: return "cancelled";
    case KVIK_FINISH_ERROR: return "error";
    }
    return "?";
}

/* ---- the engine --------------------------------------------------------- */

struct kvik_engine {
    struct engine *e;
    const struct kvik_model *m;
};

KVIK_API kvik_status kvik_engine_new(const kvik_model *m, const struct kvik_engine_params *params,
                                     kvik_engine **out, char *err, size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (!out || !m) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "engine: NULL %s", out ? "model" : "out");
        return api_fail(&e, err, err_len);
    }
    *out = NULL;
    struct kvik_engine_params p = kvik_engine_default_params();
    if (params) {
        if (API_CHECK_SIZE(&e, params, "engine")) return api_fail(&e, err, err_len);
        API_TAKE(&p, params, n_threads);
        API_TAKE(&p, params, n_ctx);
        API_TAKE(&p, params, max_seqs);
        API_TAKE(&p, params, max_batch_tokens);
        API_TAKE(&p, params, prefill_chunk);
        API_TAKE(&p, params, max_queue);
        API_TAKE(&p, params, kv_mem_mib);
        API_TAKE(&p, params, kv_type);
        API_TAKE(&p, params, prefix_cache);
    }
    if (p.kv_type != KVIK_KV_F32 && p.kv_type != KVIK_KV_F16 && p.kv_type != KVIK_KV_Q8_0) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "engine: kv_type %d (KVIK_KV_F32, KVIK_KV_F16 or KVIK_KV_Q8_0)",
                (int)p.kv_type);
        return api_fail(&e, err, err_len);
    }
    struct engine_config c = engine_config_default();
    c.n_threads = p.n_threads;
    c.n_ctx = p.n_ctx;
    c.max_seqs = p.max_seqs;
    c.max_batch_tokens = p.max_batch_tokens;
    c.prefill_chunk = p.prefill_chunk;
    c.max_queue = p.max_queue;
    c.kv_mem_mib = p.kv_mem_mib;
    c.kv_type = p.kv_type;
    c.prefix_cache = p.prefix_cache;
    c.eog = m->eog;
    c.n_eog = m->n_eog;
    struct kvik_engine *ke = calloc(1, sizeof *ke);
    if (!ke) {
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    ke->m = m;
    if (!(ke->e = engine_new(m->model, &c, &e))) {
        free(ke);
        if (!e.code) err_set(&e, KVIK_ERR_NOMEM, "engine: out of memory");
        return api_fail(&e, err, err_len);
    }
    *out = ke;
    return KVIK_OK;
}

KVIK_API void kvik_engine_free(kvik_engine *ke) {
    if (!ke) return;
    engine_free(ke->e);
    free(ke);
}

KVIK_API int32_t kvik_engine_max_tokens(const kvik_engine *ke) { return ke ? engine_max_seq_tokens(ke->e) : 0; }

KVIK_API void kvik_engine_cancel(kvik_engine *ke, uint64_t id) {
    if (ke) engine_cancel(ke->e, id);
}

KVIK_API void kvik_engine_drain(kvik_engine *ke, int64_t timeout_ms) {
    if (!ke) return;
    int64_t deadline = INT64_MAX;
    if (timeout_ms >= 0 && timeout_ms < INT64_MAX / 2000000) deadline = clock_ns() + timeout_ms * 1000000;
    engine_drain(ke->e, deadline);
}

/* ---- requests ------------------------------------------------------------- */

/* The caller's request params within their size (NULL: the defaults). */
static kvik_status take_request(const struct kvik_request_params *in, struct kvik_request_params *out,
                                struct kvik_err *e) {
    *out = kvik_request_default_params();
    if (!in) return KVIK_OK;
    if (API_CHECK_SIZE(e, in, "request")) return e->code;
    API_TAKE(out, in, max_tokens);
    API_TAKE(out, in, n);
    API_TAKE(out, in, top_logprobs);
    API_TAKE(out, in, ignore_eos);
    API_TAKE(out, in, cache_key);
    API_TAKE(out, in, sampling);
    API_TAKE(out, in, on_event);
    API_TAKE(out, in, user);
    return KVIK_OK;
}

/* One request in flight: the caller's callback and a detokenizer per choice. */
struct api_req {
    kvik_event_fn fn;
    void *user;
    int n_left;               /* choices without their final event yet */
    struct detok_stream *ds;  /* [n] */
    char *piece;              /* [cap + 1] the current event's text */
    size_t cap;
};

static void api_req_free(struct api_req *r) {
    if (!r) return;
    free(r->ds);
    free(r->piece);
    free(r);
}

/* The engine's callback: user is the api_req. */
static bool on_event(void *user, const struct engine_event *ev) {
    struct api_req *r = user;
    struct detok_stream *ds = &r->ds[ev->choice];
    struct kvik_event out = {
        .size = sizeof out,
        .request_id = ev->request_id,
        .choice = ev->choice,
        .finish = (kvik_finish)ev->finish,
        .text = r->piece,
    };
    int64_t k;
    if (ev->finish == ENGINE_FINISH_NONE) {
        k = detok_push(ds, ev->token, r->piece, r->cap);
        out.token = ev->token;
        out.logprob = ev->logprob;
        out.n_top = ev->n_top;
        out.top_ids = ev->top_ids;
        out.top_logprobs = ev->top_logprobs;
    } else {
        k = detok_flush(ds, r->piece, r->cap);
        out.token = -1;
        out.n_prompt = ev->n_prompt;
        out.n_generated = ev->n_generated;
        out.n_cached = ev->n_cached;
        out.error = ev->finish == ENGINE_FINISH_ERROR ? (ev->error ? ev->error : "generation failed") : NULL;
    }
    if (k < 0) k = 0; /* the engine emits only ids of the vocabulary */
    r->piece[k] = 0;
    out.text_len = (size_t)k;
    bool go_on = r->fn(r->user, &out);
    if (ev->finish != ENGINE_FINISH_NONE && --r->n_left == 0) api_req_free(r);
    return go_on;
}

KVIK_API kvik_status kvik_engine_submit(kvik_engine *ke, const int32_t *prompt, size_t n_prompt,
                                        const struct kvik_request_params *params, uint64_t *id, char *err,
                                        size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (id) *id = 0;
    if (!ke || !params) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: NULL %s", ke ? "params" : "engine");
        return api_fail(&e, err, err_len);
    }
    struct kvik_request_params p;
    if (take_request(params, &p, &e)) return api_fail(&e, err, err_len);
    if (!p.on_event) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: the request has no on_event callback");
        return api_fail(&e, err, err_len);
    }
    if (!prompt || n_prompt == 0) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: the prompt is empty (at least one token is needed)");
        return api_fail(&e, err, err_len);
    }
    int32_t limit = engine_max_seq_tokens(ke->e);
    if (n_prompt >= (size_t)limit) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: the prompt of %zu tokens leaves no room in a sequence of %d",
                n_prompt, limit);
        return api_fail(&e, err, err_len);
    }
    if (p.max_tokens < 0) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: max_tokens is %d (0: as many as fit)", (int)p.max_tokens);
        return api_fail(&e, err, err_len);
    }
    if (p.n < 1 || p.n > 4096) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "submit: n is %d (at least 1)", (int)p.n);
        return api_fail(&e, err, err_len);
    }
    /* max_tokens past what fits is cut to it: the choice ends with
       KVIK_FINISH_LENGTH when its sequence is full */
    int32_t room = limit - (int32_t)n_prompt;
    struct engine_request r = {
        .prompt = prompt,
        .n_prompt = (int)n_prompt,
        .max_tokens = p.max_tokens && p.max_tokens < room ? p.max_tokens : room,
        .n = p.n,
        .top_logprobs = p.top_logprobs,
        .ignore_eos = p.ignore_eos,
        .cache_key = p.cache_key,
        .on_event = on_event,
    };
    if (take_sampling(p.sampling, &r.sampling, &e)) return api_fail(&e, err, err_len);
    struct api_req *q = calloc(1, sizeof *q);
    if (q) {
        q->fn = p.on_event;
        q->user = p.user;
        q->n_left = p.n;
        q->cap = detok_min_cap(ke->m->tok);
        q->ds = malloc(sizeof *q->ds * (size_t)p.n);
        q->piece = malloc(q->cap + 1);
    }
    if (!q || !q->ds || !q->piece) {
        api_req_free(q);
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    for (int i = 0; i < p.n; i++) detok_init(&q->ds[i], ke->m->tok, false);
    r.user = q;
    kvik_status st = engine_submit(ke->e, &r, id, &e);
    if (st) {
        api_req_free(q);
        return api_fail(&e, err, err_len);
    }
    return KVIK_OK;
}

/* ---- blocking generation ------------------------------------------------ */

struct api_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    kvik_finish finish;
    char error[320];
    char *text; /* [len], cap bytes */
    size_t len, cap;
    bool nomem;
    kvik_event_fn fn; /* the caller's, or NULL */
    void *user;
};

/* Collects the text into the waiter w. w lives on the waiting thread's
 * stack: once the final event has set w->done and the mutex is unlocked,
 * the waiter may have returned, so nothing of w is touched after that. */
static bool wait_event(void *user, const struct kvik_event *ev) {
    struct api_wait *w = user;
    bool go_on = true;
    if (w->fn) go_on = w->fn(w->user, ev);
    pthread_mutex_lock(&w->mu);
    if (w->len + ev->text_len + 1 > w->cap) {
        size_t nc = (w->cap ? 2 * w->cap : 256) + ev->text_len + 1;
        char *nt = realloc(w->text, nc);
        if (nt) w->text = nt, w->cap = nc;
        else w->nomem = true;
    }
    if (!w->nomem) {
        memcpy(w->text + w->len, ev->text, ev->text_len);
        w->len += ev->text_len;
        w->text[w->len] = 0;
    }
    if (ev->finish != KVIK_FINISH_NONE) {
        w->finish = ev->finish;
        if (ev->error) snprintf(w->error, sizeof w->error, "%s", ev->error);
        w->done = true;
        pthread_cond_signal(&w->cv);
    }
    bool ret = go_on && !w->nomem;
    pthread_mutex_unlock(&w->mu);
    return ret;
}

KVIK_API kvik_status kvik_generate_tokens(kvik_engine *ke, const int32_t *prompt, size_t n_prompt,
                                          const struct kvik_request_params *params, char **text,
                                          kvik_finish *finish, char *err, size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (text) *text = NULL;
    if (finish) *finish = KVIK_FINISH_NONE;
    if (!text) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "generate: NULL text");
        return api_fail(&e, err, err_len);
    }
    struct kvik_request_params p;
    if (take_request(params, &p, &e)) return api_fail(&e, err, err_len);
    if (p.n != 1) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "generate: n is %d; blocking generation makes one choice", (int)p.n);
        return api_fail(&e, err, err_len);
    }
    struct api_wait w = {.fn = p.on_event, .user = p.user};
    p.on_event = wait_event;
    p.user = &w;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    uint64_t id;
    kvik_status st = kvik_engine_submit(ke, prompt, n_prompt, &p, &id, err, err_len);
    if (!st) {
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        if (w.nomem) {
            st = err_set(&e, KVIK_ERR_NOMEM, "generate: out of memory for the text");
            api_fail(&e, err, err_len);
        } else if (w.finish == KVIK_FINISH_ERROR) { /* reported, with the text so far */
            err_set(&e, KVIK_ERR_INVALID_ARG, "generate: %s", w.error);
            err_copy_out(&e, err, err_len);
        }
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (st) {
        free(w.text);
        return st;
    }
    if (!w.text && !(w.text = calloc(1, 1))) {
        err_set(&e, KVIK_ERR_NOMEM, "out of memory");
        return api_fail(&e, err, err_len);
    }
    *text = w.text;
    if (finish) *finish = w.finish;
    return KVIK_OK;
}

KVIK_API kvik_status kvik_generate(kvik_engine *ke, const char *prompt, const struct kvik_request_params *params,
                                   char **text, kvik_finish *finish, char *err, size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (text) *text = NULL;
    if (!ke || !prompt) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "generate: NULL %s", ke ? "prompt" : "engine");
        return api_fail(&e, err, err_len);
    }
    size_t len = strlen(prompt);
    int64_t n = tokenizer_encode(ke->m->tok, prompt, len, true, false, NULL, 0);
    int32_t *ids = n > 0 ? malloc(sizeof *ids * (size_t)n) : NULL;
    if (n < 0 || (n > 0 && !ids)) {
        free(ids);
        err_set(&e, n < 0 ? (kvik_status)n : KVIK_ERR_NOMEM, "generate: cannot tokenize the prompt");
        return api_fail(&e, err, err_len);
    }
    if (n > 0) tokenizer_encode(ke->m->tok, prompt, len, true, false, ids, n);
    kvik_status st = kvik_generate_tokens(ke, ids, (size_t)n, params, text, finish, err, err_len);
    free(ids);
    return st;
}
