/*
 * test_attn.c — the tiled attention kernel of every ISA (tensor.h,
 * attention) and the forward pass around it.
 *
 * 1. Each kernel against a double-precision softmax over the same cached
 *    values (read back through the type's to_float), for caches of F32, F16
 *    and Q8_0 rows, grouped-query ratios 1/3/4/8, contexts of 1 to 1100
 *    positions, the positions handed out in one run or in runs that break
 *    where a paged cache's blocks do (16, 7, and a mix of odd sizes), and
 *    several query tokens per call (a prefill block) with their own causal
 *    limits.
 * 2. Batch invariance, bit for bit: a query row alone, among other rows
 *    (other heads, earlier and later tokens), and with the cache split into
 *    different runs, gives the same output.
 * 3. The forward pass on the default model: sequences prefilling and
 *    decoding in one batch over a paged cache give each token the logits it
 *    gets alone.
 */
#include <math.h>
#include <stdlib.h>

#include "kv/kv_paged.h"
#include "model/model.h"
#include "tensor/tensor.h"
#include "test.h"

enum { KV_HEADS = 2, HEAD = 1 }; /* cached rows hold two heads; calls read the second */

/* A synthetic cache of one sequence: n positions whose rows are laid out in
 * runs of the lengths of `pattern` (cycled; {0}: one run), each run its own
 * allocation. kf/vf: the chosen head's values as the kernels must see them. */
struct test_cache {
    int type, hd, n;
    size_t row_bytes;
    struct attn_span spans[1200];
    void *blocks[2][1200];
    int n_spans;
    float *kf, *vf; /* [n][hd] */
};

static void cache_build(struct test_cache *c, int type, int hd, int n, const int *pattern, int n_pattern,
                        uint64_t seed) {
    int rf = KV_HEADS * hd;
    const struct type_traits *tt = tensor_type_traits(type);
    c->type = type, c->hd = hd, c->n = n, c->n_spans = 0;
    c->row_bytes = tensor_row_size(type, rf);
    c->kf = malloc(sizeof(float) * (size_t)n * hd);
    c->vf = malloc(sizeof(float) * (size_t)n * hd);
    float *row = malloc(sizeof(float) * (size_t)rf), *back = malloc(sizeof(float) * (size_t)rf);
    size_t head_off = tensor_row_size(type, (int64_t)HEAD * hd);
    uint64_t rng = seed;
    for (int p = 0, pi = 0; p < n; pi++) {
        int len = pattern[pi % n_pattern] ? pattern[pi % n_pattern] : n;
        if (len > n - p) len = n - p;
        uint8_t *blk[2];
        for (int kv = 0; kv < 2; kv++) blk[kv] = c->blocks[kv][c->n_spans] = mem_alloc_aligned(c->row_bytes * len);
        for (int j = 0; j < len; j++)
            for (int kv = 0; kv < 2; kv++) {
                for (int d = 0; d < rf; d++) row[d] = test_rand_uniform(&rng, -1, 1);
                uint8_t *dst = blk[kv] + (size_t)j * c->row_bytes;
                if (type == TENSOR_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t)rf);
                else tt->from_float(row, dst, rf);
                if (type == TENSOR_TYPE_F32) memcpy(back, dst, sizeof(float) * (size_t)rf);
                else tt->to_float(dst, back, rf);
                memcpy((kv ? c->vf : c->kf) + (size_t)(p + j) * hd, back + (size_t)HEAD * hd,
                       sizeof(float) * (size_t)hd);
            }
        c->spans[c->n_spans++] = (struct attn_span){blk[0] + head_off, blk[1] + head_off, len};
        p += len;
    }
    free(row), free(back);
}

static void cache_free(struct test_cache *c) {
    for (int i = 0; i < c->n_spans; i++) mem_free(c->blocks[0][i]), mem_free(c->blocks[1][i]);
    free(c->kf), free(c->vf);
}

/* out = softmax over positions 0..last of scale q.k, times v, in doubles.
 * A Q8_0 cache is read with the query quantized to Q8_0 (tensor.h): q
 * here is then what its quants and scales stand for. */
