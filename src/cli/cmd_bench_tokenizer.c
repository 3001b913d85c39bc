/*
 * cmd_bench_tokenizer.c — `kvik bench tokenizer`: the tokenizer's speed on
 * a corpus (src/tools/bench_tokenizer.h says what is measured), next to
 * Hugging Face tokenizers measured in the same run on the same vocabulary
 * and documents by bench/tokenizer-peer.py (run with the Python of
 * ~/.cache/kvik/tok-venv), with the ratio kvik / peer for each test and a
 * check that both produced the same ids (CRC-32 of all of them).
 *
 * The fresh-process test runs this binary again with the hidden option
 * --first-call N, which prints one JSON line and exits.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tools/bench_tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench tokenizer [-m MODEL] -f CORPUS [-t N] [-r N] [--json] [--no-peer]\n"
            "                            [--no-first] [--python PATH] [--peer-script PATH]\n"
            "  -m PATH     a GGUF file with a vocabulary (default: $KVIK_MODEL, else the default\n"
            "              model); only its tokenizer is loaded\n"
            "  -f FILE     the corpus (scripts/fetch-corpus.sh fetches some into\n"
            "              ~/.cache/kvik/corpus); cut into documents at blank lines\n"
            "  -t N        threads of the N-thread tests (default: all CPUs)\n"
            "  -r N        repetitions, medians reported (default 5)\n"
            "  --json      one JSON object on stdout\n"
            "  --no-peer   skip Hugging Face tokenizers\n"
            "  --no-first  skip the fresh-process (first call) test\n"
            "  --python P  the peer's Python (default: ~/.cache/kvik/tok-venv/bin/python,\n"
            "              or $KVIK_TOK_VENV/bin/python)\n"
            "  --peer-script P  default: bench/tokenizer-peer.py beside the build folder, or in\n"
            "              the current directory\n"
            "Tests: stream (every document once, caches cleared first), repeat (one ~4 KiB\n"
            "document over and over), first (a fresh process: load, then the first ~64 KiB);\n"
            "each on 1 and on N threads (tokenizer_encode_batch).\n");
}

/* Median of v[0..n). */
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The number after "key": in s[0..end) (end NULL: to the NUL), or NAN. */
static double json_num(const char *s, const char *end, const char *key) {
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    if (!p || (end && p >= end)) return NAN;
    return strtod(p + strlen(pat), NULL);
}

/* The number after "key": inside the object "obj":{...} of s, or NAN. */
static double json_obj_num(const char *s, const char *obj, const char *key) {
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":{", obj);
    const char *p = strstr(s, pat);
    if (!p) return NAN;
    return json_num(p, strchr(p, '}'), key);
}

/* The string after "key":" in s (no escapes expected) into out; false if
 * absent. */
static bool json_str(const char *s, const char *key, char *out, size_t len) {
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(s, pat);
    if (!p) return false;
    p += strlen(pat);
    snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
    return true;
}

/* One side's figures (kvik's or the peer's). */
struct first_fig {
    double load_ms, pool_ms, first_ms, process_ms, mb_s;
};

struct side {
    struct tokbench_rate stream_1t, stream_nt, stream_nocache_1t, repeat_1t, repeat_nt;
    struct first_fig first_1t, first_nt;
    bool has_first;
};

/* What the peer script reports: Hugging Face tokenizers, and tiktoken when it
 * could run on this vocabulary. */
struct peer_result {
    struct side hf, tt;
    uint32_t crc, tt_crc;
    double tokens, tt_tokens;
    bool has_tt;
    char version[64], tt_version[64];
    char tt_why[256];
};

static struct tokbench_rate rate_from(const char *js, const char *name) {
    return (struct tokbench_rate){json_obj_num(js, name, "seconds"), json_obj_num(js, name, "mb_s"),
                                  json_obj_num(js, name, "tok_s")};
}

