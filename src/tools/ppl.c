/*
 * ppl.c — scoring rows of logits for perplexity and KL divergence, their
 * statistics, and the base file of log-probabilities (ppl.h).
 *
 * The base file, little-endian (what kvik runs on):
 *
 *   offset  size          field
 *   0       8             magic "KVIKLOGP"
 *   8       4             u32 version, 1
 *   12      4             u32 n_ctx, >= 4: tokens per chunk
 *   16      4             u32 n_vocab
 *   20      4             u32 n_chunk, >= 1
 *   24      4             u32 top_k, 1 .. min(1024, n_vocab)
 *   28      4             u32 n_scored = n_ctx - 1 - n_ctx / 2 (scored tokens per chunk)
 *   32      4 * T         i32 tokens[T], T = n_chunk * n_ctx, each < n_vocab: the text's
 *                         tokens as tokenized (not with BOS put in front of each chunk)
 *   32+4T   R * (8 + 8k)  records, R = n_chunk * n_scored, k = top_k, in chunk order:
 *             +0  4         f32 log p(the token that came), finite, <= 0
 *             +4  4         f32 log of the probability outside the top k, <= 0 or -inf
 *             +8  8k        { i32 id, f32 log p } k times: the k most likely ids, log p
 *                           finite, <= 0, non-increasing; ids distinct and < n_vocab
 *
 * The file is exactly that long. Log-probabilities are log-softmax in
 * double rounded to f32.
 */
#include <math.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"
#include "tools/ppl.h"

/* ---- the text ------------------------------------------------------------- */

int32_t *ppl_tokenize_file(const struct tokenizer *tok, const char *path, int64_t *n, struct kvik_err *err) {
    struct mapped_file f;
    if (file_map(&f, path, err)) {
        struct kvik_err e2 = *err;
        err_set(err, KVIK_ERR_IO, "cannot read %s", e2.msg);
        return NULL;
    }
    const char *text = f.data ? (const char *)f.data : "";
    size_t len = f.size;
    if (len && text[len - 1] == '\n') len--;
    int32_t *ids = NULL;
    int64_t k = tokenizer_encode(tok, text, len, true, false, NULL, 0);
    if (k >= 0 && (ids = malloc(sizeof(int32_t) * (size_t)(k ? k : 1))))
        k = tokenizer_encode(tok, text, len, true, false, ids, k);
    file_unmap(&f);
    if (k < 0 || !ids) {
        free(ids);
        err_set(err, k < 0 ? (kvik_status)k : KVIK_ERR_NOMEM, "cannot tokenize %s", path);
        return NULL;
    }
    *n = k;
    return ids;
}

/* ---- one row ---------------------------------------------------------------- */

/* The row's first largest logit (NaNs never win), its id, and the sum of
 * exp(l - max) in double. */
struct row_sums {
    float max;
    int32_t argmax;
    double sum;
    double lse; /* max + log(sum) */
};

static struct row_sums row_sums(const float *l, int n) {
    struct row_sums r = {l[0], 0, 0, 0};
    for (int i = 1; i < n; i++)
        if (l[i] > r.max || r.max != r.max) r.max = l[i], r.argmax = i;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)l[i] - r.max);
    r.sum = s;
    r.lse = r.max + log(s);
    return r;
}

/* log(rest / sum) as a stored f32, -inf when nothing is left. */
static float log_rest(double sum, double top) {
    double rest = sum - top;
    return rest > 0 ? (float)(log(rest) - log(sum)) : -INFINITY;
}

static inline float rd_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}
static inline int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

void ppl_score(const float *logits, int n_vocab, int32_t next, struct ppl_row *out) {
    struct row_sums r = row_sums(logits, n_vocab);
    *out = (struct ppl_row){.nll = r.lse - (double)logits[next], .argmax = r.argmax};
}