static void attn_ref_window(const struct test_cache *c, const float *q_in, int first, int last, float scale,
                            double *out) {
    int hd = c->hd;
    float q[256];
    memcpy(q, q_in, sizeof(float) * (size_t)hd);
    if (c->type == TENSOR_TYPE_Q8_0) {
        const struct type_traits *tt = tensor_type_traits(TENSOR_TYPE_Q8_0);
        uint8_t qb[8 * 34];
        tt->from_float(q_in, qb, hd);
        tt->to_float(qb, q, hd);
    }
    double *w = malloc(sizeof(double) * (size_t)(last + 1)), mx = -INFINITY, sum = 0;
    for (int j = first; j <= last; j++) {
        double s = 0;
        for (int d = 0; d < hd; d++) s += (double)q[d] * c->kf[(size_t)j * hd + d];
        w[j] = s * scale;
        mx = fmax(mx, w[j]);
    }
    for (int j = first; j <= last; j++) sum += (w[j] = exp(w[j] - mx));
    for (int d = 0; d < hd; d++) out[d] = 0;
    for (int j = first; j <= last; j++)
        for (int d = 0; d < hd; d++) out[d] += w[j] / sum * c->vf[(size_t)j * hd + d];
    free(w);
}

static void attn_ref(const struct test_cache *c, const float *q_in, int last, float scale, double *out) {
    attn_ref_window(c, q_in, 0, last, scale, out);
}

static double bf16_round(float x) { return (double)bf16_to_fp32(fp32_to_bf16(x)); }

/* The same softmax as a kernel with bf16 products computes it (tensor.h,
 * attn_bf16): q, k, v and each weight rounded to bf16 before they are
 * multiplied, the weights e^(s - m) against the running maximum m of the
 * tiles so far (TENSOR_ATTN_TILE positions at absolute boundaries), the
 * rest in doubles. What it leaves to the kernel's own arithmetic is a
 * weight on the other side of a bf16 rounding boundary now and then. */
static void attn_ref_bf16(const struct test_cache *c, const float *q_in, int first, int last, float scale,
                          double *out) {
    int hd = c->hd;
    double q[256], o[256] = {0}, m = -INFINITY, l = 0;
    for (int d = 0; d < hd; d++) q[d] = bf16_round(q_in[d]);
    enum { TT = TENSOR_ATTN_TILE };
    for (int t0 = first / TT * TT; t0 <= last; t0 += TT) {
        int lo = t0 > first ? t0 : first, hi = t0 + TT - 1 < last ? t0 + TT - 1 : last;
        double s[TT], mt = -INFINITY;
        for (int j = lo; j <= hi; j++) {
            double dot = 0;
            for (int d = 0; d < hd; d++) dot += q[d] * bf16_round(c->kf[(size_t)j * hd + d]);
            s[j - t0] = (double)((float)dot * scale);
            mt = fmax(mt, s[j - t0]);
        }
        double mn = fmax(m, mt), alpha = m == -INFINITY ? 0 : exp(m - mn), sum = 0;
        for (int d = 0; d < hd; d++) o[d] *= alpha;
        for (int j = lo; j <= hi; j++) {
            double p = exp(s[j - t0] - mn), pb = bf16_round((float)p);
            sum += p;
            for (int d = 0; d < hd; d++) o[d] += pb * bf16_round(c->vf[(size_t)j * hd + d]);
        }
        l = l * alpha + sum;
        m = mn;
    }
    for (int d = 0; d < hd; d++) out[d] = o[d] / l;
}

/* Whether kt computes this cache's attention with bf16 products. */
static bool bf16_attn(const struct tensor_kernels *kt, int type, int hd) {
    return kt->attn_bf16 && hd % 32 == 0;
}

/* A kernel with bf16 products, within this of attn_ref_bf16 (a weight
 * rounded the other way moves an output by 2^-8 of that weight's share). */
