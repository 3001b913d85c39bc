/*
 * bench_tokenizer.h — measurements behind `kvik bench tokenizer`: encoding
 * speed (MB/s of text, tokens/s) over a corpus, single-threaded and on a
 * pool through tokenizer_encode_batch, in three situations:
 *
 *   stream  every document of the corpus encoded once, word caches cleared
 *           before each repetition: text the tokenizer has not seen (words
 *           recur across documents, as they do in real text);
 *   repeat  one document (the corpus's first documents, at least 4 KiB)
 *           encoded again and again, as many times as make up the corpus's
 *           size: the cache-friendly case;
 *   first   a fresh process loads the tokenizer and makes its first calls
 *           (the first documents, at least 64 KiB): start-up cost.
 *
 * The corpus is cut into documents at blank lines: a document ends right
 * after the first "\n\n" from its start, or, once that would make it longer
 * than TOKBENCH_DOC_MAX bytes, after the first "\n" at or past that length,
 * or at the end of the file. bench/tokenizer-peer.py cuts it the same way.
 */
#ifndef KVIK_TOOLS_BENCH_TOKENIZER_H
#define KVIK_TOOLS_BENCH_TOKENIZER_H

#include "base/base.h"
#include "tokenizer/tokenizer.h"

#define TOKBENCH_DOC_MAX 16384
#define TOKBENCH_REPEAT_MIN 4096
#define TOKBENCH_FIRST_MIN 65536

struct tokbench_corpus {
    char *data;                 /* [size] the file */
    size_t size;
    struct tokenizer_doc *docs; /* [n_docs] into data, back to back */
    int64_t n_docs;
    size_t max_doc;             /* longest document, bytes */
};

kvik_status tokbench_corpus_load(const char *path, struct tokbench_corpus *c, struct kvik_err *err);
void tokbench_corpus_free(struct tokbench_corpus *c);

/* How many first documents it takes to reach `bytes` (all of them if the
 * corpus is smaller); their total size in *got. */
int64_t tokbench_prefix_docs(const struct tokbench_corpus *c, size_t bytes, size_t *got);

/* One measurement: median seconds over the repetitions and the rates it gives. */
struct tokbench_rate {
    double seconds;
    double mb_s;  /* 1e6 bytes of text per second */
    double tok_s; /* tokens per second */
};

struct tokbench_result {
    uint64_t bytes, tokens;  /* of one stream pass */
    int64_t docs;
    uint32_t crc32;          /* CRC-32 of all ids of a stream pass, as little-endian int32 */
    double cache_hit_rate;   /* word-cache hits / lookups in a 1-thread stream pass */
    size_t repeat_doc_bytes; /* the repeated document */
    int64_t repeat_count;
    uint64_t repeat_tokens;  /* tokens of one repeat pass */
    struct tokbench_rate stream_1t, stream_nt, stream_nocache_1t, repeat_1t, repeat_nt;
};

/* Runs the stream and repeat measurements (pool gives the N-thread ones;
 * reps >= 1 each). Before timing, the ids are checked to be the same with
 * the cache on, off and through the batch API (KVIK_ERR_FORMAT, "ids
 * differ", if not: a bug). */
kvik_status tokbench_run(const struct tokenizer *tok, const struct tokbench_corpus *c, struct pool *pool,
                         int reps, struct tokbench_result *r, struct kvik_err *err);

/* The "first" measurement, to be made in a fresh process: opens the GGUF
 * and loads its tokenizer (load_ms), then encodes the first documents:
 * one call each when threads == 1, else one tokenizer_encode_batch on a
 * new pool (created in pool_ms). */
struct tokbench_first {
    double load_ms, pool_ms, first_ms;
    uint64_t bytes, tokens;
};
kvik_status tokbench_first_call(const char *model_path, const struct tokbench_corpus *c, int threads,
                                struct tokbench_first *out, struct kvik_err *err);

/* Runs argv[0] (a path) with argv, env_add ("NAME=VALUE" strings added to
 * the environment, NULL-terminated, or NULL), capturing up to cap - 1
 * bytes of its stdout into out (NUL-terminated); stderr passes through.
 * Returns its exit status (-1 if it could not run or died of a signal)
 * and its wall time in *ms. */
int tokbench_spawn(char *const argv[], char *const env_add[], char *out, size_t cap, double *ms);

uint32_t tokbench_crc32(uint32_t crc, const void *data, size_t n);

#endif /* KVIK_TOOLS_BENCH_TOKENIZER_H */
