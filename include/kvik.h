/*
 * kvik.h — the public C API of libkvik.
 *
 * Everything a program linking libkvik may rely on is in this file: opaque
 * handles, status codes and fixed-width types. Layouts live in internal
 * headers under src/ and may change between releases without notice.
 *
 * Functions that can fail return a kvik_status and, where they take an
 * `err`/`err_len` pair, write one human-readable line into it. No function
 * aborts or exits on bad input.
 *
 * API v1 (below the GGUF part): models, tokens, chat templates and the
 * serving engine. Parameter structs start with `size_t size`, the size of
 * the struct in the header the caller compiled against. Fields are only
 * ever added at the end, and the library reads only the fields that lie
 * wholly within `size` (the others take the library's defaults), so a
 * program built against an older kvik.h keeps working with a newer
 * library, and one built against a newer kvik.h with an older library.
 * kvik_X_params_init(p, size) is the library's: it writes the defaults
 * into the first min(size, the library's sizeof) bytes of *p, sets
 * p->size = size, and touches nothing past that. kvik_X_default_params()
 * is inline here: it runs in the caller's code, calls the init with the
 * caller's sizeof, and returns the struct by value in the caller's layout.
 * Event structs the library hands to callbacks carry the same field:
 * read only fields within ev->size. Strings are UTF-8; memory the library
 * allocates for the caller is released with kvik_free.
 */
#ifndef KVIK_H
#define KVIK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVIK_BUILDING_LIBRARY) && defined(__GNUC__)
#define KVIK_API __attribute__((visibility("default")))
#else
#define KVIK_API
#endif

#define KVIK_VERSION_MAJOR 0
#define KVIK_VERSION_MINOR 1
#define KVIK_VERSION_PATCH 0

typedef enum kvik_status {
    KVIK_OK = 0,
    KVIK_ERR_IO = -1,          /* open/read/mmap/write failed */
    KVIK_ERR_FORMAT = -2,      /* malformed or inconsistent file or input */
    KVIK_ERR_NOMEM = -3,       /* allocation failed */
    KVIK_ERR_INVALID_ARG = -4, /* a caller passed a bad argument */
    KVIK_ERR_UNSUPPORTED = -5, /* well-formed, but not something kvik handles */
    KVIK_ERR_NOT_FOUND = -6,   /* a named key, tensor or file does not exist */
    KVIK_ERR_BUSY = -7,        /* full for now (a queue limit); try again later */
} kvik_status;

/* "0.1.0" */
KVIK_API const char *kvik_version(void);

/* Short English name of a status ("format error", ...). Never NULL. */
KVIK_API const char *kvik_status_string(kvik_status status);

/* The SIMD path kernels use on this machine: "avx512-vnni", "avx2", "scalar". */
KVIK_API const char *kvik_cpu_isa(void);

/*
 * GGUF inspection. A kvik_gguf is a validated, memory-mapped GGUF file.
 */
typedef struct kvik_gguf kvik_gguf;

KVIK_API kvik_status kvik_gguf_open(const char *path, kvik_gguf **out,
                                    char *err, size_t err_len);
KVIK_API void kvik_gguf_close(kvik_gguf *file);
KVIK_API uint32_t kvik_gguf_version(const kvik_gguf *file);
KVIK_API int64_t kvik_gguf_n_kv(const kvik_gguf *file);
KVIK_API int64_t kvik_gguf_n_tensors(const kvik_gguf *file);
/* Name of the i-th metadata key / tensor, NUL-terminated; NULL if out of range. */
KVIK_API const char *kvik_gguf_key(const kvik_gguf *file, int64_t i);
KVIK_API const char *kvik_gguf_tensor_name(const kvik_gguf *file, int64_t i);

/* Releases memory the library allocated for the caller (NULL is fine). */
KVIK_API void kvik_free(void *p);

/* ---- models ---------------------------------------------------------- */

/*
 * A kvik_model is a loaded GGUF model: its weights (memory-mapped), its
 * tokenizer and, when it has one kvik recognises, its chat template. It is
 * read-only once open: any number of threads may tokenize, detokenize and
 * render with it at once, and several engines may run on it. Close it
 * after every engine and detokenizer made from it.
 */
typedef struct kvik_model kvik_model;

