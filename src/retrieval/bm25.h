/*
 * bm25.h — a BM25 index over short texts (chunks), each with an external
 * 64-bit id, and reciprocal rank fusion of ranked lists.
 *
 *  - Words (bm25_words): maximal runs of ASCII letters and digits, and of
 *    bytes >= 0x80 (the letters of other scripts, kept whole), ASCII
 *    lowercased. Nothing else: no stemming, no stop words (the IDF weighs
 *    common words down). A word longer than BM25_MAX_WORD bytes is cut.
 *  - Score of a text d for query words q (each distinct word once):
 *    sum of idf(w) * tf(w,d) * (k1 + 1) / (tf(w,d) + k1 * (1 - b + b * |d| / avgdl)),
 *    idf(w) = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5)), over the live
 *    texts (N of them, average length avgdl words).
 *  - Adding an id that exists replaces its text; deletes are immediate.
 *    Searches run at once with each other; adds and deletes wait for them
 *    (a readers-writer lock).
 */
#ifndef KVIK_RETRIEVAL_BM25_H
#define KVIK_RETRIEVAL_BM25_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define BM25_K1 1.2
#define BM25_B 0.75
enum { BM25_MAX_WORD = 64 };

struct bm25;

struct bm25_hit {
    uint64_t id;
    float score;
};

struct bm25 *bm25_new(double k1, double b);
void bm25_free(struct bm25 *ix); /* NULL is fine */

/* Indexes text[0..len) as id (replacing what id held). */
kvik_status bm25_add(struct bm25 *ix, uint64_t id, const char *text, size_t len);
/* KVIK_ERR_NOT_FOUND when id is not there. */
kvik_status bm25_delete(struct bm25 *ix, uint64_t id);

/* Whether the text id may be a result (a filter); NULL: every text. */
typedef bool (*bm25_accept_fn)(uint64_t id, void *ctx);

/* The best k texts for query[0..len), best first, scores above 0 only;
 * returns their count (0 when no word of the query is indexed), or
 * KVIK_ERR_NOMEM. */
int bm25_search(struct bm25 *ix, const char *query, size_t len, int k, bm25_accept_fn accept, void *ctx,
                struct bm25_hit *out);

int64_t bm25_count(struct bm25 *ix); /* live texts */

/* Calls fn on each word of text in order (word: its bytes, lowercased,
 * at most BM25_MAX_WORD); returns the number of words. */
int64_t bm25_words(const char *text, size_t len, void (*fn)(const char *word, size_t n, void *ctx), void *ctx);

/*
 * Reciprocal rank fusion: each id's score is the sum over the lists of
 * 1 / (k + rank), rank counted from 1 in each list that holds it. The best
 * top ids of lists[0..n_lists) (list i: ids[i][0..n[i]), best first) into
 * out, best first (ties: the smaller id first); returns their count, or
 * KVIK_ERR_NOMEM.
 */
int rrf_fuse(const uint64_t *const *ids, const int *n, int n_lists, double k, int top, struct bm25_hit *out);

#endif /* KVIK_RETRIEVAL_BM25_H */
