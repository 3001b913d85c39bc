/*
 * cmd_bench_grammar.c — `kvik bench grammar`: the grammar engine on a
 * model's vocabulary, one thread, no forward pass. For each schema of a
 * set: its compile time (JSON Schema to GBNF to rules), then random
 * walks through it, each step the mask of the allowed next tokens (timed)
 * and one of them taken at random (the end, when allowed, with
 * probability 1/4), up to --max-tokens a walk. The first walk of a schema
 * meets every parser state for the first time ("cold"); later walks find
 * many in the grammar's mask cache ("warm").
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "cli/cli.h"
#include "convert/json.h"
#include "engine/engine.h"
#include "grammar/grammar.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench grammar [-m MODEL] [--schemas FILE|DIR] [options]\n"
            "\n"
            "Per-token mask time of grammar-constrained decoding with the model's vocabulary\n"
            "(default: the default model), and compile time per schema, over a set of JSON\n"
            "Schemas: a file with a list of {name, prompt, schema} (default\n"
            "tests/data/schemas/schemas.json), or a folder of *.json files, one schema each.\n"
            "\n"
            "  --walks N        random walks a schema (default 4; the first is cold)\n"
            "  --max-tokens N   tokens a walk at most (default 160)\n"
            "  --seed N         the walks' seed (default 1)\n"
            "  --json           one JSON object: mean_us, p50_us, p99_us (all masks), cold and\n"
            "                   warm parts, compile_ms per schema\n");
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The schemas of folder dir (its *.json files, by name) as the text of a
 * list of {name, schema}; NULL with a message on stderr when a file
 * cannot be read or is not JSON. */