struct kvik_model_params {
    size_t size;               /* sizeof(struct kvik_model_params) */
    const char *chat_template; /* NULL: the model's own tokenizer.chat_template;
                                  else a family name that overrides it:
                                  "chatml", "llama3", "gemma", "mistral", "phi3" */
};

/* The defaults into *p, which is `size` bytes (sizeof *p), as kvik.h's
 * opening comment says; nothing is written when p is NULL or size is less
 * than sizeof(size_t). The same holds for every kvik_*_params_init. */
KVIK_API void kvik_model_params_init(struct kvik_model_params *p, size_t size);
static inline struct kvik_model_params kvik_model_default_params(void) {
    struct kvik_model_params p = {0};
    kvik_model_params_init(&p, sizeof p);
    return p;
}

/*
 * The file a model argument names, written to buf (NUL-terminated): a path
 * to an existing file as it is; else a name of the model cache
 * ($KVIK_MODELS, else ~/.cache/kvik/models): a short name of the
 * registry ("smollm2-135m") or a file name there. KVIK_ERR_NOT_FOUND with
 * a message saying how to fetch it when a known model is not cached, or
 * listing the known names when nothing matches; KVIK_ERR_INVALID_ARG when
 * buf is too small.
 */
KVIK_API kvik_status kvik_model_resolve(const char *path_or_name, char *buf, size_t len,
                                        char *err, size_t err_len);

/* The short names kvik_model_resolve knows: the i-th one, NULL past the last. */
KVIK_API const char *kvik_model_name(size_t i);

/* Opens a model by path or name (kvik_model_resolve); params NULL: defaults.
 * On failure *out is NULL and err says what is wrong with which file. A
 * chat template kvik does not recognise is not an error: the chat
 * functions then answer KVIK_ERR_UNSUPPORTED. */
KVIK_API kvik_status kvik_model_open(const char *path_or_name, const struct kvik_model_params *params,
                                     kvik_model **out, char *err, size_t err_len);
KVIK_API void kvik_model_close(kvik_model *model); /* NULL is fine */

/* The resolved path the model was loaded from. */
KVIK_API const char *kvik_model_path(const kvik_model *model);
KVIK_API int32_t kvik_model_n_vocab(const kvik_model *model);
/* Context length the model was trained for (its GGUF metadata). */
KVIK_API int32_t kvik_model_n_ctx_train(const kvik_model *model);
/* Special ids; -1 when the vocabulary has none. */
KVIK_API int32_t kvik_token_bos(const kvik_model *model);
KVIK_API int32_t kvik_token_eos(const kvik_model *model);
/* True for the tokens that end generation (EOS, end-of-turn markers). */
KVIK_API bool kvik_token_is_eog(const kvik_model *model, int32_t id);
/* The chat template's family ("chatml", ...); NULL when the model has none
 * kvik renders. */
KVIK_API const char *kvik_model_chat_template(const kvik_model *model);

/* ---- tokens ---------------------------------------------------------- */

/*
 * The token ids of len bytes of text, snprintf-style: returns how many ids
 * the text encodes to and writes the first min(that, max) of them to ids
 * (ids may be NULL when max is 0). add_special adds BOS/EOS as the
 * vocabulary asks; parse_special reads control-token texts
 * ("<|im_start|>") in the text as their ids, else they are plain text.
 * A negative kvik_status on failure.
 */
KVIK_API int64_t kvik_tokenize(const kvik_model *model, const char *text, size_t len, bool add_special,
                               bool parse_special, int32_t *ids, int64_t max);

/*
 * The text of n ids, snprintf-style: returns its length in bytes and writes
 * up to len bytes of it to buf, NUL-terminated when it fits (len > the
 * length). One leading space is dropped where the vocabulary adds one
 * when encoding (SentencePiece). render_special: control tokens give
 * their text, else nothing. A negative kvik_status on failure (an id
 * outside the vocabulary: KVIK_ERR_INVALID_ARG).
 */
KVIK_API int64_t kvik_detokenize(const kvik_model *model, const int32_t *ids, int64_t n, char *buf,
                                 size_t len, bool render_special);

/* The bytes one token stands for, as is (its leading space kept), snprintf-
 * style like kvik_detokenize; they may be part of a UTF-8 character. */
KVIK_API int64_t kvik_token_piece(const kvik_model *model, int32_t id, char *buf, size_t len,
                                  bool render_special);