void ppl_score_record(const float *logits, int n_vocab, int32_t next, int top_k, uint8_t *rec,
                      struct ppl_row *out) {
    struct row_sums r = row_sums(logits, n_vocab);
    *out = (struct ppl_row){.nll = r.lse - (double)logits[next], .argmax = r.argmax};
    /* the top_k largest logits, descending; among equal ones the lower id first */
    int32_t ids[PPL_TOPK_MAX];
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        float v = logits[i];
        if (v != v || (n == top_k && !(v > logits[ids[n - 1]]))) continue;
        int j = n < top_k ? n++ : n - 1;
        while (j > 0 && v > logits[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    for (; n < top_k; n++) ids[n] = n; /* all-NaN rows only: a well-formed record all the same */
    double top = 0;
    uint8_t *p = rec + 8;
    for (int j = 0; j < top_k; j++, p += 8) {
        float lp = (float)((double)logits[ids[j]] - r.lse);
        if (!(lp <= 0)) lp = 0;
        memcpy(p, &ids[j], 4);
        memcpy(p + 4, &lp, 4);
        top += exp((double)logits[ids[j]] - r.max);
    }
    float lp_next = (float)((double)logits[next] - r.lse), lr = log_rest(r.sum, top);
    memcpy(rec, &lp_next, 4);
    memcpy(rec + 4, &lr, 4);
}

void ppl_score_kld(const float *logits, int n_vocab, int32_t next, const uint8_t *rec, int top_k,
                   struct ppl_row *out) {
    struct row_sums r = row_sums(logits, n_vocab);
    *out = (struct ppl_row){.nll = r.lse - (double)logits[next], .argmax = r.argmax};
    float lp_next_base = rd_f32(rec), lr_base = rd_f32(rec + 4);
    out->nll_base = -(double)lp_next_base;
    double kld = 0, top = 0;
    const uint8_t *p = rec + 8;
    for (int j = 0; j < top_k; j++, p += 8) {
        int32_t id = rd_i32(p);
        float lp_base = rd_f32(p + 4);
        float lp = (float)((double)logits[id] - r.lse);
        if (!(lp <= 0)) lp = 0;
        kld += exp((double)lp_base) * ((double)lp_base - (double)lp);
        top += exp((double)logits[id] - r.max);
    }
    if (lr_base > -INFINITY) {
        float lr = log_rest(r.sum, top);
        /* the model put (to double precision) nothing outside the base's top k */
        double lq = lr > -INFINITY ? (double)lr : -745.0;
        kld += exp((double)lr_base) * ((double)lr_base - lq);
    }
    out->kld = kld;
    float lp_next = (float)((double)logits[next] - r.lse);
    out->dp = exp((double)lp_next) - exp((double)lp_next_base);
    out->same_top = r.argmax == rd_i32(rec + 8);
}

/* ---- rows in parallel ------------------------------------------------------------ */

struct rows_job {
    const float *logits;
    int n_rows, n_vocab, top_k;
    const int32_t *next;
    uint8_t *recs_out;
    const uint8_t *recs_in;
    struct ppl_row *out;
};

static void rows_worker(void *arg, int ith, int nth) {
    const struct rows_job *j = arg;
    size_t rb = ppl_record_bytes(j->top_k);
    for (int i = ith; i < j->n_rows; i += nth) {
        const float *l = j->logits + (size_t)i * (size_t)j->n_vocab;
        if (j->recs_out) ppl_score_record(l, j->n_vocab, j->next[i], j->top_k, j->recs_out + (size_t)i * rb, &j->out[i]);
        else if (j->recs_in) ppl_score_kld(l, j->n_vocab, j->next[i], j->recs_in + (size_t)i * rb, j->top_k, &j->out[i]);
        else ppl_score(l, j->n_vocab, j->next[i], &j->out[i]);
    }
}

void ppl_score_rows(struct pool *pool, const float *logits, int n_rows, int n_vocab, const int32_t *next,
                    int top_k, uint8_t *recs_out, const uint8_t *recs_in, struct ppl_row *out) {
    struct rows_job j = {logits, n_rows, n_vocab, top_k, next, recs_out, recs_in, out};
    if (pool) pool_run(pool, rows_worker, &j);
    else rows_worker(&j, 0, 1);
}

/* ---- statistics ------------------------------------------------------------------- */

void ppl_stats_add(struct ppl_stats *s, double nll) {
    s->sum += nll;
    s->sum2 += nll * nll;
    s->count++;
}

double ppl_stats_ppl(const struct ppl_stats *s) { return s->count ? exp(s->sum / (double)s->count) : 0; }

/* The standard error of the mean of values whose sums are sum, sum2. */
static double std_err(double sum, double sum2, int64_t n) {
    if (n < 2) return 0;
    double m = sum / (double)n, var = sum2 / (double)n - m * m;
    return var > 0 ? sqrt(var / (double)(n - 1)) : 0;
}

double ppl_stats_err(const struct ppl_stats *s) {
    return ppl_stats_ppl(s) * std_err(s->sum, s->sum2, s->count);
}

double ppl_percentile(const double *sorted, int64_t n, double fraction) {
    if (fraction <= 0) return sorted[0];
    if (fraction >= 1) return sorted[n - 1];
    double p = fraction * (double)(n - 1);
    int64_t i = (int64_t)p;
    p -= (double)i;
    return (1 - p) * sorted[i] + p * sorted[i + 1 < n ? i + 1 : n - 1];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

kvik_status ppl_kld_summarize(const struct ppl_row *rows, int64_t n, struct ppl_kld_summary *s,
                              struct kvik_err *err) {
    *s = (struct ppl_kld_summary){.count = n};
    double *kld = malloc(sizeof(double) * (size_t)n), *dp = malloc(sizeof(double) * (size_t)n);
    if (!kld || !dp) {
        free(kld), free(dp);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    double a = 0, a2 = 0, b = 0, b2 = 0, ab = 0, k = 0, k2 = 0, d = 0, d2 = 0, dmax = 0;
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) {
        const struct ppl_row *r = &rows[i];
        a += r->nll, a2 += r->nll * r->nll;
        b += r->nll_base, b2 += r->nll_base * r->nll_base;
        ab += r->nll * r->nll_base;
        k += r->kld, k2 += r->kld * r->kld;
        d += r->dp, d2 += r->dp * r->dp;
        if (fabs(r->dp) > dmax) dmax = fabs(r->dp);
        same += r->same_top;
        kld[i] = r->kld, dp[i] = r->dp;
    }
    double dn = (double)n;
    double ea = std_err(a, a2, n), eb = std_err(b, b2, n);
    /* the covariance of the two means, as llama-perplexity takes it */
    double cov = n >= 10 ? (ab / dn - (a / dn) * (b / dn)) / (dn - 1) : 0;
    s->ppl = exp(a / dn), s->ppl_err = s->ppl * ea;
    s->ppl_base = exp(b / dn), s->ppl_base_err = s->ppl_base * eb;
    s->ln_ratio = a / dn - b / dn;
    double v = ea * ea + eb * eb - 2 * cov;
    s->ln_ratio_err = v > 0 ? sqrt(v) : 0;
    s->kld_mean = k / dn, s->kld_err = std_err(k, k2, n);
    s->dp_mean = d / dn, s->dp_rms = sqrt(d2 / dn), s->dp_max = dmax;
    s->same_top = (double)same / dn;
    qsort(kld, (size_t)n, sizeof *kld, cmp_double);
    qsort(dp, (size_t)n, sizeof *dp, cmp_double);
    s->kld_median = n % 2 ? kld[n / 2] : 0.5 * (kld[n / 2 - 1] + kld[n / 2]);
    s->kld_p99 = ppl_percentile(kld, n, 0.99);
    s->kld_max = kld[n - 1];
    s->dp_p1 = ppl_percentile(dp, n, 0.01);
    s->dp_p99 = ppl_percentile(dp, n, 0.99);
    free(kld), free(dp);
    return KVIK_OK;
}

/* ---- the base file ------------------------------------------------------------------ */

static const char MAGIC[8] = {'K', 'V', 'I', 'K', 'L', 'O', 'G', 'P'};
enum { VERSION = 1 };

int32_t ppl_base_token(const struct ppl_base *b, int64_t i) { return rd_i32(b->tokens + 4 * (size_t)i); }

const uint8_t *ppl_base_record(const struct ppl_base *b, int c, int j) {
    return b->records + ((size_t)c * (size_t)b->n_scored + (size_t)j) * ppl_record_bytes(b->top_k);
}

kvik_status ppl_base_parse(const uint8_t *data, size_t size, struct ppl_base *out, struct kvik_err *err) {
    *out = (struct ppl_base){0};
    if (size < PPL_BASE_HEADER || memcmp(data, MAGIC, sizeof MAGIC))
        return err_set(err, KVIK_ERR_FORMAT, "not a kvik log-probability file (no KVIKLOGP header)");
    uint32_t version = rd_u32(data + 8), n_ctx = rd_u32(data + 12), n_vocab = rd_u32(data + 16);
    uint32_t n_chunk = rd_u32(data + 20), top_k = rd_u32(data + 24), n_scored = rd_u32(data + 28);
    if (version != VERSION) return err_set(err, KVIK_ERR_FORMAT, "version %u, this kvik reads version %d", version, VERSION);
    if (n_ctx < PPL_MIN_CTX || n_ctx > (1u << 24)) return err_set(err, KVIK_ERR_FORMAT, "bad context size %u", n_ctx);
    if (n_vocab < 1 || n_vocab > (1u << 28)) return err_set(err, KVIK_ERR_FORMAT, "bad vocabulary size %u", n_vocab);
    if (n_chunk < 1 || n_chunk > (1u << 24)) return err_set(err, KVIK_ERR_FORMAT, "bad chunk count %u", n_chunk);
    if (top_k < 1 || top_k > PPL_TOPK_MAX || top_k > n_vocab)
        return err_set(err, KVIK_ERR_FORMAT, "bad top-k %u (vocabulary %u)", top_k, n_vocab);
    if (n_scored != (uint32_t)ppl_n_scored((int)n_ctx))
        return err_set(err, KVIK_ERR_FORMAT, "%u scored tokens per chunk, a context of %u scores %d", n_scored, n_ctx,
                       ppl_n_scored((int)n_ctx));
    uint64_t n_tok = (uint64_t)n_chunk * n_ctx, n_rec = (uint64_t)n_chunk * n_scored, rb = ppl_record_bytes((int)top_k);
    uint64_t want, rec_bytes;
    if (mul_overflows_u64(n_rec, rb, &rec_bytes) || add_overflows_u64(PPL_BASE_HEADER + 4 * n_tok, rec_bytes, &want))
        return err_set(err, KVIK_ERR_FORMAT, "sizes overflow");
    if ((uint64_t)size != want)
        return err_set(err, KVIK_ERR_FORMAT, "%s: %zu bytes, its header says %llu", size < want ? "truncated" : "trailing bytes",
                       size, (unsigned long long)want);
    out->n_ctx = (int)n_ctx, out->n_vocab = (int)n_vocab, out->n_chunk = (int)n_chunk;
    out->top_k = (int)top_k, out->n_scored = (int)n_scored;
    out->tokens = data + PPL_BASE_HEADER;
    out->records = out->tokens + 4 * n_tok;
    for (uint64_t i = 0; i < n_tok; i++) {
        int32_t t = ppl_base_token(out, (int64_t)i);
        if (t < 0 || (uint32_t)t >= n_vocab)
            return err_set(err, KVIK_ERR_FORMAT, "token %llu is %d, out of the vocabulary (%u)", (unsigned long long)i, t, n_vocab);
    }
    /* one bit per id, set for the ids of the record being checked */
    uint64_t *seen = calloc((n_vocab + 63) / 64, sizeof(uint64_t));
    if (!seen) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    kvik_status st = KVIK_OK;
    for (uint64_t r = 0; r < n_rec && !st; r++) {
        const uint8_t *p = out->records + r * rb;
        float lp_next = rd_f32(p), lr = rd_f32(p + 4), prev = 0;
        if (!isfinite(lp_next) || lp_next > 0 || !(lr <= 0)) {
            st = err_set(err, KVIK_ERR_FORMAT, "record %llu: bad log-probabilities", (unsigned long long)r);
            break;
        }
        uint32_t j = 0;
        for (; j < top_k; j++) {
            int32_t id = rd_i32(p + 8 + 8 * j);
            float lp = rd_f32(p + 12 + 8 * j);
            if (id < 0 || (uint32_t)id >= n_vocab || (seen[id / 64] >> (id % 64) & 1) || !isfinite(lp) || lp > 0 ||
                (j && lp > prev)) {
                st = err_set(err, KVIK_ERR_FORMAT, "record %llu: bad top-k entry %u", (unsigned long long)r, j);
                break;
            }
            seen[id / 64] |= 1ull << (id % 64);
            prev = lp;
        }
        for (uint32_t i = 0; i < j; i++) {
            int32_t id = rd_i32(p + 8 + 8 * i);
            seen[id / 64] &= ~(1ull << (id % 64));
        }
    }
    free(seen);
    if (st) *out = (struct ppl_base){0};
    return st;
}

kvik_status ppl_base_write_header(FILE *f, int n_ctx, int n_vocab, int n_chunk, int top_k, const int32_t *tokens,
                                  struct kvik_err *err) {
    uint8_t h[PPL_BASE_HEADER];
    uint32_t v[6] = {VERSION, (uint32_t)n_ctx, (uint32_t)n_vocab, (uint32_t)n_chunk, (uint32_t)top_k,
                     (uint32_t)ppl_n_scored(n_ctx)};
    memcpy(h, MAGIC, sizeof MAGIC);
    memcpy(h + 8, v, sizeof v);
    size_t n_tok = (size_t)n_chunk * (size_t)n_ctx;
    if (fwrite(h, 1, sizeof h, f) != sizeof h || fwrite(tokens, 4, n_tok, f) != n_tok)
        return err_set(err, KVIK_ERR_IO, "write failed");
    return KVIK_OK;
}