static struct first_fig first_from(const char *js, const char *name) {
    return (struct first_fig){json_obj_num(js, name, "load_ms"), json_obj_num(js, name, "pool_ms"),
                              json_obj_num(js, name, "first_ms"), json_obj_num(js, name, "process_ms"),
                              json_obj_num(js, name, "mb_s")};
}

/* --first-call N: the child's side of the fresh-process test. */
static int first_call_child(const char *model, const char *corpus, int threads) {
    struct kvik_err err = {0};
    struct tokbench_corpus c;
    struct tokbench_first f;
    if (tokbench_corpus_load(corpus, &c, &err) != KVIK_OK ||
        tokbench_first_call(model, &c, threads, &f, &err) != KVIK_OK) {
        fprintf(stderr, "kvik bench tokenizer: %s\n", err.msg);
        tokbench_corpus_free(&c);
        return 1;
    }
    printf("{\"load_ms\":%.3f,\"pool_ms\":%.3f,\"first_ms\":%.3f,\"bytes\":%llu,\"tokens\":%llu}\n", f.load_ms,
           f.pool_ms, f.first_ms, (unsigned long long)f.bytes, (unsigned long long)f.tokens);
    tokbench_corpus_free(&c);
    return 0;
}

/* The fresh-process test, reps times for `threads`: medians. */
static bool run_first(const char *self, const char *model, const char *corpus, int threads, int reps,
                      struct first_fig *out) {
    double load[64], pool[64], first[64], proc[64], mb = 0;
    char tbuf[16], js[1024];
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    char *argv[] = {(char *)self, "bench", "tokenizer", "--first-call", tbuf, "-m", (char *)model,
                    "-f", (char *)corpus, NULL};
    for (int k = 0; k < reps; k++) {
        if (tokbench_spawn(argv, NULL, js, sizeof js, &proc[k]) != 0) return false;
        load[k] = json_num(js, NULL, "load_ms");
        pool[k] = json_num(js, NULL, "pool_ms");
        first[k] = json_num(js, NULL, "first_ms");
        mb = json_num(js, NULL, "bytes") / 1e6;
        if (isnan(load[k]) || isnan(first[k])) return false;
    }
    out->load_ms = median(load, reps);
    out->pool_ms = median(pool, reps);
    out->first_ms = median(first, reps);
    out->process_ms = median(proc, reps);
    out->mb_s = out->first_ms > 0 ? mb / (out->first_ms * 1e-3) : 0;
    return true;
}

static bool file_ok(const char *path) { return path && access(path, R_OK) == 0; }

/* Runs the peer; fills *peer and its crc / token count, or says why not
 * in why[]. */