#define BF16_ATTN_TOL 3e-4

/* Query rows: `group` heads for each of n_tok tokens; q values sharpened so
 * scores span several units. */
struct test_rows {
    int n;
    int32_t window; /* 0: none */
    const float *q[64];
    float *out[64];
    int32_t last[64];
    float *qbuf, *obuf;
};

static void rows_make(struct test_rows *r, int hd, const int32_t *lasts, int n_tok, int group, uint64_t *rng) {
    r->n = n_tok * group;
    r->window = 0;
    r->qbuf = mem_alloc_aligned(sizeof(float) * (size_t)r->n * hd);
    r->obuf = mem_alloc_aligned(sizeof(float) * (size_t)r->n * hd);
    for (int i = 0; i < r->n * hd; i++) r->qbuf[i] = 3.0f * test_rand_uniform(rng, -1, 1);
    for (int i = 0; i < r->n; i++) {
        r->q[i] = r->qbuf + (size_t)i * hd, r->out[i] = r->obuf + (size_t)i * hd;
        r->last[i] = lasts[i / group];
    }
}

static void rows_free(struct test_rows *r) { mem_free(r->qbuf), mem_free(r->obuf); }

static void run_kernel(const struct tensor_kernels *kt, const struct test_cache *c, const struct test_rows *r,
                       float scale) {
    float *scratch = mem_alloc_aligned(sizeof(float) * tensor_attn_scratch_floats(c->hd, r->n));
    struct attn_kv kv = {.type = c->type, .row_bytes = c->row_bytes, .spans = c->spans, .n_spans = c->n_spans};
    struct attn_rows rows = {.n = r->n, .q = r->q, .out = r->out, .last = r->last, .window = r->window};
    kt->attn(c->hd, scale, &kv, &rows, scratch);
    mem_free(scratch);
}

static const int k_flat[] = {0}, k_blocks16[] = {16}, k_blocks7[] = {7}, k_mixed[] = {5, 1, 13, 2, 16, 3};
static const struct {
    const int *p;
    int n;
    const char *name;
} k_patterns[] = {{k_flat, 1, "one run"}, {k_blocks16, 1, "runs of 16"}, {k_blocks7, 1, "runs of 7"},
                  {k_mixed, 6, "runs of 5,1,13,2,16,3"}};

TEST(attn_matches_double_reference) {
    static const int types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    static const int hds[] = {64, 128, 32, 96, 48, 12};
    static const int groups[] = {1, 3, 4, 8};
    static const int lens[] = {1, 2, 15, 16, 17, 31, 100, 1100};
    double worst[TENSOR_ISA_COUNT] = {0}, worst16 = 0;
    uint64_t rng = 7;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
            int type = types[ti], hd = hds[hi];
            if (hd % tensor_type_traits(type)->block_size) continue;
            /* every ratio and run pattern at head size 64; one of each otherwise */
            int n_groups = hd == 64 ? 4 : 1, n_pat = hd == 64 ? 4 : 1;
            for (int gi = 0; gi < n_groups; gi++)
                for (int pi = 0; pi < n_pat; pi++)
                    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
                        int group = hd == 64 ? groups[gi] : 3, n = lens[li];
                        int pat = hd == 64 ? pi : 2;
                        struct test_cache c;
                        cache_build(&c, type, hd, n, k_patterns[pat].p, k_patterns[pat].n, rng++);
                        /* one mid-way, the block's last token, the first, the last's
                         * neighbour (the first row is not the one reaching furthest) */
                        int32_t lasts[4] = {n / 2, n - 1, 0, n - 2};
                        int n_tok = n == 1 ? 1 : n == 2 ? 3 : 4;
                        struct test_rows r;
                        rows_make(&r, hd, lasts, n_tok, group, &rng);
                        float scale = 1.0f / sqrtf((float)hd);
                        double *ref = malloc(sizeof(double) * (size_t)r.n * hd);
                        for (int i = 0; i < r.n; i++) attn_ref(&c, r.q[i], r.last[i], scale, ref + (size_t)i * hd);
                        double *ref16 = malloc(sizeof(double) * (size_t)r.n * hd);
                        for (int i = 0; i < r.n; i++) attn_ref_bf16(&c, r.q[i], 0, r.last[i], scale, ref16 + (size_t)i * hd);
                        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                            const struct tensor_kernels *kt = tensor_kernels_get(isa);
                            if (!kt) continue;
                            run_kernel(kt, &c, &r, scale);
                            bool b16 = bf16_attn(kt, type, hd);
                            const double *want = b16 ? ref16 : ref;
                            double err = 0;
                            for (int i = 0; i < r.n * hd; i++) err = fmax(err, fabs(r.obuf[i] - want[i]));
                            if (b16) worst16 = fmax(worst16, err);
                            else worst[isa] = fmax(worst[isa], err);
                            CHECK_MSG(err < (b16 ? BF16_ATTN_TOL : 3e-6), "%s %s hd %d group %d n %d %s: max error %g",
                                      kt->name, tensor_type_name(type), hd, group, n, k_patterns[pat].name, err);
                        }
                        free(ref), free(ref16);
                        rows_free(&r);
                        cache_free(&c);
                    }
        }
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++)
        if (tensor_kernels_get(isa)) printf("    %s: max error %.2e\n", tensor_kernels_get(isa)->name, worst[isa]);
    printf("    bf16 products: max error %.2e against the bf16 reference\n", worst16);
}

