/*
 * cmd_bench_offline.c — `kvik bench offline`: prefill and decode speed of a
 * model, measured the way llama.cpp's llama-bench measures them, so the two
 * can be compared on the same file.
 *
 *   pp N: one sequence, empty cache, N random tokens prefilled in batches of
 *         up to 512 (llama-bench's default micro-batch); logits of the last.
 *   tg N: one sequence, empty cache, N forward passes of one random token
 *         each, logits every time (nothing is sampled).
 *
 * With -d D (llama-bench's depth) both tests start after D cached positions
 * instead of an empty cache: D random tokens are prefilled once, untimed,
 * and every repetition writes its positions from D on. --cache-type stores
 * the cached rows as F16 or Q8_0 instead of F32.
 *
 * One untimed warm-up of each test, then -r timed repetitions; medians are
 * reported with min and max. Decode is also given as GB/s of weights read
 * and as a fraction of the read bandwidth measured in the same run; prefill
 * as int8 GOP/s of the linear layers and a fraction of the ISA's peak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"
#include "tools/bench.h"

enum { UBATCH = 512 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench offline [-m MODEL] [-p N] [-n N] [-d N] [-r N] [-t N] [--cache-type T] [--json]\n"
            "  -m PATH   model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -p N      prompt tokens of the prefill test (default 512; 0: skip)\n"
            "  -n N      tokens of the decode test (default 128; 0: skip)\n"
            "  -d N      depth: both tests start after N cached positions (default 0)\n"
            "  --cache-type T  how cached K/V rows are stored: f32 (default), f16, q8_0\n"
            "  -r N      repetitions, medians reported (default 5)\n"
            "  -t N      threads (default: all CPUs)\n"
            "  --json    one JSON object on stdout\n");
}

struct stats {
    double median, min, max;
};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static struct stats stats_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return (struct stats){med, v[0], v[n - 1]};
}

/* Weight elements of the linear layers one token multiplies (per layer
 * projections plus the output projection). */
static double linear_params(const struct model *m) {
    double s = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const struct layer_weights *w = &m->layers[l];
        const struct tensor_matrix *mats[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) s += (double)mats[i]->rows * (double)mats[i]->cols;
    }
    return s;
}

struct offline {
    struct model_ctx *ctx;
    struct kv_flat kv;
    int32_t *tokens, *pos, *seq;
    float *logits;
    int n_vocab;
    int depth; /* cached positions before each test */
};

/* Prefill n random tokens from position `from`; returns seconds or < 0. */
static double run_pp(struct offline *b, int from, int n, struct kvik_err *err) {
    int64_t t0 = clock_ns();
    for (int start = 0; start < n; start += UBATCH) {
        int nb = n - start < UBATCH ? n - start : UBATCH;
        for (int i = 0; i < nb; i++) b->pos[i] = from + start + i;
        struct model_batch mb = {.n = nb, .tokens = b->tokens + start, .pos = b->pos, .seq = b->seq};
        if (model_forward(b->ctx, &b->kv.base, &mb, b->logits, err)) return -1;
    }
    return (double)(clock_ns() - t0) * 1e-9;
}

/* Decode n tokens one at a time from position b->depth; returns seconds or < 0. */
static double run_tg(struct offline *b, int n, struct kvik_err *err) {
    int64_t t0 = clock_ns();
    for (int i = 0; i < n; i++) {
        int32_t p = b->depth + i, s = 0;
        struct model_batch mb = {.n = 1, .tokens = &b->tokens[i], .pos = &p, .seq = &s};
        if (model_forward(b->ctx, &b->kv.base, &mb, b->logits, err)) return -1;
    }
    return (double)(clock_ns() - t0) * 1e-9;
}

/* Where cmd_bench_offline's flags go (its locals). */
struct offline_flags {
    const char **model;
    long *n_prompt, *n_gen, *depth, *reps, *threads;
    int *cache_type;
};