static bool run_peer(const char *python, const char *script, const char *model, const char *corpus,
                     int threads, int reps, bool first, struct peer_result *pr, char *why, size_t why_len) {
    if (!file_ok(python)) {
        snprintf(why, why_len,
                 "no Python at %.200s (python3 -m venv ~/.cache/kvik/tok-venv && "
                 "~/.cache/kvik/tok-venv/bin/pip install -r scripts/tokenizer-requirements.txt)",
                 python);
        return false;
    }
    if (!file_ok(script)) {
        snprintf(why, why_len, "peer script %.200s not found (--peer-script)", script);
        return false;
    }
    char tbuf[16], rbuf[16];
    snprintf(tbuf, sizeof tbuf, "%d", threads);
    snprintf(rbuf, sizeof rbuf, "%d", reps);
    char *argv[] = {(char *)python, (char *)script, "--gguf", (char *)model, "--corpus", (char *)corpus,
                    "--threads", tbuf, "--reps", rbuf, first ? NULL : "--no-first", NULL};
    static char js[16384];
    double ms;
    int rc = tokbench_spawn(argv, NULL, js, sizeof js, &ms);
    if (rc != 0) {
        snprintf(why, why_len, "%.200s exited with status %d (its message is above)", script, rc);
        return false;
    }
    struct side *peer = &pr->hf, *tt = &pr->tt;
    peer->stream_1t = rate_from(js, "stream_1t");
    peer->stream_nt = rate_from(js, "stream_nt");
    peer->stream_nocache_1t = (struct tokbench_rate){NAN, NAN, NAN};
    peer->repeat_1t = rate_from(js, "repeat_1t");
    peer->repeat_nt = rate_from(js, "repeat_nt");
    peer->has_first = first;
    if (first) {
        peer->first_1t = first_from(js, "first_1t");
        peer->first_nt = first_from(js, "first_nt");
    }
    pr->crc = (uint32_t)json_num(js, NULL, "crc32");
    pr->tokens = json_num(js, NULL, "tokens");
    json_str(js, "version", pr->version, sizeof pr->version);
    /* tiktoken: tiktoken_* keys, or tiktoken_error */
    tt->stream_1t = rate_from(js, "tiktoken_stream_1t");
    tt->stream_nt = rate_from(js, "tiktoken_stream_nt");
    tt->stream_nocache_1t = (struct tokbench_rate){NAN, NAN, NAN};
    tt->repeat_1t = rate_from(js, "tiktoken_repeat_1t");
    tt->repeat_nt = rate_from(js, "tiktoken_repeat_nt");
    pr->tt_crc = (uint32_t)json_num(js, NULL, "tiktoken_crc32");
    pr->tt_tokens = json_num(js, NULL, "tiktoken_tokens");
    json_str(js, "tiktoken_version", pr->tt_version, sizeof pr->tt_version);
    pr->has_tt = !isnan(tt->stream_1t.mb_s) && !isnan(pr->tt_tokens);
    if (!pr->has_tt && !json_str(js, "tiktoken_error", pr->tt_why, sizeof pr->tt_why))
        snprintf(pr->tt_why, sizeof pr->tt_why, "the peer script reported no tiktoken figures");
    if (isnan(peer->stream_1t.mb_s) || isnan(pr->tokens)) {
        snprintf(why, why_len, "%.200s printed no figures", script);
        return false;
    }
    return true;
}

static void json_rate(const char *name, const struct tokbench_rate *r, bool comma) {
    printf("%s\"%s\":{\"seconds\":%.6f,\"mb_s\":%.3f,\"tok_s\":%.0f}", comma ? "," : "", name, r->seconds, r->mb_s,
           r->tok_s);
}

static void json_first(const char *name, const struct first_fig *f) {
    printf(",\"%s\":{\"load_ms\":%.3f,\"pool_ms\":%.3f,\"first_ms\":%.3f,\"process_ms\":%.3f,\"mb_s\":%.3f}", name,
           f->load_ms, f->pool_ms, f->first_ms, f->process_ms, f->mb_s);
}

static void json_side(const struct side *s, bool nocache) {
    putchar('{');
    json_rate("stream_1t", &s->stream_1t, false);
    json_rate("stream_nt", &s->stream_nt, true);
    if (nocache) json_rate("stream_nocache_1t", &s->stream_nocache_1t, true);
    json_rate("repeat_1t", &s->repeat_1t, true);
    json_rate("repeat_nt", &s->repeat_nt, true);
    if (s->has_first) {
        json_first("first_1t", &s->first_1t);
        json_first("first_nt", &s->first_nt);
    }
    putchar('}');
}

static double ratio(double a, double b) { return b > 0 && !isnan(a) && !isnan(b) ? a / b : NAN; }

static void json_ratios(const char *name, const struct side *k, const struct side *p) {
    printf(",\"%s\":{\"stream_1t\":%.3f,\"stream_nt\":%.3f,\"repeat_1t\":%.3f,\"repeat_nt\":%.3f}", name,
           ratio(k->stream_1t.mb_s, p->stream_1t.mb_s), ratio(k->stream_nt.mb_s, p->stream_nt.mb_s),
           ratio(k->repeat_1t.mb_s, p->repeat_1t.mb_s), ratio(k->repeat_nt.mb_s, p->repeat_nt.mb_s));
}