/* A query row with a NaN (and with a Q8_0 cache one with an infinity:
 * the block's scale is NaN): that row's output is NaN in every ISA and
 * cache type, not a softmax that weighed NaN scores as e^-87 nor a NaN
 * quantized as -128, and the other rows of the call are what they are
 * without it. */
TEST(attn_nan_query_stays_in_its_row) {
    static const int types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    const int hd = 64, group = 3, n = 40;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    struct test_cache c;
    cache_build(&c, types[ti], hd, n, k_blocks16, 1, 11);
    for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
        const struct tensor_kernels *kt = tensor_kernels_get(isa);
        if (!kt) continue;
        int32_t lasts[2] = {n - 1, n - 1};
        uint64_t rng = 3;
        struct test_rows r;
        rows_make(&r, hd, lasts, 2, group, &rng);
        run_kernel(kt, &c, &r, 0.125f);
        size_t bytes = sizeof(float) * (size_t)r.n * hd;
        float *want = malloc(bytes);
        memcpy(want, r.obuf, bytes);
        r.qbuf[(size_t)4 * hd + 40] = NAN; /* row 4: token 1's second head, its second block */
        bool q8 = types[ti] == TENSOR_TYPE_Q8_0;
        if (q8) r.qbuf[(size_t)1 * hd + 3] = INFINITY; /* row 1: an infinity makes the block's scale NaN */
        run_kernel(kt, &c, &r, 0.125f);
        for (int i = 0; i < r.n; i++) {
            const float *got = r.obuf + (size_t)i * hd, *ok = want + (size_t)i * hd;
            if (i == 4 || (q8 && i == 1)) {
                int nans = 0;
                for (int d = 0; d < hd; d++) nans += isnan(got[d]);
                CHECK_MSG(nans == hd, "%s %s: row %d (NaN or infinite query) has %d NaN outputs of %d", kt->name,
                          tensor_type_name(types[ti]), i, nans, hd);
            } else {
                CHECK_MSG(!memcmp(got, ok, sizeof(float) * (size_t)hd), "%s %s: row %d changed by another's NaN",
                          kt->name, tensor_type_name(types[ti]), i);
            }
        }
        free(want);
        rows_free(&r);
    }
    cache_free(&c);
    }
}

/* The rows of token 0 (lasts[0]) in a call of their own, in a call with
 * other tokens and heads, and over differently split runs: same bits. */
