/*
 * cmd_bench_vector.c — `kvik bench vector`: the vector store's HNSW index
 * on given vectors, one thread: build time, memory per vector, and for
 * each beam width the queries a second and the recall@k against given
 * true neighbours. bench/vector-peer.py runs it beside hnswlib and faiss
 * on the same files.
 *
 * Files are raw little-endian float32 rows (--base, --queries, n x dim)
 * and int32 rows of the true neighbours' row numbers (--truth, nq x k,
 * nearest first, by dot product of the normalised vectors).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "vector/vector.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench vector --base F --queries F --truth F --dim D [options]\n"
            "\n"
            "Builds an HNSW index of the base vectors on one thread, then runs every query\n"
            "one at a time at each beam width, and prints build seconds, bytes per vector,\n"
            "and per ef the queries a second and recall@k.\n"
            "\n"
            "  --k N            neighbours per query and in the truth file (default 10)\n"
            "  --M N            links per node (default 16)\n"
            "  --ef-construction N  (default 200)\n"
            "  --ef LIST        beam widths, comma-separated (default 10,16,24,32,48,64,96,128,192,256)\n"
            "  --storage S      f32 (default), f16, int8, or int8+rescore (int8 rows walked, the\n"
            "                   beam scored again against F32 copies)\n"
            "  --limit N        the first N base vectors only\n"
            "  --selectivity LIST  also filtered searches (comma-separated shares, e.g.\n"
            "                   0.001,0.01,0.1,0.5): each vector has bucket = row %% 1000, a search\n"
            "                   keeps bucket < share x 1000; the truth is the exact filtered search;\n"
            "                   at --filter-ef (default 64)\n"
            "  --json           one JSON object on stdout\n");
}

static float *read_f32(const char *path, int dim, int64_t *rows) {
    size_t len;
    char *b = cli_read_file(path, &len);
    if (!b) return NULL;
    size_t row = (size_t)dim * sizeof(float);
    if (len % row) {
        free(b);
        return NULL;
    }
    *rows = (int64_t)(len / row);
    return (float *)b;
}

int cmd_bench_vector(int argc, char **argv) {
    const char *base = NULL, *queries = NULL, *truth = NULL, *efs = "10,16,24,32,48,64,96,128,192,256";
    const char *sels = NULL;
    long filter_ef = 64;
    long dim = 0, k = 10, M = 16, efc = 200, limit = 0;
    int storage = VEC_F32;
    bool rescore = false;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kvik bench vector: unknown argument or missing value: '%s'\n", a);
            return 2;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "--base")) base = v;
        else if (!strcmp(a, "--queries")) queries = v;
        else if (!strcmp(a, "--truth")) truth = v;
        else if (!strcmp(a, "--ef")) efs = v;
        else if (!strcmp(a, "--selectivity")) sels = v;
        else if (!strcmp(a, "--filter-ef")) ok = cli_parse_long(v, 1, 100000, &filter_ef);
        else if (!strcmp(a, "--dim")) ok = cli_parse_long(v, 1, 65536, &dim);
        else if (!strcmp(a, "--k")) ok = cli_parse_long(v, 1, 1000, &k);
        else if (!strcmp(a, "--M")) ok = cli_parse_long(v, 2, 256, &M);
        else if (!strcmp(a, "--ef-construction")) ok = cli_parse_long(v, 1, 100000, &efc);
        else if (!strcmp(a, "--limit")) ok = cli_parse_long(v, 1, 1L << 40, &limit);
        else if (!strcmp(a, "--storage")) {
            rescore = !strcmp(v, "int8+rescore");
            storage = !strcmp(v, "f32")    ? VEC_F32
                    : !strcmp(v, "f16")    ? VEC_F16
                    : !strncmp(v, "int8", 4) && (rescore || !v[4]) ? VEC_I8
                                                                   : -1;
            ok = storage >= 0;
        } else {
            fprintf(stderr, "kvik bench vector: unknown argument '%s'\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "kvik bench vector: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!base || !queries || !truth || !dim) {
        fprintf(stderr, "kvik bench vector: give --base, --queries, --truth and --dim (try --help)\n");
        return 2;
    }
    int64_t nb = 0, nq = 0;
    float *xb = read_f32(base, (int)dim, &nb), *xq = read_f32(queries, (int)dim, &nq);
    size_t tl;
    int32_t *gt = (int32_t *)cli_read_file(truth, &tl);
    if (!xb || !xq || !gt || tl != (size_t)nq * (size_t)k * sizeof *gt) {
        fprintf(stderr, "kvik bench vector: cannot read the files, or their sizes do not fit --dim and --k\n");
        free(xb), free(xq), free(gt);
        return 1;
    }
    if (limit && limit < nb) nb = limit;
    struct vec_config cfg = vec_config_default((int)dim);
    cfg.M = (int)M;
    cfg.ef_construction = (int)efc;
    cfg.storage = storage;
    cfg.rescore = rescore;
    struct kvik_err err = {0};
    struct vec_store *s = vec_store_new(&cfg, &err);
    if (!s) {
        fprintf(stderr, "kvik bench vector: %s\n", err.msg);
        return 1;
    }
    int64_t t0 = clock_ns();
    for (int64_t i = 0; i < nb; i++) {
        struct vec_attr bucket = {"bucket", {.type = VEC_NUM, .num = (double)(i % 1000)}};
        if (vec_add(s, (uint64_t)i, xb + (size_t)i * (size_t)dim, sels ? &bucket : NULL, sels ? 1 : 0, &err)) {
            fprintf(stderr, "kvik bench vector: vector %lld: %s\n", (long long)i, err.msg);
            return 1;
        }
        if (!json && i && i % 100000 == 0)
            fprintf(stderr, "kvik bench vector: %lld added, %.0f s\n", (long long)i, (clock_ns() - t0) * 1e-9);
    }
    double build_s = (clock_ns() - t0) * 1e-9;
    double bytes = (double)vec_memory(s) / (double)nb;
    struct vec_hit *hits = malloc((size_t)k * sizeof *hits);
    if (json) printf("{\"n\":%lld,\"dim\":%ld,\"M\":%ld,\"ef_construction\":%ld,\"build_s\":%.3f,\"bytes_per_vector\":%.1f,\"runs\":[",
                     (long long)nb, dim, M, efc, build_s, bytes);
    else printf("%lld vectors of %ld, M %ld, ef_construction %ld: built in %.2f s, %.0f bytes a vector\n",
                (long long)nb, dim, M, efc, build_s, bytes);
    bool first = true;
    for (const char *p = efs; *p;) {
        long ef = strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
        if (ef < 1) break;
        struct vec_search q = {.k = (int)k, .threshold = -INFINITY, .ef = (int)(ef < k ? k : ef)};
        int64_t found = 0;
        int64_t q0 = clock_ns();
        for (int64_t i = 0; i < nq; i++) {
            int n = vec_search(s, xq + (size_t)i * (size_t)dim, &q, hits, &err);
            for (int a = 0; a < n; a++)
                for (long b = 0; b < k; b++)
                    if ((int64_t)hits[a].id == gt[(size_t)i * (size_t)k + (size_t)b]) {
                        found++;
                        break;
                    }
        }
        double secs = (clock_ns() - q0) * 1e-9, recall = (double)found / ((double)nq * (double)k);
        if (json) printf("%s{\"ef\":%ld,\"qps\":%.1f,\"recall\":%.5f}", first ? "" : ",", ef, nq / secs, recall);
        else printf("ef %4ld: %9.1f queries/s, recall@%ld %.4f\n", ef, nq / secs, k, recall);
        first = false;
    }
    if (json) printf("]%s", sels ? ",\"filtered\":[" : "");
    first = true;
    struct vec_hit *want = malloc((size_t)k * sizeof *want);
    for (const char *p = sels; p && *p && want;) {
        double share = strtod(p, (char **)&p);
        if (*p == ',') p++;
        if (!(share > 0 && share <= 1)) break;
        struct vec_filter f = {.op = VEC_LT, .key = "bucket", .v = {.type = VEC_NUM, .num = share * 1000}};
        struct vec_search ex = {.k = (int)k, .threshold = -INFINITY, .filter = &f, .exact = true};
        struct vec_search hs = {.k = (int)k, .threshold = -INFINITY, .filter = &f, .ef = (int)filter_ef};
        int64_t found = 0, total = 0;
        double secs = 0;
        for (int64_t i = 0; i < nq; i++) {
            const float *q = xq + (size_t)i * (size_t)dim;
            int nw = vec_search(s, q, &ex, want, &err);
            int64_t q0 = clock_ns();
            int n = vec_search(s, q, &hs, hits, &err);
            secs += (clock_ns() - q0) * 1e-9;
            for (int a = 0; a < nw; a++)
                for (int b = 0; b < n; b++)
                    if (want[a].id == hits[b].id) {
                        found++;
                        break;
                    }
            total += nw > 0 ? nw : 0;
        }
        double rec = total ? (double)found / (double)total : 1.0;
        if (json) printf("%s{\"selectivity\":%g,\"qps\":%.1f,\"recall\":%.5f}", first ? "" : ",", share, nq / secs, rec);
        else printf("selectivity %5.1f%%: %9.1f queries/s, recall@%ld %.4f (ef %ld)\n", 100 * share, nq / secs, k, rec,
                    filter_ef);
        first = false;
    }
    free(want);
    if (json) printf("%s}\n", sels ? "]" : "");
    free(hits);
    vec_store_free(s);
    free(xb), free(xq), free(gt);
    return 0;
}