/*
 * Streaming detokenizer: push ids one at a time and get back only whole
 * UTF-8 characters. Bytes of a character split across tokens are held
 * until it is complete; bytes that can never form one come out as U+FFFD,
 * so what comes out is always valid UTF-8. Every space is kept (the
 * stream usually continues a prompt). One detokenizer belongs to one
 * thread at a time.
 */
typedef struct kvik_detok kvik_detok;

KVIK_API kvik_status kvik_detok_new(const kvik_model *model, bool render_special, kvik_detok **out);
KVIK_API void kvik_detok_free(kvik_detok *d); /* NULL is fine */
/* Appends id; *text points to the bytes now complete (*len of them, maybe
 * 0; NUL-terminated), valid until the next call on d.
 * KVIK_ERR_INVALID_ARG for an id outside the vocabulary (state unchanged). */
KVIK_API kvik_status kvik_detok_push(kvik_detok *d, int32_t id, const char **text, size_t *len);
/* Ends the stream: a held incomplete character comes out as U+FFFD; the
 * detokenizer is then empty, ready for a new stream. */
KVIK_API kvik_status kvik_detok_flush(kvik_detok *d, const char **text, size_t *len);

/* ---- chat ------------------------------------------------------------ */

/* One message of a conversation (this struct does not grow). */
struct kvik_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8, NUL-terminated */
};

/*
 * The conversation msgs[0..n) rendered with the model's chat template, as
 * text (malloc'd, NUL-terminated, *len bytes; free with kvik_free). With
 * add_generation_prompt the text ends where the assistant's reply starts.
 * KVIK_ERR_UNSUPPORTED when the model has no template kvik renders,
 * KVIK_ERR_INVALID_ARG for a role the template does not accept.
 */
KVIK_API kvik_status kvik_chat_render(const kvik_model *model, const struct kvik_chat_msg *msgs, size_t n,
                                      bool add_generation_prompt, char **text, size_t *len, char *err,
                                      size_t err_len);

/*
 * The same conversation as the token ids to prompt the model with
 * (malloc'd, *n_ids of them; free with kvik_free), BOS included where the
 * vocabulary asks for it. The template's markers are special tokens;
 * message contents are always plain text, so a message that contains
 * "<|im_end|>" cannot end its turn. For contents without control-token
 * text the ids are those of kvik_tokenize(rendered text, add_special,
 * parse_special).
 */
KVIK_API kvik_status kvik_chat_tokenize(const kvik_model *model, const struct kvik_chat_msg *msgs, size_t n,
                                        bool add_generation_prompt, int32_t **ids, size_t *n_ids, char *err,
                                        size_t err_len);

/* ---- sampling -------------------------------------------------------- */

#define KVIK_SEED_RANDOM UINT64_C(0xFFFFFFFF) /* seed from the clock */

/* The chain runs penalties, top-k, top-p, min-p, temperature, then draws
 * (llama.cpp's order); temperature <= 0 is greedy (the most likely token,
 * nothing drawn). */
struct kvik_sampling_params {
    size_t size;             /* sizeof(struct kvik_sampling_params) */
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* 0: off */
    float top_p;             /* (0, 1]; 1: off */
    float min_p;             /* [0, 1]; 0: off */
    float repeat_penalty;    /* > 0; 1: off */
    int32_t repeat_last_n;   /* tokens the penalties look back over; 0: none */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    uint64_t seed;           /* KVIK_SEED_RANDOM: from the clock */
};

/* The defaults of `kvik run` and llama.cpp's command line. */
KVIK_API void kvik_sampling_params_init(struct kvik_sampling_params *p, size_t size);
static inline struct kvik_sampling_params kvik_sampling_default_params(void) {
    struct kvik_sampling_params p = {0};
    kvik_sampling_params_init(&p, sizeof p);
    return p;
}

/* ---- engine ---------------------------------------------------------- */

/*
 * A kvik_engine serves many requests at once over one model: a paged KV
 * cache allocated when it is created, continuous batching and chunked
 * prefill on one engine thread of its own. Requests come in token ids;
 * their output goes out through a callback on the engine thread. The same
 * path serves `kvik serve`. A greedy request gives the same tokens
 * whatever else runs beside it. All functions but kvik_engine_free may be
 * called from any thread; an event callback may call only those that
 * kvik_event_fn lists.
 */
typedef struct kvik_engine kvik_engine;