static char *read_schema_dir(const char *dir, size_t *len) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") || e->d_name[0] == '.') continue;
        if (strpbrk(e->d_name, "\"\\")) continue; /* not a JSON string as it stands */
        if (n == cap) {
            char **t = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof *names);
            if (!t) ok = false;
            else names = t;
        }
        if (ok && !(names[n++] = strdup(e->d_name))) ok = false, n--;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    size_t cap_out = 2, used = 0;
    char *out = malloc(cap_out + 1);
    if (!out) ok = false;
    else out[used++] = '[';
    for (size_t i = 0; ok && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t fl = 0;
        char *text = cli_read_file(path, &fl);
        struct json_value v;
        struct kvik_err err = {0};
        if (!text || json_parse(text, fl, &v, &err)) {
            fprintf(stderr, "kvik bench grammar: %s: %s\n", path, text ? err.msg : "cannot read it");
            free(text);
            ok = false;
            break;
        }
        json_free(&v);
        size_t need = used + fl + strlen(names[i]) + 40;
        if (need > cap_out) {
            char *t = realloc(out, (cap_out = need * 2) + 1);
            if (!t) {
                free(text);
                ok = false;
                break;
            }
            out = t;
        }
        names[i][strlen(names[i]) - 5] = 0;
        used += (size_t)sprintf(out + used, "%s{\"name\":\"%s\",\"schema\":", i ? "," : "", names[i]);
        memcpy(out + used, text, fl);
        used += fl;
        out[used++] = '}';
        free(text);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (!ok) {
        free(out);
        return NULL;
    }
    out[used++] = ']';
    out[used] = 0;
    *len = used;
    return out;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stats {
    double mean, p50, p99, max;
    int64_t n;
};

static struct stats summarize(double *v, int64_t n) {
    struct stats s = {0};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += v[i];
    s.mean = sum / (double)n;
    s.p50 = v[n / 2];
    s.p99 = v[(int64_t)floor(0.99 * (double)(n - 1))];
    s.max = v[n - 1];
    s.n = n;
    return s;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int cmd_bench_grammar(int argc, char **argv) {
    const char *model = NULL, *schemas = "tests/data/schemas/schemas.json";
    long walks = 4, max_tokens = 160, seed = 1;
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
            fprintf(stderr, "kvik bench grammar: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--schemas")) schemas = v;
        else if (!strcmp(a, "--walks") && cli_parse_long(v, 1, 1000, &walks)) continue;
        else if (!strcmp(a, "--max-tokens") && cli_parse_long(v, 1, 100000, &max_tokens)) continue;
        else if (!strcmp(a, "--seed") && cli_parse_long(v, 0, 1L << 40, &seed)) continue;
        else {
            fprintf(stderr, "kvik bench grammar: bad argument %s %s (try --help)\n", a, v);
            return 2;
        }
    }
    char path[4096];
    const char *mp = cli_resolve_model(model, path, sizeof path);
    if (!mp) return 1;
    struct kvik_err err = {0};
    struct model *m = NULL;
    struct tokenizer *tok = NULL;
    if (model_load(mp, &m, &err) || tokenizer_load(m->file, &tok, &err)) {
        fprintf(stderr, "kvik bench grammar: %s: %s\n", mp, err.msg);
        model_free(m);
        return 1;
    }
    size_t len = 0;
    struct stat sb;
    bool is_dir = stat(schemas, &sb) == 0 && S_ISDIR(sb.st_mode);
    char *text = is_dir ? read_schema_dir(schemas, &len) : cli_read_file(schemas, &len);
    struct json_value set;
    if (!text || json_parse(text, len, &set, &err) || set.type != JSON_ARRAY) {
        fprintf(stderr, "kvik bench grammar: %s: %s\n", schemas,
                text ? "not a JSON list of schemas" : is_dir ? "not a folder of JSON schemas" : "cannot read it");
        free(text);
        tokenizer_free(tok);
        model_free(m);
        return 1;
    }
    int n_eog = 0;
    int32_t *eog = engine_eog_ids(tok, &n_eog);
    int64_t t0 = clock_ns();
    struct grammar_vocab *v = grammar_vocab_from_tokenizer(tok, eog, n_eog, &err);
    double vocab_ms = (double)(clock_ns() - t0) / 1e6;
    int32_t nv = tokenizer_n_vocab(tok);
    uint32_t *mask = malloc(((size_t)nv + 31) / 32 * sizeof *mask);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    size_t cap = (size_t)set.len * (size_t)walks * (size_t)max_tokens + 1;
    double *all = malloc(cap * sizeof *all), *cold = malloc(cap * sizeof *cold), *warm = malloc(cap * sizeof *warm);
    double *compile_ms = calloc(set.len + 1, sizeof *compile_ms);
    int rc = 0;
    if (!v || !mask || !allowed || !all || !cold || !warm || !compile_ms) {
        fprintf(stderr, "kvik bench grammar: %s\n", v ? "out of memory" : err.msg);
        rc = 1;
        goto out;
    }
    int64_t n_all = 0, n_cold = 0, n_warm = 0, ended = 0, n_walks = 0;
    uint64_t rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    if (!json) printf("vocabulary: %d tokens, trie built in %.1f ms\n", nv, vocab_ms);
    for (size_t k = 0; k < set.len; k++) {
        const struct json_value *e = &set.items[k], *schema = NULL, *name = NULL;
        for (size_t i = 0; e->type == JSON_OBJECT && i < e->len; i++) {
            if (!strcmp(e->members[i].key, "schema")) schema = &e->members[i].value;
            if (!strcmp(e->members[i].key, "name")) name = &e->members[i].value;
        }
        const char *nm = name && name->type == JSON_STRING ? name->str : "?";
        struct grammar *g = NULL;
        t0 = clock_ns();
        if (!schema || grammar_from_schema_value(schema, &g, NULL, &err)) {
            fprintf(stderr, "kvik bench grammar: schema %s: %s\n", nm, schema ? err.msg : "no \"schema\"");
            rc = 1;
            continue;
        }
        compile_ms[k] = (double)(clock_ns() - t0) / 1e6;
        int64_t tokens = 0;
        for (long w = 0; w < walks; w++) {
            struct grammar_matcher *mt = grammar_matcher_new(g, v, &err);
            if (!mt) break;
            n_walks++;
            for (long step = 0; step < max_tokens; step++) {
                int64_t s0 = clock_ns();
                int64_t n = grammar_matcher_fill_mask(mt, mask);
                double us = (double)(clock_ns() - s0) / 1e3;
                all[n_all++] = us;
                if (w == 0) cold[n_cold++] = us;
                else warm[n_warm++] = us;
                tokens++;
                if (n <= 0) break;
                if (grammar_matcher_can_end(mt) && (grammar_matcher_must_end(mt) || rng_next(&rng) % 4 == 0)) {
                    ended++;
                    break;
                }
                int na = 0;
                for (int32_t id = 0; id < nv; id++)
                    if (mask[id >> 5] >> (id & 31) & 1) {
                        bool is_end = false;
                        for (int q = 0; q < n_eog; q++) is_end |= eog[q] == id;
                        if (!is_end) allowed[na++] = id;
                    }
                if (!na) break;
                grammar_matcher_accept_token(mt, allowed[rng_next(&rng) % (uint64_t)na]);
            }
            grammar_matcher_free(mt);
        }
        if (!json) printf("%-16s compile %7.2f ms, %5lld masks\n", nm, compile_ms[k], (long long)tokens);
        grammar_free(g);
    }
    struct stats sa = summarize(all, n_all), sc = summarize(cold, n_cold), sw = summarize(warm, n_warm);
    double cm = 0;
    for (size_t k = 0; k < set.len; k++) cm += compile_ms[k];
    cm /= set.len ? (double)set.len : 1;
    if (json) {
        printf("{\"vocab\":%d,\"schemas\":%zu,\"walks\":%lld,\"masks\":%lld,\"mean_us\":%.2f,\"p50_us\":%.2f,"
               "\"p99_us\":%.2f,\"max_us\":%.2f,\"cold\":{\"mean_us\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f},"
               "\"warm\":{\"mean_us\":%.2f,\"p50_us\":%.2f,\"p99_us\":%.2f},\"compile_ms_mean\":%.3f,\"compile_ms\":[",
               nv, set.len, (long long)n_walks, (long long)n_all, sa.mean, sa.p50, sa.p99, sa.max, sc.mean, sc.p50,
               sc.p99, sw.mean, sw.p50, sw.p99, cm);
        for (size_t k = 0; k < set.len; k++) printf("%s%.3f", k ? "," : "", compile_ms[k]);
        printf("]}\n");
    } else {
        printf("masks: %lld over %lld walks (%lld ended by the grammar)\n", (long long)n_all, (long long)n_walks,
               (long long)ended);
        printf("all:  mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", sa.mean, sa.p50, sa.p99, sa.max);
        printf("cold: mean %.1f us, p50 %.1f us, p99 %.1f us (first walk of each schema)\n", sc.mean, sc.p50, sc.p99);
        printf("warm: mean %.1f us, p50 %.1f us, p99 %.1f us\n", sw.mean, sw.p50, sw.p99);
        printf("compile: mean %.2f ms a schema\n", cm);
    }
out:
    free(mask);
    free(allowed);
    free(all);
    free(cold);
    free(warm);
    free(compile_ms);
    free(eog);
    grammar_vocab_free(v);
    json_free(&set);
    free(text);
    tokenizer_free(tok);
    model_free(m);
    return rc;
}