TEST(attn_batch_invariance) {
    static const int types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    const int hd = 64, group = 3, n = 300;
    const float scale = 0.125f;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
            const struct tensor_kernels *kt = tensor_kernels_get(isa);
            if (!kt) continue;
            for (int target = 0; target < 3; target++) {
                /* a last position inside a tile, at a tile's first and last position */
                int32_t at = (int32_t[]){150, 160, 175}[target];
                struct test_cache flat, paged;
                cache_build(&flat, types[ti], hd, n, k_flat, 1, 99);
                cache_build(&paged, types[ti], hd, n, k_mixed, 6, 99);
                uint64_t rng = 5;
                struct test_rows alone, one_head, crowd;
                rows_make(&alone, hd, &at, 1, group, &rng);
                rows_make(&one_head, hd, &at, 1, 1, &rng);
                int32_t lasts[6] = {299, 10, at, at + 1, at - 1, 0};
                int32_t first[2] = {at, 299};
                rows_make(&crowd, hd, lasts, 6, group, &rng);
                /* and a call where the target's rows come first */
                struct test_rows lead;
                rows_make(&lead, hd, first, 2, group, &rng);
                memcpy(lead.qbuf, alone.qbuf, sizeof(float) * (size_t)group * hd);
                /* the same queries: the target token's heads in crowd, and
                 * its second head alone */
                memcpy(crowd.qbuf + (size_t)2 * group * hd, alone.qbuf, sizeof(float) * (size_t)group * hd);
                memcpy(one_head.qbuf, alone.qbuf + hd, sizeof(float) * (size_t)hd);
                run_kernel(kt, &flat, &alone, scale);
                size_t bytes = sizeof(float) * (size_t)group * hd;
                float *want = malloc(bytes);
                memcpy(want, alone.obuf, bytes);
                run_kernel(kt, &flat, &crowd, scale);
                CHECK_MSG(!memcmp(crowd.obuf + (size_t)2 * group * hd, want, bytes), "%s %s at %d: crowd differs",
                          kt->name, tensor_type_name(types[ti]), at);
                run_kernel(kt, &flat, &lead, scale);
                CHECK_MSG(!memcmp(lead.obuf, want, bytes), "%s %s at %d: leading rows differ", kt->name,
                          tensor_type_name(types[ti]), at);
                run_kernel(kt, &flat, &one_head, scale);
                CHECK_MSG(!memcmp(one_head.obuf, want + hd, sizeof(float) * (size_t)hd),
                          "%s %s at %d: one head differs", kt->name, tensor_type_name(types[ti]), at);
                run_kernel(kt, &paged, &alone, scale);
                CHECK_MSG(!memcmp(alone.obuf, want, bytes), "%s %s at %d: paged runs differ", kt->name,
                          tensor_type_name(types[ti]), at);
                run_kernel(kt, &paged, &crowd, scale);
                CHECK_MSG(!memcmp(crowd.obuf + (size_t)2 * group * hd, want, bytes),
                          "%s %s at %d: paged crowd differs", kt->name, tensor_type_name(types[ti]), at);
                free(want);
                rows_free(&alone), rows_free(&one_head), rows_free(&crowd), rows_free(&lead);
                cache_free(&flat), cache_free(&paged);
            }
        }
}

/* A sliding window (rows see their last w positions): every kernel
 * against the reference over the window, windows inside a tile, of a
 * whole tile, across tiles and longer than the context, rows whose window
 * starts at different tiles in one call; and a row's output is the same
 * bits alone as among the others. */