/* KV cache element types (their GGUF type ids). */
enum kvik_kv_type { KVIK_KV_F32 = 0, KVIK_KV_F16 = 1, KVIK_KV_Q8_0 = 8 };

struct kvik_engine_params {
    size_t size;              /* sizeof(struct kvik_engine_params) */
    int32_t n_threads;        /* forward-pass threads; 0: every CPU */
    int32_t n_ctx;            /* longest sequence (prompt + output); 0: the model's, bounded */
    int32_t max_seqs;         /* sequences running at once (each choice is one) */
    int32_t max_batch_tokens; /* tokens per step; at least max_seqs */
    int32_t prefill_chunk;    /* prompt tokens per step while others decode; 0: max_batch_tokens */
    int32_t max_queue;        /* requests waiting at most; beyond, submit answers KVIK_ERR_BUSY */
    int64_t kv_mem_mib;       /* KV pool size, at most 1 << 24 (16 TiB); 0: sized from
                                 max_seqs and n_ctx, bounded */
    int32_t kv_type;          /* enum kvik_kv_type */
    bool prefix_cache;        /* reuse the K/V earlier requests computed (default
                                 off; kvik serve turns it on): their full blocks,
                                 and a finished choice's partly filled last block,
                                 so a request continuing it (the next chat turn)
                                 computes only its new tokens; ev->n_cached
                                 counts the prompt tokens reused */
};

KVIK_API void kvik_engine_params_init(struct kvik_engine_params *p, size_t size);
static inline struct kvik_engine_params kvik_engine_default_params(void) {
    struct kvik_engine_params p = {0};
    kvik_engine_params_init(&p, sizeof p);
    return p;
}

/* Starts an engine over model (which must outlive it); params NULL:
 * defaults. KVIK_ERR_INVALID_ARG for a bad parameter, KVIK_ERR_NOMEM when
 * the KV pool cannot be allocated. */
KVIK_API kvik_status kvik_engine_new(const kvik_model *model, const struct kvik_engine_params *params,
                                     kvik_engine **out, char *err, size_t err_len);
/* Cancels what is still queued or running (every choice still gets its
 * final event), stops the engine thread and frees everything. */
KVIK_API void kvik_engine_free(kvik_engine *engine); /* NULL is fine */

/* The longest sequence (prompt + output tokens) one choice can have: the
 * context, or less when the KV pool is smaller. */
KVIK_API int32_t kvik_engine_max_tokens(const kvik_engine *engine);

typedef enum kvik_finish {
    KVIK_FINISH_NONE = 0,  /* a token event: the choice goes on */
    KVIK_FINISH_STOP,      /* an end-of-generation token, or the callback returned false */
    KVIK_FINISH_LENGTH,    /* max_tokens reached, or the context is full */
    KVIK_FINISH_CANCELLED, /* kvik_engine_cancel, or the engine shut down */
    KVIK_FINISH_ERROR,     /* the forward pass failed (event.error); other requests go on */
} kvik_finish;

/* "none", "stop", "length", "cancelled", "error". */
KVIK_API const char *kvik_finish_string(kvik_finish finish);

enum { KVIK_MAX_TOP_LOGPROBS = 20 };

/*
 * One event of a request: a token of a choice (finish == KVIK_FINISH_NONE),
 * or the end of a choice (every choice ends with exactly one). Pointers are
 * valid during the callback only.
 */
struct kvik_event {
    size_t size;              /* bytes of this struct the library filled in */
    uint64_t request_id;
    int32_t choice;           /* 0..n-1 */
    kvik_finish finish;
    /* the text that became complete with this event: whole UTF-8 characters
       only, so it may be empty (a character split across tokens comes with
       the token that completes it); a final event carries what was still
       held, as U+FFFD */
    const char *text;         /* [text_len], NUL-terminated */
    size_t text_len;
    /* token events only */
    int32_t token;
    float logprob;            /* log-probability of token under the model (raw logits);
                                 0 when the request asked for no logprobs */
    int32_t n_top;            /* top_ids/top_logprobs entries: the most likely tokens */
    const int32_t *top_ids;   /* [n_top] */
    const float *top_logprobs; /* [n_top] */
    /* final events only: counts of this choice */
    int32_t n_prompt;         /* prompt tokens */
    int32_t n_generated;      /* tokens emitted (an end-of-generation token is not) */
    int32_t n_cached;         /* prompt tokens whose K/V came from the prefix cache */
    const char *error;        /* KVIK_FINISH_ERROR: one line; else NULL */
};