static enum cli_flag offline_flag(void *user, const char *a, const char *v) {
    struct offline_flags *f = user;
    bool ok = true;
    if (!strcmp(a, "-m")) *f->model = v;
    else if (!strcmp(a, "-p")) ok = cli_parse_long(v, 0, 1 << 20, f->n_prompt);
    else if (!strcmp(a, "-n")) ok = cli_parse_long(v, 0, 1 << 20, f->n_gen);
    else if (!strcmp(a, "-d")) ok = cli_parse_long(v, 0, 1 << 20, f->depth);
    else if (!strcmp(a, "--cache-type")) {
        int t = tensor_type_from_name(v);
        ok = t == TENSOR_TYPE_F32 || t == TENSOR_TYPE_F16 || t == TENSOR_TYPE_Q8_0;
        *f->cache_type = t;
    } else if (!strcmp(a, "-r")) ok = cli_parse_long(v, 1, 1000, f->reps);
    else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, f->threads);
    else return CLI_FLAG_UNKNOWN;
    return ok ? CLI_FLAG_OK : CLI_FLAG_BAD_VALUE;
}

int cmd_bench_offline(int argc, char **argv) {
    const char *model_arg = NULL;
    long n_prompt = 512, n_gen = 128, depth = 0, reps = 5, threads = cpu_count();
    int cache_type = TENSOR_TYPE_F32;
    bool json = false;
    struct offline_flags f = {&model_arg, &n_prompt, &n_gen, &depth, &reps, &threads, &cache_type};
    int st = cli_parse_flags(argc, argv, 2, "bench offline", usage, &json, offline_flag, &f);
    if (st >= 0) return st;
    if (n_prompt == 0 && n_gen == 0) {
        fprintf(stderr, "kvik bench offline: nothing to measure (-p 0 and -n 0)\n");
        return 2;
    }
    char pathbuf[4096];
    const char *path = cli_resolve_model(model_arg, pathbuf, sizeof pathbuf);
    if (!cli_model_exists(path, model_arg, "bench offline")) return 1;

    struct kvik_err err = {0};
    struct model *m = NULL;
    struct offline b = {0};
    struct pool *pool = NULL;
    struct bench_reader reader = {0};
    double *pp_s = calloc((size_t)reps, sizeof(double)), *tg_s = calloc((size_t)reps, sizeof(double));
    double *bw = calloc((size_t)reps, sizeof(double));
    int rc = 1;
    if (!pp_s || !tg_s || !bw) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (model_load(path, &m, &err)) goto fail;
    const struct model_hparams *hp = &m->hp;
    int n_tok = (int)(n_prompt > n_gen ? n_prompt : n_gen);
    long widest = n_prompt > depth ? n_prompt : depth;
    int max_batch = widest < UBATCH ? (widest ? (int)widest : 1) : UBATCH;
    b.n_vocab = hp->n_vocab;
    b.depth = (int)depth;
    n_tok += (int)depth;
    b.tokens = malloc(sizeof(int32_t) * (size_t)n_tok);
    b.pos = malloc(sizeof(int32_t) * UBATCH);
    b.seq = calloc(UBATCH, sizeof(int32_t));
    b.logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    if (!b.tokens || !b.pos || !b.seq || !b.logits) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n_tok; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        b.tokens[i] = (int32_t)(rng % (uint64_t)hp->n_vocab);
    }
    if (!(b.ctx = model_ctx_new(m, (int)threads, max_batch, n_tok, &err))) goto fail;
    if (kv_flat_init(&b.kv, hp->n_layer, 1, n_tok, hp->n_head_kv * hp->head_dim, cache_type, &err)) goto fail;
    if (!(pool = pool_create((int)threads, &err))) goto fail;
    if (n_gen && bench_reader_init(&reader, (size_t)1 << 30, pool, &err)) goto fail;

    /* the positions every test starts after, once */
    if (depth && run_pp(&b, 0, (int)depth, &err) < 0) goto fail;
    /* warm-up: faults the weights in and settles the caches */
    if ((n_prompt && run_pp(&b, b.depth, (int)n_prompt, &err) < 0) || (n_gen && run_tg(&b, n_gen < 16 ? (int)n_gen : 16, &err) < 0))
        goto fail;
    for (long r = 0; r < reps; r++) {
        if (n_prompt && (pp_s[r] = run_pp(&b, b.depth, (int)n_prompt, &err)) < 0) goto fail;
        if (n_gen) {
            bw[r] = bench_read_pass(&reader, pool);
            if ((tg_s[r] = run_tg(&b, (int)n_gen, &err)) < 0) goto fail;
        }
        if (!json) fprintf(stderr, "\rkvik bench offline: repetition %ld/%ld", r + 1, reps);
    }
    if (!json) fprintf(stderr, "\n");

    double pp_rate[1000], tg_rate[1000], tg_pct[1000];
    for (long r = 0; r < reps; r++) {
        pp_rate[r] = n_prompt ? (double)n_prompt / pp_s[r] : 0;
        tg_rate[r] = n_gen ? (double)n_gen / tg_s[r] : 0;
        tg_pct[r] = n_gen ? 100.0 * tg_rate[r] * (double)model_decode_bytes(m) / 1e9 / bw[r] : 0;
    }
    struct stats pp = stats_of(pp_rate, (int)reps), tg = stats_of(tg_rate, (int)reps);
    struct stats pct = stats_of(tg_pct, (int)reps), bws = stats_of(bw, (int)reps);
    if (n_gen && !getenv("KVIK_NO_RECORD")) bench_bandwidth_record(bws.median, (int)threads);
    const struct tensor_kernels *k = tensor_kernels_best();
    const char *basis = "";
    double peak = bench_int8_peak_gops(k, (int)threads, &basis);
    double pp_gops = 2.0 * linear_params(m) * pp.median / 1e9;
    double tg_gbs = tg.median * (double)model_decode_bytes(m) / 1e9;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (json) {
        printf("{\"model\":");
        cli_json_str(stdout, base, strlen(base));
        printf(",\"path\":");
        cli_json_str(stdout, path, strlen(path));
        printf(",\"isa\":\"%s\",\"threads\":%ld,\"reps\":%ld,\"n_prompt\":%ld,\"n_gen\":%ld,\"depth\":%ld,\"cache_type\":\"%s\","
               "\"model_bytes\":%llu,\"decode_bytes\":%llu,"
               "\"pp_tok_s\":%.3f,\"pp_min\":%.3f,\"pp_max\":%.3f,\"pp_gops\":%.2f,\"int8_peak_gops\":%.1f,"
               "\"tg_tok_s\":%.3f,\"tg_min\":%.3f,\"tg_max\":%.3f,\"tg_gbs\":%.3f,\"read_gbs\":%.3f,"
               "\"tg_pct_bw\":%.2f}\n",
               k->name, threads, reps, n_prompt, n_gen, depth, tensor_type_name(cache_type), (unsigned long long)m->weight_bytes,
               (unsigned long long)model_decode_bytes(m), pp.median, pp.min, pp.max, pp_gops, peak, tg.median,
               tg.min, tg.max, tg_gbs, bws.median, pct.median);
    } else {
        printf("model %s (%.1f MiB of weights), %ld threads, %s, %ld repetitions, depth %ld, %s cache\n", base,
               (double)m->weight_bytes / (1 << 20), threads, k->name, reps, depth, tensor_type_name(cache_type));
        if (n_prompt)
            printf("pp%-5ld %9.2f tok/s  (min %.2f, max %.2f)  %.1f GOP/s int8 = %.1f%% of %.0f GOP/s peak\n",
                   n_prompt, pp.median, pp.min, pp.max, pp_gops, peak > 0 ? 100 * pp_gops / peak : 0, peak);
        if (n_gen)
            printf("tg%-5ld %9.2f tok/s  (min %.2f, max %.2f)  %.2f GB/s of weights = %.1f%% of read bandwidth "
                   "(%.1f GB/s)\n",
                   n_gen, tg.median, tg.min, tg.max, tg_gbs, pct.median, bws.median);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kvik bench offline: %s\n", err.msg);
done:
    bench_reader_free(&reader);
    pool_free(pool);
    free(b.tokens);
    free(b.pos);
    free(b.seq);
    free(b.logits);
    kv_flat_free(&b.kv);
    model_ctx_free(b.ctx);
    model_free(m);
    free(pp_s);
    free(tg_s);
    free(bw);
    return rc;
}