TEST(attn_sliding_window) {
    static const int types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    static const int32_t windows[] = {1, 5, 16, 17, 40, 512};
    const int hd = 64, group = 2, n = 200;
    const float scale = 0.125f;
    uint64_t rng = 11;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t wi = 0; wi < sizeof windows / sizeof *windows; wi++)
            for (int pat = 0; pat < 4; pat += 3) {
                struct test_cache c;
                cache_build(&c, types[ti], hd, n, k_patterns[pat].p, k_patterns[pat].n, rng++);
                int32_t lasts[5] = {199, 0, 47, 48, 130};
                struct test_rows r, alone;
                rows_make(&r, hd, lasts, 5, group, &rng);
                r.window = windows[wi];
                rows_make(&alone, hd, &lasts[2], 1, group, &rng);
                alone.window = windows[wi];
                memcpy(alone.qbuf, r.qbuf + (size_t)2 * group * hd, sizeof(float) * (size_t)group * hd);
                double *ref = malloc(sizeof(double) * (size_t)r.n * hd), *ref16 = malloc(sizeof(double) * (size_t)r.n * hd);
                for (int i = 0; i < r.n; i++) {
                    int first = r.last[i] >= r.window ? r.last[i] - r.window + 1 : 0;
                    attn_ref_window(&c, r.q[i], first, r.last[i], scale, ref + (size_t)i * hd);
                    attn_ref_bf16(&c, r.q[i], first, r.last[i], scale, ref16 + (size_t)i * hd);
                }
                for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                    const struct tensor_kernels *kt = tensor_kernels_get(isa);
                    if (!kt) continue;
                    run_kernel(kt, &c, &r, scale);
                    bool b16 = bf16_attn(kt, types[ti], hd);
                    double err = 0;
                    for (int i = 0; i < r.n * hd; i++) err = fmax(err, fabs(r.obuf[i] - (b16 ? ref16 : ref)[i]));
                    CHECK_MSG(err < (b16 ? BF16_ATTN_TOL : 3e-6), "%s %s window %d %s: max error %g", kt->name,
                              tensor_type_name(types[ti]), windows[wi], k_patterns[pat].name, err);
                    run_kernel(kt, &c, &alone, scale);
                    CHECK_MSG(!memcmp(alone.obuf, r.obuf + (size_t)2 * group * hd,
                                      sizeof(float) * (size_t)group * hd),
                              "%s %s window %d: a row alone differs from the same row among others", kt->name,
                              tensor_type_name(types[ti]), windows[wi]);
                }
                /* a cache holding only the window's positions: the spans
                 * start at the first position any row sees, mid-tile */
                int32_t far[2] = {199, 150};
                struct test_rows fr;
                rows_make(&fr, hd, far, 2, group, &rng);
                fr.window = windows[wi];
                int32_t start = 150 >= fr.window ? 150 - fr.window + 1 : 0;
                struct attn_span cut[1200];
                int n_cut = 0;
                for (int i = 0, p = 0; i < c.n_spans; p += c.spans[i++].n) {
                    int skip = start > p ? start - p : 0;
                    if (skip >= c.spans[i].n) continue;
                    cut[n_cut++] = (struct attn_span){(const uint8_t *)c.spans[i].k + (size_t)skip * c.row_bytes,
                                                      (const uint8_t *)c.spans[i].v + (size_t)skip * c.row_bytes,
                                                      c.spans[i].n - skip};
                }
                float *scratch = mem_alloc_aligned(sizeof(float) * tensor_attn_scratch_floats(hd, fr.n));
                size_t bytes = sizeof(float) * (size_t)fr.n * hd;
                float *want = malloc(bytes);
                for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                    const struct tensor_kernels *kt = tensor_kernels_get(isa);
                    if (!kt) continue;
                    run_kernel(kt, &c, &fr, scale);
                    memcpy(want, fr.obuf, bytes);
                    struct attn_kv kv = {.type = c.type, .row_bytes = c.row_bytes, .spans = cut, .n_spans = n_cut,
                                         .start = start};
                    struct attn_rows rows = {.n = fr.n, .q = fr.q, .out = fr.out, .last = fr.last, .window = fr.window};
                    kt->attn(hd, scale, &kv, &rows, scratch);
                    CHECK_MSG(!memcmp(want, fr.obuf, bytes), "%s %s window %d: spans from position %d differ", kt->name,
                              tensor_type_name(types[ti]), windows[wi], start);
                }
                free(want), mem_free(scratch);
                rows_free(&fr);
                free(ref), free(ref16);
                rows_free(&r), rows_free(&alone);
                cache_free(&c);
            }
}

/* ---- the forward pass --------------------------------------------------- */

