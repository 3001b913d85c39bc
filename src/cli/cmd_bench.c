/*
 * cmd_bench.c — `kvik bench kernels` (`kvik bench offline` is in
 * cmd_bench_offline.c): measures the machine's read bandwidth,
 * then mat-vec throughput per weight type (GB/s of weights and % of that
 * bandwidth) and mat-mat throughput for a batch of activation rows (int8
 * GOP/s and % of the ISA's peak).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tools/bench.h"

static const int k_types[] = {
    TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0,
    TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K,
    TENSOR_TYPE_F16,  TENSOR_TYPE_BF16, TENSOR_TYPE_F32,
};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench offline [-m MODEL] [-p N] [-n N] [-r N] [-t N] [--json]\n"
            "         prefill and decode speed of a model (kvik bench offline --help)\n"
            "       kvik bench engine [-m MODEL] [-b LIST] [-p N] [-n N] [-t N] [--json]\n"
            "         serving-engine throughput at batch sizes 1, 8, 32 (--help)\n"
            "       kvik bench tokenizer [-m MODEL] -f CORPUS [-t N] [--json]\n"
            "         tokenizer MB/s and tokens/s against Hugging Face tokenizers (--help)\n"
            "       kvik bench vector --base F --queries F --truth F --dim D [--json]\n"
            "         the vector store's HNSW: build time, memory, queries/s and recall (--help)\n"
            "       kvik bench grammar [-m M] [--schemas FILE|DIR] [--json]\n"
            "         grammar-constrained decoding: mask time per token, compile time (--help)\n"
            "       kvik bench serve --url URL [--rate R] [--max-concurrency C] ...\n"
            "         load-test an OpenAI-compatible server (kvik bench serve --help);\n"
            "         kvik bench sweep (rates or concurrencies), kvik bench compare A.json B.json\n"
            "       kvik bench kernels [-t N] [--json] [--types LIST] [--isa NAME] [--reps N]\n"
            "                          [--tokens N] [--rows N] [--cols N] [--ctx N] [--quick]\n"
            "  -t N          threads (default: all CPUs)\n"
            "  --types LIST  comma-separated weight types (default: all with kernels)\n"
            "  --isa NAME    scalar, avx2, avx512 or amx (default: the best this CPU runs)\n"
            "  --reps N      repetitions per measurement, median kept (default 7)\n"
            "  --tokens N    activation rows of the mat-mat (default 512, prefill; 16 is a\n"
            "                batch-16 decode step's shape)\n"
            "  --rows N      weight rows of the mat-mat (default 1024, 4096 columns: the\n"
            "                weights fit in the caches; 32768 makes them stream from memory)\n"
            "  --cols N      weight columns of the mat-mat (default 4096; a multiple of 256)\n"
            "  --ctx N       positions of each sequence in the attention test (default 256):\n"
            "                F16 and Q8_0 caches, head 64, 3 query heads per K/V head\n"
            "  --quick       small buffers (for smoke tests; numbers are not meaningful)\n"
            "  --json        one JSON object on stdout\n");
}

/* Parses "q4_0,q8_0" into types[]; returns count or -1 with a message. */
static int parse_types(const char *list, int *types, int max) {
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int t = tensor_type_from_name(tok);
        if (t < 0 || !tensor_kernels_best()->vec_dot[t]) {
            fprintf(stderr, "kvik bench: unknown or unsupported weight type '%s'\n", tok);
            return -1;
        }
        if (n == max) break;
        types[n++] = t;
    }
    return n;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "offline")) return cmd_bench_offline(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "engine")) return cmd_bench_engine(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "tokenizer")) return cmd_bench_tokenizer(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "vector")) return cmd_bench_vector(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "grammar")) return cmd_bench_grammar(argc, argv);
    if (argc >= 2 && (!strcmp(argv[1], "serve") || !strcmp(argv[1], "sweep") || !strcmp(argv[1], "compare")))
        return cmd_bench_serve(argc, argv);
    if (argc < 2 || strcmp(argv[1], "kernels") != 0) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "kvik bench: expected 'kernels', 'offline', 'engine', 'tokenizer', 'vector', 'grammar', 'serve', 'sweep' or 'compare' (try kvik bench --help)\n");
        return 2;
    }
    struct bench_params p;
    bench_default_params(&p);
    p.threads = cpu_count();
    bool json = false, quick = false;
    long tokens = 0, rows = 0, cols = 0;
    int types[N_TYPES], n_types = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--quick")) {
            quick = true;
            p.bandwidth_bytes = (size_t)64 << 20;
            p.matvec_bytes = (size_t)16 << 20;
            p.matmul_rows = 64;
            p.matmul_tokens = 64;
            p.reps = 3;
        } else if (!strcmp(a, "-t") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 1024, &v)) {
                fprintf(stderr, "kvik bench: -t expects a thread count 1..1024, got '%s'\n", argv[i]);
                return 2;
            }
            p.threads = (int)v;
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 64, &v)) {
                fprintf(stderr, "kvik bench: --reps expects 1..64, got '%s'\n", argv[i]);
                return 2;
            }
            p.reps = (int)v;
        } else if (!strcmp(a, "--tokens") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 4096, &v)) {
                fprintf(stderr, "kvik bench: --tokens expects 1..4096, got '%s'\n", argv[i]);
                return 2;
            }
            tokens = v;
        } else if (!strcmp(a, "--rows") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 16, 1 << 20, &v)) {
                fprintf(stderr, "kvik bench: --rows expects 16..1048576, got '%s'\n", argv[i]);
                return 2;
            }
            rows = v;
        } else if (!strcmp(a, "--cols") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 32, 1 << 16, &v) || v % 32) {
                fprintf(stderr, "kvik bench: --cols expects a multiple of 32 in 32..65536, got '%s'\n", argv[i]);
                return 2;
            }
            cols = v;
        } else if (!strcmp(a, "--ctx") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 1 << 16, &v)) {
                fprintf(stderr, "kvik bench: --ctx expects 1..65536, got '%s'\n", argv[i]);
                return 2;
            }
            p.attn_ctx = (int)v;
        } else if (!strcmp(a, "--types") && i + 1 < argc) {
            if ((n_types = parse_types(argv[++i], types, N_TYPES)) < 0) return 2;
        } else if (!strcmp(a, "--isa") && i + 1 < argc) {
            const char *name = argv[++i];
            enum tensor_isa isa = !strcmp(name, "scalar") ? TENSOR_ISA_SCALAR
                                  : !strcmp(name, "avx2") ? TENSOR_ISA_AVX2
                                  : !strcmp(name, "avx512") ? TENSOR_ISA_AVX512
                                  : !strcmp(name, "amx") ? TENSOR_ISA_AMX
                                  : TENSOR_ISA_COUNT;
            if (isa == TENSOR_ISA_COUNT || !(p.kernels = tensor_kernels_get(isa))) {
                fprintf(stderr, "kvik bench: ISA '%s' unknown or not supported by this CPU\n", name);
                return 2;
            }
        } else {
            fprintf(stderr, "kvik bench: unknown argument '%s' (try kvik bench --help)\n", a);
            return 2;
        }
    }
    if (!p.kernels) p.kernels = tensor_kernels_best();
    if (tokens) p.matmul_tokens = tokens;
    if (rows) p.matmul_rows = rows;
    if (cols) p.matmul_cols = cols;
    if (n_types == 0) {
        for (int i = 0; i < N_TYPES; i++) types[n_types++] = k_types[i];
    }
    for (int i = 0; i < n_types; i++) {
        int64_t bs = tensor_type_traits(types[i])->block_size;
        if (p.matmul_cols % bs != 0) {
            fprintf(stderr, "kvik bench: --cols %lld is not a multiple of %s's block of %lld values\n",
                    (long long)p.matmul_cols, tensor_type_name(types[i]), (long long)bs);
            return 2;
        }
    }

    struct kvik_err err = {0};
    struct pool *pool = pool_create(p.threads, &err);
    if (!pool) {
        fprintf(stderr, "kvik bench: %s\n", err.msg);
        return 1;
    }
    int rc = 1;
    struct bench_reader reader = {0};
    if (bench_reader_init(&reader, p.bandwidth_bytes, pool, &err)) goto fail;
    double bw = bench_read_bandwidth(&reader, pool, &p);
    if (!quick && !getenv("KVIK_NO_RECORD")) bench_bandwidth_record(bw, p.threads); /* for kvik run's statistics */
    const char *basis = "";
    double peak = bench_int8_peak_gops(p.kernels, p.threads, &basis);

    if (json) {
        printf("{\"isa\":\"%s\",\"threads\":%d,\"reps\":%d,\"read_bandwidth_gbs\":%.2f,"
               "\"int8_peak_gops\":%.1f,\"matvec\":[",
               p.kernels->name, p.threads, p.reps, bw, peak);
    } else {
        printf("kvik bench kernels: isa %s, %d threads, median of %d\n", p.kernels->name, p.threads, p.reps);
        printf("read bandwidth: %.2f GB/s (%zu MiB buffer)\n\n", bw, p.bandwidth_bytes >> 20);
        printf("mat-vec (weights ~%zu MiB, %lld columns)\n", p.matvec_bytes >> 20, (long long)p.matvec_cols);
        printf("  each repetition: one read-bandwidth pass, then one product; %% bw is the median\n"
               "  of the per-repetition ratios\n");
        printf("  %-6s %8s %10s %9s %9s %8s\n", "type", "rows", "time ms", "GB/s", "bw GB/s", "% bw");
    }
    for (int i = 0; i < n_types; i++) {
        struct bench_matvec_result r;
        if (bench_matvec(pool, &reader, &p, types[i], &r, &err)) goto fail;
        if (json)
            printf("%s{\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"seconds\":%.6f,\"gbs\":%.2f,"
                   "\"bandwidth_gbs\":%.2f,\"pct_bandwidth\":%.1f}",
                   i ? "," : "", tensor_type_name(r.type), (long long)r.rows, (long long)r.cols, r.seconds,
                   r.gbs, r.bw_gbs, r.pct_bw);
        else
            printf("  %-6s %8lld %10.2f %9.2f %9.2f %7.1f%%\n", tensor_type_name(r.type), (long long)r.rows,
                   r.seconds * 1e3, r.gbs, r.bw_gbs, r.pct_bw);
        fflush(stdout);
    }
    if (json) {
        printf("],\"matmul\":[");
    } else {
        printf("\nmat-mat (%lld x %lld weights, %lld activation rows); peak %.0f GOP/s = %s\n",
               (long long)p.matmul_rows, (long long)p.matmul_cols, (long long)p.matmul_tokens, peak, basis);
        printf("  %-6s %10s %9s %8s\n", "type", "time ms", "GOP/s", "% peak");
    }
    for (int i = 0; i < n_types; i++) {
        struct bench_matmul_result r;
        if (bench_matmul(pool, &p, types[i], &r, &err)) goto fail;
        double pct = peak > 0 ? 100.0 * r.gops / peak : 0;
        if (json)
            printf("%s{\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"tokens\":%lld,\"seconds\":%.6f,"
                   "\"gops\":%.2f,\"pct_peak\":%.1f}",
                   i ? "," : "", tensor_type_name(r.type), (long long)r.rows, (long long)r.cols,
                   (long long)r.tokens, r.seconds, r.gops, pct);
        else if (peak > 0)
            printf("  %-6s %10.2f %9.1f %7.1f%%\n", tensor_type_name(r.type), r.seconds * 1e3, r.gops, pct);
        else
            printf("  %-6s %10.2f %9.1f %8s\n", tensor_type_name(r.type), r.seconds * 1e3, r.gops, "n/a");
        fflush(stdout);
    }
    static const int cache_types[] = {TENSOR_TYPE_F16, TENSOR_TYPE_Q8_0};
    if (json) {
        printf("],\"attn\":[");
    } else {
        printf("\nattention (one sequence's K/V head and its 3 query rows a call, head 64, context %d,\n"
               "  16-position blocks at random places; ns per position and K/V head on each thread;\n"
               "  %% bw: the K/V bytes from memory against the read bandwidth above)\n",
               p.attn_ctx);
        printf("  %-6s %9s %12s %9s %8s\n", "cache", "in L2", "from memory", "GB/s", "% bw");
    }
    for (int i = 0; i < 2; i++) {
        struct bench_attn_result r;
        if (bench_attn(pool, &p, cache_types[i], &r, &err)) goto fail;
        double pct = bw > 0 ? 100.0 * r.memory_gbs / bw : 0;
        if (json)
            printf("%s{\"type\":\"%s\",\"head_dim\":%d,\"group\":%d,\"ctx\":%d,\"cache_ns\":%.3f,"
                   "\"memory_ns\":%.3f,\"memory_gbs\":%.2f,\"pct_bandwidth\":%.1f}",
                   i ? "," : "", tensor_type_name(r.type), r.head_dim, r.group, r.ctx, r.cache_ns, r.memory_ns,
                   r.memory_gbs, pct);
        else
            printf("  %-6s %9.2f %12.2f %9.2f %7.1f%%\n", tensor_type_name(r.type), r.cache_ns, r.memory_ns,
                   r.memory_gbs, pct);
        fflush(stdout);
    }
    if (json) printf("]}\n");
    rc = 0;
fail:
    if (rc) fprintf(stderr, "kvik bench: %s\n", err.msg);
    bench_reader_free(&reader);
    pool_free(pool);
    return rc;
}