/* Called on the engine thread, with no lock of the engine held; every
 * step of every request waits for it, so it must be quick (copy the event
 * into your own queue). From a callback, kvik_engine_cancel and
 * kvik_engine_submit may be called (they take the engine's lock only
 * briefly), and kvik_engine_max_tokens; the blocking calls
 * (kvik_generate, kvik_generate_tokens, kvik_engine_drain,
 * kvik_engine_free) wait for the engine thread, which is the one running
 * the callback, and deadlock: they must not be called there. Returning
 * false from a token event ends that choice (KVIK_FINISH_STOP); the return
 * value of a final event is ignored. */
typedef bool (*kvik_event_fn)(void *user, const struct kvik_event *ev);

struct kvik_request_params {
    size_t size;              /* sizeof(struct kvik_request_params) */
    int32_t max_tokens;       /* tokens to generate at most; 0, or more than fit:
                                 as many as fit (kvik_engine_max_tokens less the
                                 prompt), ending with KVIK_FINISH_LENGTH */
    int32_t n;                /* choices (independent continuations of one prompt; choice i
                                 samples with seed + i) */
    int32_t top_logprobs;     /* alternatives per token event, 0..KVIK_MAX_TOP_LOGPROBS;
                                 < 0: no logprobs at all */
    bool ignore_eos;          /* an end-of-generation token does not stop the choice */
    uint64_t cache_key;       /* prefix cache isolation: requests share cached K/V only
                                 with requests of the same key */
    const struct kvik_sampling_params *sampling; /* NULL: kvik_sampling_default_params();
                                                    copied at submission */
    kvik_event_fn on_event;   /* may be NULL for kvik_generate; it may call only
                                 what kvik_event_fn lists */
    void *user;               /* passed to on_event */
};

KVIK_API void kvik_request_params_init(struct kvik_request_params *p, size_t size);
static inline struct kvik_request_params kvik_request_default_params(void) {
    struct kvik_request_params p = {0};
    kvik_request_params_init(&p, sizeof p);
    return p;
}

/*
 * Queues a request for prompt[0..n_prompt) (copied); *id receives its id
 * (never 0). Returns KVIK_OK, after which on_event sees a final event for
 * every choice; KVIK_ERR_INVALID_ARG for a bad request (message in err),
 * a prompt that leaves no room for one token of output among them;
 * KVIK_ERR_BUSY when the queue is full or the engine is draining.
 */
KVIK_API kvik_status kvik_engine_submit(kvik_engine *engine, const int32_t *prompt, size_t n_prompt,
                                        const struct kvik_request_params *params, uint64_t *id, char *err,
                                        size_t err_len);

/* Cancels a request (all its choices end with KVIK_FINISH_CANCELLED, soon).
 * Unknown or finished ids are ignored. */
KVIK_API void kvik_engine_cancel(kvik_engine *engine, uint64_t id);

/* Stops accepting requests and waits until those in flight have finished,
 * cancelling what is left after timeout_ms (< 0: no limit). */
KVIK_API void kvik_engine_drain(kvik_engine *engine, int64_t timeout_ms);

/*
 * Blocking generation: submits prompt[0..n_prompt), waits for the end and
 * sets *text to the generated text (malloc'd, NUL-terminated; kvik_free)
 * and *finish (may be NULL) to how it ended; params NULL: the defaults.
 * params->n must be 1; params->on_event, if set, sees every event on the
 * way (streaming; returning false stops). A forward-pass failure still
 * returns KVIK_OK with the text so far, *finish KVIK_FINISH_ERROR and the
 * message in err.
 */
KVIK_API kvik_status kvik_generate_tokens(kvik_engine *engine, const int32_t *prompt, size_t n_prompt,
                                          const struct kvik_request_params *params, char **text,
                                          kvik_finish *finish, char *err, size_t err_len);

/* kvik_generate_tokens on a text prompt, tokenized as `kvik run` does it
 * (BOS as the vocabulary asks, control-token texts as plain text). */
KVIK_API kvik_status kvik_generate(kvik_engine *engine, const char *prompt,
                                   const struct kvik_request_params *params, char **text,
                                   kvik_finish *finish, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* KVIK_H */