static const int32_t k_text[] = {504, 3575, 282, 4649, 314, 7042, 30, 198, 1930, 418, 253, 2114, 28, 357,
                                 2555, 314, 260, 1345, 30, 198, 504, 1069, 1373, 3575, 314, 7042, 282, 2114,
                                 30, 198, 1930, 418, 253, 2114, 28, 357, 2555, 314, 260, 1345};
#define TEXT_LEN ((int)(sizeof k_text / sizeof *k_text))

/* Feeds tokens [from, to) of k_text (offset by `shift` in the text) to seq
 * as one batch; logits of each into out[i - from]. */
static bool feed(struct model_ctx *c, struct kv_cache *kv, int seq, int shift, int from, int to, float *out) {
    int32_t pos[TEXT_LEN], sq[TEXT_LEN];
    bool want[TEXT_LEN];
    for (int i = from; i < to; i++) pos[i - from] = i, sq[i - from] = seq, want[i - from] = true;
    struct model_batch b = {.n = to - from, .tokens = k_text + shift, .pos = pos, .seq = sq, .logits = want};
    b.tokens = k_text + shift + from;
    struct kvik_err err = {0};
    bool ok = model_forward(c, kv, &b, out, &err) == KVIK_OK;
    if (!ok) test_fail(__FILE__, __LINE__, "model_forward: %s", err.msg);
    return ok;
}

/*
 * Three sequences over a paged cache (blocks of 16 and of 5 positions, F16
 * and Q8_0 rows): A prefills 20 tokens, B (20 cached) decodes one, C (9
 * cached) prefills 8 more, all in one batch, tokens interleaved. Each
 * token's logits must equal, bit for bit, those it gets when its sequence
 * runs alone in the same state.
 */
TEST(attn_forward_mixed_batch_is_invariant) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    int nv = m->hp.n_vocab, kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    struct model_ctx *c = model_ctx_new(m, 2, 32, 64, &err);
    REQUIRE(c);
    enum { NA = 20, B_AT = 20, C_FROM = 9, C_TO = 17, N_MIX = NA + 1 + (C_TO - C_FROM) };
    float *alone = malloc(sizeof(float) * (size_t)nv * N_MIX), *mixed = malloc(sizeof(float) * (size_t)nv * N_MIX);
    REQUIRE(alone && mixed);
    static const int types[] = {TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    static const int block_tokens[] = {16, 5};
    for (int ti = 0; ti < 2; ti++) {
        struct kv_paged kv;
        struct kv_paged_config cfg = {.n_layer = m->hp.n_layer, .row_floats = kv_dim, .type = types[ti],
                                      .block_tokens = block_tokens[ti], .n_blocks = 64, .max_seqs = 8};
        REQUIRE(kv_paged_init(&kv, &cfg, &err) == KVIK_OK);
        /* alone: each sequence in its own slot; B and C first get their history */
        int a1 = kv_paged_seq_open(&kv), b1 = kv_paged_seq_open(&kv), c1 = kv_paged_seq_open(&kv);
        REQUIRE(kv_paged_seq_grow(&kv, a1, NA) && kv_paged_seq_grow(&kv, b1, B_AT + 1) &&
                kv_paged_seq_grow(&kv, c1, C_TO));
        float *scratch = malloc(sizeof(float) * (size_t)nv * TEXT_LEN);
        REQUIRE(scratch);
        REQUIRE(feed(c, &kv.base, b1, 3, 0, B_AT, scratch) && feed(c, &kv.base, c1, 7, 0, C_FROM, scratch));
        REQUIRE(feed(c, &kv.base, a1, 0, 0, NA, alone));
        REQUIRE(feed(c, &kv.base, b1, 3, B_AT, B_AT + 1, alone + (size_t)NA * nv));
        REQUIRE(feed(c, &kv.base, c1, 7, C_FROM, C_TO, alone + (size_t)(NA + 1) * nv));
        /* mixed: fresh slots with the same histories, then one batch */
        int a2 = kv_paged_seq_open(&kv), b2 = kv_paged_seq_open(&kv), c2 = kv_paged_seq_open(&kv);
        REQUIRE(kv_paged_seq_grow(&kv, a2, NA) && kv_paged_seq_grow(&kv, b2, B_AT + 1) &&
                kv_paged_seq_grow(&kv, c2, C_TO));
        REQUIRE(feed(c, &kv.base, b2, 3, 0, B_AT, scratch) && feed(c, &kv.base, c2, 7, 0, C_FROM, scratch));
        int32_t tok[N_MIX], pos[N_MIX], sq[N_MIX], slot[N_MIX];
        bool want[N_MIX];
        int n = 0, ia = 0, ic = C_FROM;
        /* interleave: C's tokens between A's, B's decode in the middle */
        while (ia < NA || ic < C_TO) {
            if (ia < NA) tok[n] = k_text[ia], pos[n] = ia, sq[n] = a2, slot[n] = ia, n++, ia++;
            if (ic < C_TO) tok[n] = k_text[7 + ic], pos[n] = ic, sq[n] = c2, slot[n] = NA + 1 + ic - C_FROM, n++, ic++;
            if (ia == NA / 2) tok[n] = k_text[3 + B_AT], pos[n] = B_AT, sq[n] = b2, slot[n] = NA, n++;
        }
        REQUIRE(n == N_MIX);
        for (int i = 0; i < n; i++) want[i] = true;
        struct model_batch b = {.n = n, .tokens = tok, .pos = pos, .seq = sq, .logits = want};
        REQUIRE(model_forward(c, &kv.base, &b, mixed, &err) == KVIK_OK);
        int differ = 0;
        for (int i = 0; i < n; i++)
            differ += memcmp(mixed + (size_t)i * nv, alone + (size_t)slot[i] * nv, sizeof(float) * (size_t)nv) != 0;
        CHECK_MSG(differ == 0, "%s cache, blocks of %d: %d of %d tokens differ", tensor_type_name(types[ti]),
                  block_tokens[ti], differ, n);
        free(scratch);
        kv_paged_free(&kv);
    }
    free(alone), free(mixed);
    model_ctx_free(c);
    model_free(m);
}