/* kvik's rate, then each peer's (p, q: NULL when absent) with the ratio. */
static void text_row(const char *name, int threads, const struct tokbench_rate *k, const struct tokbench_rate *p,
                     const struct tokbench_rate *q) {
    printf("  %-16s %3d %10.2f %10.3f", name, threads, k->mb_s, k->tok_s / 1e6);
    if (p && !isnan(p->mb_s)) printf(" %10.2f %8.2fx", p->mb_s, ratio(k->mb_s, p->mb_s));
    if (q && !isnan(q->mb_s)) printf(" %10.2f %8.2fx", q->mb_s, ratio(k->mb_s, q->mb_s));
    putchar('\n');
}

static void text_first(const char *who, int threads, const struct first_fig *f) {
    printf("  first call %-5s %3d  load %7.2f ms, first %6.2f ms (%.2f MB/s)", who, threads, f->load_ms,
           f->first_ms, f->mb_s);
    if (threads > 1 && !isnan(f->pool_ms) && f->pool_ms > 0) printf(", pool %.2f ms", f->pool_ms);
    printf(", whole process %.0f ms\n", f->process_ms);
}

int cmd_bench_tokenizer(int argc, char **argv) {
    const char *model_arg = NULL, *corpus = NULL, *python = NULL, *script = NULL;
    int threads = cpu_count(), reps = 5, first_child = 0;
    bool json = false, no_peer = false, no_first = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && i + 1 < argc) {
            model_arg = argv[++i];
        } else if (!strcmp(a, "-f") && i + 1 < argc) {
            corpus = argv[++i];
        } else if (!strcmp(a, "-t") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 1024, &v)) {
                fprintf(stderr, "kvik bench tokenizer: -t expects a thread count 1..1024, got '%s'\n", argv[i]);
                return 2;
            }
            threads = (int)v;
        } else if (!strcmp(a, "-r") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 64, &v)) {
                fprintf(stderr, "kvik bench tokenizer: -r expects 1..64, got '%s'\n", argv[i]);
                return 2;
            }
            reps = (int)v;
        } else if (!strcmp(a, "--first-call") && i + 1 < argc) {
            if (!cli_parse_long(argv[++i], 1, 1024, &v)) {
                fprintf(stderr, "kvik bench tokenizer: --first-call expects 1..1024, got '%s'\n", argv[i]);
                return 2;
            }
            first_child = (int)v;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--no-peer")) {
            no_peer = true;
        } else if (!strcmp(a, "--no-first")) {
            no_first = true;
        } else if (!strcmp(a, "--python") && i + 1 < argc) {
            python = argv[++i];
        } else if (!strcmp(a, "--peer-script") && i + 1 < argc) {
            script = argv[++i];
        } else {
            fprintf(stderr, "kvik bench tokenizer: unknown or incomplete argument '%s' (try --help)\n", a);
            return 2;
        }
    }
    if (!corpus) {
        fprintf(stderr, "kvik bench tokenizer: give a corpus with -f FILE (scripts/fetch-corpus.sh fetches some)\n");
        return 2;
    }
    char path_buf[4096];
    const char *model = cli_resolve_model(model_arg, path_buf, sizeof path_buf);
    if (!cli_model_exists(model, model_arg, "bench tokenizer")) return 1;
    if (first_child) return first_call_child(model, corpus, first_child);

    struct kvik_err err = {0};
    struct tokbench_corpus c = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    struct pool *pool = NULL;
    int rc = 1;
    if (tokbench_corpus_load(corpus, &c, &err) != KVIK_OK) goto fail;
    if (c.size == 0) {
        err_set(&err, KVIK_ERR_FORMAT, "corpus '%s' is empty", corpus);
        goto fail;
    }
    if (gguf_open(model, &g, &err) != KVIK_OK || tokenizer_load(g, &tok, &err) != KVIK_OK) goto fail;
    if (!(pool = pool_create(threads, &err))) goto fail;

    struct tokbench_result r;
    if (tokbench_run(tok, &c, pool, reps, &r, &err) != KVIK_OK) goto fail;
    struct side kv = {.stream_1t = r.stream_1t, .stream_nt = r.stream_nt, .stream_nocache_1t = r.stream_nocache_1t,
                      .repeat_1t = r.repeat_1t, .repeat_nt = r.repeat_nt};

    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!no_first && sl > 0) {
        self[sl] = 0;
        kv.has_first = run_first(self, model, corpus, 1, reps, &kv.first_1t) &&
                       run_first(self, model, corpus, threads, reps, &kv.first_nt);
        if (!kv.has_first) log_warn("bench tokenizer: the fresh-process test failed");
    }

    /* the peer */
    static struct peer_result pr;
    const struct side *peer = &pr.hf, *tt = &pr.tt;
    bool has_peer = false;
    char why[512] = "skipped (--no-peer)", py_buf[4096], script_buf[PATH_MAX + 64];
    if (!no_peer) {
        if (!python) {
            const char *venv = getenv("KVIK_TOK_VENV");
            if (venv && *venv) snprintf(py_buf, sizeof py_buf, "%s/bin/python", venv);
            else snprintf(py_buf, sizeof py_buf, "%s/.cache/kvik/tok-venv/bin/python",
                          getenv("HOME") ? getenv("HOME") : ".");
            python = py_buf;
        }
        if (!script) {
            /* beside the build folder (BUILD/kvik -> ../bench), else the current directory */
            char *slash = sl > 0 ? strrchr(self, '/') : NULL;
            script_buf[0] = 0;
            if (slash) {
                *slash = 0;
                snprintf(script_buf, sizeof script_buf, "%s/../bench/tokenizer-peer.py", self);
            }
            script = file_ok(script_buf) ? script_buf : "bench/tokenizer-peer.py";
        }
        fflush(stdout);
        has_peer = run_peer(python, script, model, corpus, threads, reps, kv.has_first, &pr, why, sizeof why);
        if (!has_peer) fprintf(stderr, "kvik bench tokenizer: peer: %s\n", why);
    }
    bool ids_match = has_peer && pr.crc == r.crc32 && pr.tokens == (double)r.tokens;
    bool has_tt = has_peer && pr.has_tt;
    bool tt_match = has_tt && pr.tt_crc == r.crc32 && pr.tt_tokens == (double)r.tokens;

    const char *mname = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    const char *cname = strrchr(corpus, '/') ? strrchr(corpus, '/') + 1 : corpus;
    if (json) {
        printf("{\"model\":");
        cli_json_str(stdout, mname, strlen(mname));
        printf(",\"pre\":");
        cli_json_str(stdout, tokenizer_pre_name(tok), strlen(tokenizer_pre_name(tok)));
        printf(",\"n_vocab\":%d,\"corpus\":", tokenizer_n_vocab(tok));
        cli_json_str(stdout, cname, strlen(cname));
        printf(",\"bytes\":%llu,\"docs\":%lld,\"tokens\":%llu,\"crc32\":%u,\"threads\":%d,\"reps\":%d,"
               "\"cache_hit_rate\":%.4f,\"repeat_doc_bytes\":%zu,\"repeat_count\":%lld,\"repeat_tokens\":%llu,"
               "\"kvik\":",
               (unsigned long long)r.bytes, (long long)r.docs, (unsigned long long)r.tokens, r.crc32, threads,
               reps, r.cache_hit_rate, r.repeat_doc_bytes, (long long)r.repeat_count,
               (unsigned long long)r.repeat_tokens);
        json_side(&kv, true);
        if (has_peer) {
            printf(",\"peer\":");
            json_side(peer, false);
            printf(",\"peer_version\":");
            cli_json_str(stdout, pr.version, strlen(pr.version));
            json_ratios("ratio", &kv, peer);
            printf(",\"ids_match\":%s", ids_match ? "true" : "false");
            if (has_tt) {
                printf(",\"tiktoken\":");
                json_side(tt, false);
                printf(",\"tiktoken_version\":");
                cli_json_str(stdout, pr.tt_version, strlen(pr.tt_version));
                json_ratios("tiktoken_ratio", &kv, tt);
                printf(",\"tiktoken_ids_match\":%s", tt_match ? "true" : "false");
            } else {
                printf(",\"tiktoken\":null,\"tiktoken_error\":");
                cli_json_str(stdout, pr.tt_why, strlen(pr.tt_why));
            }
            printf("}\n");
        } else {
            printf(",\"peer\":null,\"peer_error\":");
            cli_json_str(stdout, why, strlen(why));
            printf("}\n");
        }
    } else {
        printf("kvik bench tokenizer: %s (%s, %d tokens), corpus %s\n", mname, tokenizer_pre_name(tok),
               tokenizer_n_vocab(tok), cname);
        printf("  %.2f MB in %lld documents, %llu tokens (%.2f bytes/token); %d threads, median of %d;\n"
               "  word cache hit rate %.1f%% (stream, 1 thread); repeat: %zu-byte document x %lld\n",
               (double)r.bytes / 1e6, (long long)r.docs, (unsigned long long)r.tokens,
               r.tokens ? (double)r.bytes / (double)r.tokens : 0.0, threads, reps, 100 * r.cache_hit_rate,
               r.repeat_doc_bytes, (long long)r.repeat_count);
        printf("\n  %-16s %3s %10s %10s", "test", "thr", "kvik MB/s", "Mtok/s");
        if (has_peer) printf(" %10s %9s", "HF MB/s", "kvik/HF");
        if (has_tt) printf(" %10s %9s", "tt MB/s", "kvik/tt");
        printf("\n");
#define PEER_RATE(side, f) (has_peer ? &(side)->f : NULL)
#define TT_RATE(f) (has_tt ? &tt->f : NULL)
        text_row("stream", 1, &kv.stream_1t, PEER_RATE(peer, stream_1t), TT_RATE(stream_1t));
        text_row("stream", threads, &kv.stream_nt, PEER_RATE(peer, stream_nt), TT_RATE(stream_nt));
        text_row("stream no-cache", 1, &kv.stream_nocache_1t, NULL, NULL);
        text_row("repeat", 1, &kv.repeat_1t, PEER_RATE(peer, repeat_1t), TT_RATE(repeat_1t));
        text_row("repeat", threads, &kv.repeat_nt, PEER_RATE(peer, repeat_nt), TT_RATE(repeat_nt));
#undef PEER_RATE
#undef TT_RATE
        if (kv.has_first) {
            text_first("kvik", 1, &kv.first_1t);
            text_first("kvik", threads, &kv.first_nt);
        }
        if (has_peer && peer->has_first) {
            text_first("HF", 1, &peer->first_1t);
            text_first("HF", threads, &peer->first_nt);
        }
        if (has_peer) {
            printf("\n  HF: Hugging Face tokenizers %s; ids %s (crc32 %08x, %llu tokens)\n", pr.version,
                   ids_match ? "identical" : "DIFFER", r.crc32, (unsigned long long)r.tokens);
            if (has_tt)
                printf("  tt: tiktoken %s; ids %s\n", pr.tt_version, tt_match ? "identical" : "DIFFER");
            else
                printf("  tt: tiktoken not run: %s\n", pr.tt_why);
        } else {
            printf("\n  peer: %s\n", why);
        }
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "kvik bench tokenizer: %s\n", err.msg);
    pool_free(pool);
    tokenizer_free(tok);
    gguf_close(g);
    tokbench_corpus_free(&c);
    return rc;
}