/* A batch with a position the sequence has no cache room for is refused
 * whole, before any layer runs, with the sequence and position named; the
 * tokens before it in the batch change nothing. */
TEST(attn_forward_refuses_a_position_without_room) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct model *m = NULL;
    REQUIRE(model_load(path, &m, &err) == KVIK_OK);
    struct model_ctx *c = model_ctx_new(m, 2, 8, 64, &err);
    REQUIRE(c);
    struct kv_paged kv;
    struct kv_paged_config cfg = {.n_layer = m->hp.n_layer, .row_floats = m->hp.n_head_kv * m->hp.head_dim,
                                  .type = TENSOR_TYPE_F16, .block_tokens = 16, .n_blocks = 4, .max_seqs = 2};
    REQUIRE(kv_paged_init(&kv, &cfg, &err) == KVIK_OK);
    int s = kv_paged_seq_open(&kv);
    REQUIRE(kv_paged_seq_grow(&kv, s, 4));
    float *out = malloc(sizeof(float) * (size_t)m->hp.n_vocab * 5);
    REQUIRE(out);
    int32_t tok[5] = {504, 3575, 282, 4649, 314}, pos[5] = {0, 1, 2, 3, 4}, sq[5] = {s, s, s, s, s};
    struct model_batch b = {.n = 5, .tokens = tok, .pos = pos, .seq = sq};
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, out, &err), KVIK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "no cache room for sequence") && strstr(err.msg, "position 4"), "message: %s", err.msg);
    /* the first four alone are fine */
    b.n = 4;
    err = (struct kvik_err){0};
    CHECK_EQ_INT(model_forward(c, &kv.base, &b, out, &err), KVIK_OK);
    free(out);
    kv_paged_free(&kv);
    model_ctx_free(c);
    model_free(m);
}
