/*
 * cmd_bench_serve.c — `kvik bench serve` (load-test an OpenAI-compatible
 * server), `kvik bench sweep` (the same at several rates or concurrencies:
 * the throughput-latency curve) and `kvik bench compare` (two reports side
 * by side). The work is in src/tools/loadgen; this file reads flags, builds
 * the dataset and prints.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tools/loadgen/loadgen.h"

static void usage_serve(FILE *f) {
    fprintf(f,
            "usage: kvik bench serve --url URL [options]\n"
            "       kvik bench sweep --url URL (--rates 1,2,4,inf | --concurrency 1,4,16) [options]\n"
            "       kvik bench compare A.json B.json [--plot OUT.svg]\n"
            "\n"
            "Streams completions from an OpenAI-compatible server (kvik serve, llama-server,\n"
            "vLLM) and reports TTFT, TPOT, inter-token latency, E2E latency, throughput,\n"
            "goodput and errors; see docs/bench-serve.md.\n"
            "\n"
            "server:\n"
            "  --url URL            base URL, e.g. http://127.0.0.1:8080 (a trailing /v1 is fine)\n"
            "  --api-key K          bearer token (default: $OPENAI_API_KEY if set)\n"
            "  --model NAME         model field (default: the first of GET /v1/models)\n"
            "  --endpoint E         chat (default, /v1/chat/completions) or completions\n"
            "  --timeout S          per-request limit in seconds (default 600)\n"
            "  --no-ignore-eos      do not send ignore_eos (for servers that reject it)\n"
            "  --temperature T      send this temperature (default: the server's)\n"
            "  --no-metrics         do not scrape GET /metrics\n"
            "dataset:\n"
            "  --dataset D          random (default), sharegpt, prefix or file\n"
            "  --num-prompts N      requests in the run (default 100)\n"
            "  --input-len N        random: prompt tokens (default 256)\n"
            "  --output-len N       random, prefix, file default: max_tokens (default 128)\n"
            "  --range-ratio R      random: lengths uniform in len*(1-R)..len*(1+R) (default 0)\n"
            "  --prefix-len N       prefix: tokens of each shared system prompt (default 512)\n"
            "  --num-prefixes N     prefix: distinct system prompts (default 4)\n"
            "  --question-len N     prefix: tokens of each request's own question (default 64)\n"
            "  --dataset-path P     sharegpt: the ShareGPT JSON (default: from\n"
            "                       scripts/fetch-sharegpt.sh); file: JSONL of {\"prompt\",\"output_len\"}\n"
            "  -m, --tokenizer GGUF count prompt tokens with this model's tokenizer (exact\n"
            "                       lengths); without it a word stands for a token\n"
            "load:\n"
            "  --rate R             requests/s, or inf (default: all at once)\n"
            "  --burstiness B       gamma shape of the gaps; 1 = Poisson (default 1)\n"
            "  --max-concurrency C  at most C requests in flight\n"
            "  --seed S             seed of prompts and arrivals (default 0)\n"
            "  --fresh-prompts      sweep: every point sends prompts of its own (no prompt\n"
            "                       cache can serve one point from another)\n"
            "  --slo ttft=MS,tpot=MS[,e2e=MS]  objectives for goodput\n"
            "output:\n"
            "  --json OUT           full report with per-request records ('-' for stdout)\n"
            "  --plot OUT.svg       latency CDFs and tokens over time (sweep: the curve)\n"
            "  --quiet              no progress line\n");
}

struct serve_opts {
    struct lg_config cfg;
    struct lg_dataset_params dp;
    struct lg_slo slo;
    const char *dataset_name, *json_out, *plot_out, *tokenizer_path;
    char default_path[512];
    /* sweep */
    double rates[64];
    int32_t concs[64];
    int n_points;
    bool sweep_conc;
    bool fresh;        /* --fresh-prompts: each point its own prompts */
};

static bool parse_double(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

static bool parse_rate(const char *s, double *out) {
    if (!strcmp(s, "inf")) {
        *out = INFINITY;
        return true;
    }
    return parse_double(s, 1e-6, 1e9, out) && *out > 0;
}

/* "ttft=500,tpot=50" */
static bool parse_slo(const char *s, struct lg_slo *slo) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return false;
        *eq = 0;
        double v;
        if (!parse_double(eq + 1, 1e-6, 1e9, &v)) return false;
        if (!strcmp(tok, "ttft")) slo->ttft_ms = v;
        else if (!strcmp(tok, "tpot")) slo->tpot_ms = v;
        else if (!strcmp(tok, "e2e")) slo->e2e_ms = v;
        else return false;
    }
    return true;
}

/* "1,2,4,inf" or "1,4,16" into the sweep points. */
static bool parse_list(const char *s, struct serve_opts *o, bool conc) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    o->n_points = 0;
    o->sweep_conc = conc;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->n_points == 64) return false;
        if (conc) {
            long v;
            if (!cli_parse_long(tok, 1, 100000, &v)) return false;
            o->concs[o->n_points++] = (int32_t)v;
        } else if (!parse_rate(tok, &o->rates[o->n_points++])) {
            return false;
        }
    }
    return o->n_points > 0;
}

/* Parses argv[first..); returns 0, or the exit status (2 usage, -1 help shown). */
static int parse_opts(int argc, char **argv, int first, struct serve_opts *o, bool sweep) {
    memset(o, 0, sizeof *o);
    lg_default_config(&o->cfg);
    lg_dataset_default_params(&o->dp);
    o->dataset_name = "random";
    const char *key = getenv("OPENAI_API_KEY");
    if (key && *key) o->cfg.api_key = key;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
#define NEED_ARG                                                                       \
    do {                                                                               \
        if (!v) {                                                                      \
            fprintf(stderr, "kvik bench: %s needs a value (try --help)\n", a);         \
            return 2;                                                                  \
        }                                                                              \
        i++;                                                                           \
    } while (0)
#define BAD(what)                                                                      \
    do {                                                                               \
        fprintf(stderr, "kvik bench: %s expects %s, got '%s'\n", a, what, v);          \
        return 2;                                                                      \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_serve(stdout);
            return -1;
        } else if (!strcmp(a, "--quiet")) {
            o->cfg.quiet = true;
        } else if (!strcmp(a, "--no-ignore-eos")) {
            o->cfg.ignore_eos = false;
        } else if (!strcmp(a, "--no-metrics")) {
            o->cfg.scrape_metrics = false;
        } else if (!strcmp(a, "--url")) {
            NEED_ARG;
            o->cfg.url = v;
        } else if (!strcmp(a, "--api-key")) {
            NEED_ARG;
            o->cfg.api_key = v;
        } else if (!strcmp(a, "--model")) {
            NEED_ARG;
            o->cfg.model = v;
        } else if (!strcmp(a, "--endpoint")) {
            NEED_ARG;
            if (!strcmp(v, "chat")) o->cfg.endpoint = LG_ENDPOINT_CHAT;
            else if (!strcmp(v, "completions")) o->cfg.endpoint = LG_ENDPOINT_COMPLETIONS;
            else BAD("chat or completions");
        } else if (!strcmp(a, "--timeout")) {
            NEED_ARG;
            if (!parse_double(v, 0.001, 1e6, &o->cfg.timeout_s)) BAD("seconds");
        } else if (!strcmp(a, "--temperature")) {
            NEED_ARG;
            if (!parse_double(v, 0, 100, &o->cfg.temperature)) BAD("a temperature >= 0");
        } else if (!strcmp(a, "--dataset")) {
            NEED_ARG;
            o->dataset_name = v;
            if (!strcmp(v, "random")) o->dp.kind = LG_DATASET_RANDOM;
            else if (!strcmp(v, "sharegpt")) o->dp.kind = LG_DATASET_SHAREGPT;
            else if (!strcmp(v, "prefix")) o->dp.kind = LG_DATASET_PREFIX;
            else if (!strcmp(v, "file")) o->dp.kind = LG_DATASET_FILE;
            else BAD("random, sharegpt, prefix or file");
        } else if (!strcmp(a, "--num-prompts")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 10000000, &n)) BAD("1..10000000");
            o->dp.num_prompts = n;
        } else if (!strcmp(a, "--input-len")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 1000000, &n)) BAD("1..1000000 tokens");
            o->dp.input_len = (int32_t)n;
        } else if (!strcmp(a, "--output-len")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 1000000, &n)) BAD("1..1000000 tokens");
            o->dp.output_len = (int32_t)n;
        } else if (!strcmp(a, "--range-ratio")) {
            NEED_ARG;
            if (!parse_double(v, 0, 0.999, &o->dp.range_ratio)) BAD("0..0.999");
        } else if (!strcmp(a, "--prefix-len")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 1000000, &n)) BAD("1..1000000 tokens");
            o->dp.prefix_len = (int32_t)n;
        } else if (!strcmp(a, "--num-prefixes")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 100000, &n)) BAD("1..100000");
            o->dp.num_prefixes = (int32_t)n;
        } else if (!strcmp(a, "--question-len")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 1000000, &n)) BAD("1..1000000 tokens");
            o->dp.question_len = (int32_t)n;
        } else if (!strcmp(a, "--dataset-path")) {
            NEED_ARG;
            o->dp.path = v;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--tokenizer")) {
            NEED_ARG;
            o->tokenizer_path = v;
        } else if (!strcmp(a, "--rate") && !sweep) {
            NEED_ARG;
            if (!parse_rate(v, &o->cfg.rate)) BAD("requests/s > 0 or inf");
        } else if (!strcmp(a, "--burstiness")) {
            NEED_ARG;
            if (!parse_double(v, 1e-3, 1e3, &o->cfg.burstiness)) BAD("a gamma shape 0.001..1000");
        } else if (!strcmp(a, "--max-concurrency")) {
            NEED_ARG;
            if (!cli_parse_long(v, 1, 100000, &n)) BAD("1..100000");
            o->cfg.max_concurrency = (int32_t)n;
        } else if (!strcmp(a, "--seed")) {
            NEED_ARG;
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || errno || *v == '-') BAD("a non-negative integer");
            o->cfg.seed = o->dp.seed = s;
        } else if (!strcmp(a, "--slo")) {
            NEED_ARG;
            if (!parse_slo(v, &o->slo)) BAD("ttft=MS,tpot=MS[,e2e=MS]");
        } else if (!strcmp(a, "--json")) {
            NEED_ARG;
            o->json_out = v;
        } else if (!strcmp(a, "--plot")) {
            NEED_ARG;
            o->plot_out = v;
        } else if (!strcmp(a, "--rates") && sweep) {
            NEED_ARG;
            if (!parse_list(v, o, false)) BAD("a list of rates such as 1,2,4,inf");
        } else if (!strcmp(a, "--fresh-prompts") && sweep) {
            o->fresh = true;
        } else if (!strcmp(a, "--concurrency") && sweep) {
            NEED_ARG;
            if (!parse_list(v, o, true)) BAD("a list of concurrencies such as 1,4,16");
        } else {
            fprintf(stderr, "kvik bench %s: unknown argument '%s' (try --help)\n", sweep ? "sweep" : "serve", a);
            return 2;
        }
#undef NEED_ARG
#undef BAD
    }
    if (!o->cfg.url) {
        fprintf(stderr, "kvik bench %s: --url is required (try --help)\n", sweep ? "sweep" : "serve");
        return 2;
    }
    if (sweep && o->n_points == 0) {
        fprintf(stderr, "kvik bench sweep: give --rates LIST or --concurrency LIST\n");
        return 2;
    }
    if (o->dp.kind == LG_DATASET_SHAREGPT && !o->dp.path) {
        const char *dir = getenv("KVIK_CORPUS");
        if (dir && *dir) snprintf(o->default_path, sizeof o->default_path, "%s/sharegpt.json", dir);
        else
            snprintf(o->default_path, sizeof o->default_path, "%s/.cache/kvik/corpus/sharegpt.json",
                     getenv("HOME") ? getenv("HOME") : ".");
        o->dp.path = o->default_path;
        FILE *probe = fopen(o->dp.path, "rb");
        if (!probe) {
            fprintf(stderr, "kvik bench: %s not found; fetch it with scripts/fetch-sharegpt.sh or give --dataset-path\n",
                    o->dp.path);
            return 2;
        }
        fclose(probe);
    }
    if (o->dp.kind == LG_DATASET_FILE && !o->dp.path) {
        fprintf(stderr, "kvik bench: --dataset file needs --dataset-path FILE.jsonl\n");
        return 2;
    }
    return 0;
}

/* The dataset (with the tokenizer if one was given). */
static int make_dataset(struct serve_opts *o, struct lg_dataset *ds) {
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (o->tokenizer_path) {
        if (gguf_open(o->tokenizer_path, &g, &err) != KVIK_OK || tokenizer_load(g, &tok, &err) != KVIK_OK) {
            fprintf(stderr, "kvik bench: %s\n", err.msg);
            gguf_close(g);
            return 1;
        }
        gguf_close(g);
    }
    o->dp.tok = tok;
    kvik_status st = lg_dataset_build(&o->dp, ds, &err);
    tokenizer_free(tok);
    o->dp.tok = NULL;
    if (st != KVIK_OK) {
        fprintf(stderr, "kvik bench: dataset %s: %s\n", o->dataset_name, err.msg);
        return st == KVIK_ERR_INVALID_ARG ? 2 : 1;
    }
    if (ds->n < o->dp.num_prompts)
        fprintf(stderr, "kvik bench: the %s dataset has %lld usable prompts; running those\n", o->dataset_name,
                (long long)ds->n);
    return 0;
}

static void run_info(const struct serve_opts *o, const struct lg_result *res, int64_t n, struct lg_run_info *in) {
    memset(in, 0, sizeof *in);
    in->url = o->cfg.url;
    in->endpoint = o->cfg.endpoint == LG_ENDPOINT_CHAT ? "chat" : "completions";
    in->dataset = o->dataset_name;
    in->model = res ? res->model : o->cfg.model;
    in->rate = o->cfg.rate;
    in->burstiness = o->cfg.burstiness;
    in->max_concurrency = o->cfg.max_concurrency;
    in->num_prompts = n;
    in->seed = o->cfg.seed;
    in->slo = o->slo;
}

static int bench_serve_main(int argc, char **argv) {
    struct serve_opts o;
    int rc = parse_opts(argc, argv, 2, &o, false);
    if (rc) return rc < 0 ? 0 : rc;
    struct lg_dataset ds;
    if ((rc = make_dataset(&o, &ds))) return rc;
    struct kvik_err err = {0};
    struct lg_result res;
    if (lg_run(&o.cfg, &ds, &res, &err) != KVIK_OK) {
        fprintf(stderr, "kvik bench serve: %s\n", err.msg);
        lg_dataset_free(&ds);
        return err.code == KVIK_ERR_INVALID_ARG ? 2 : 1;
    }
    struct lg_summary s;
    lg_summarize_run(&res, &o.slo, &s);
    struct lg_run_info in;
    run_info(&o, &res, ds.n, &in);
    bool json_stdout = o.json_out && !strcmp(o.json_out, "-");
    lg_report_text(json_stdout ? stderr : stdout, &in, &s, &res.server);
    rc = 0;
    if (o.json_out && lg_report_json(o.json_out, &in, &s, &res, &err) != KVIK_OK) {
        fprintf(stderr, "kvik bench serve: %s\n", err.msg);
        rc = 1;
    }
    if (o.plot_out) {
        char title[256];
        snprintf(title, sizeof title, "kvik bench serve: %s, %s, %lld prompts", o.cfg.url, o.dataset_name,
                 (long long)ds.n);
        if (lg_plot_run_svg(o.plot_out, title, &res, &err) != KVIK_OK) {
            fprintf(stderr, "kvik bench serve: %s\n", err.msg);
            rc = 1;
        }
    }
    if (s.n_requests > 0 && s.n_ok == 0) {
        fprintf(stderr, "kvik bench serve: every request failed\n");
        rc = 1;
    }
    lg_result_free(&res);
    lg_dataset_free(&ds);
    return rc;
}

static int cmd_sweep(int argc, char **argv) {
    struct serve_opts o;
    int rc = parse_opts(argc, argv, 2, &o, true);
    if (rc) return rc < 0 ? 0 : rc;
    struct lg_dataset ds;
    int64_t per_point = o.dp.num_prompts;
    if (o.fresh) o.dp.num_prompts *= o.n_points; /* point i takes slice i */
    if ((rc = make_dataset(&o, &ds))) return rc;
    if (o.fresh) per_point = ds.n / o.n_points;
    if (o.fresh && per_point < 1) {
        fprintf(stderr, "kvik bench sweep: the dataset has too few prompts for %d fresh points\n", o.n_points);
        lg_dataset_free(&ds);
        return 1;
    }
    struct lg_sweep_point pts[64];
    struct kvik_err err = {0};
    char model[128] = "";
    for (int i = 0; i < o.n_points; i++) {
        struct lg_config c = o.cfg;
        if (o.sweep_conc) {
            c.rate = INFINITY;
            c.max_concurrency = o.concs[i];
        } else {
            c.rate = o.rates[i];
        }
        if (model[0]) c.model = model;
        struct lg_result res;
        /* fresh: a point's own slice, so that no server's prompt cache
         * serves one point from the last */
        struct lg_dataset view = ds;
        if (o.fresh) view.items = ds.items + (size_t)i * (size_t)per_point, view.n = per_point;
        if (lg_run(&c, &view, &res, &err) != KVIK_OK) {
            fprintf(stderr, "kvik bench sweep: %s\n", err.msg);
            lg_dataset_free(&ds);
            return 1;
        }
        snprintf(model, sizeof model, "%s", res.model);
        memset(&pts[i], 0, sizeof pts[i]);
        pts[i].rate = c.rate;
        pts[i].concurrency = o.sweep_conc ? c.max_concurrency : 0;
        lg_summarize_run(&res, &o.slo, &pts[i].s);
        pts[i].sv = res.server;
        if (!o.cfg.quiet) {
            char x[32];
            if (o.sweep_conc) snprintf(x, sizeof x, "concurrency %d", c.max_concurrency);
            else if (isinf(c.rate)) snprintf(x, sizeof x, "rate inf");
            else snprintf(x, sizeof x, "rate %g", c.rate);
            fprintf(stderr, "kvik bench sweep: %s: %.1f output tok/s, TTFT p50 %.1f ms, TPOT p50 %.2f ms, %lld errors\n",
                    x, pts[i].s.output_throughput, pts[i].s.ttft.median, pts[i].s.tpot.median,
                    (long long)(pts[i].s.n_requests - pts[i].s.n_ok));
        }
        lg_result_free(&res);
    }
    struct lg_run_info in;
    run_info(&o, NULL, o.fresh ? per_point : ds.n, &in);
    in.model = model;
    printf("kvik bench sweep: %s (%s endpoint), model %s, dataset %s, %lld prompts a point\n\n", o.cfg.url,
           in.endpoint, model[0] ? model : "(not named)", o.dataset_name, (long long)(o.fresh ? per_point : ds.n));
    lg_report_sweep_text(stdout, pts, o.n_points);
    if (o.json_out && lg_report_sweep_json(o.json_out, &in, pts, o.n_points, &err) != KVIK_OK) {
        fprintf(stderr, "kvik bench sweep: %s\n", err.msg);
        rc = 1;
    }
    if (o.plot_out) {
        struct lg_sweep_series se = {model[0] ? model : o.cfg.url, pts, o.n_points};
        char title[256];
        snprintf(title, sizeof title, "kvik bench sweep: %s, %s", o.cfg.url, o.dataset_name);
        if (lg_plot_sweep_svg(o.plot_out, title, &se, 1, &err) != KVIK_OK) {
            fprintf(stderr, "kvik bench sweep: %s\n", err.msg);
            rc = 1;
        }
    }
    lg_dataset_free(&ds);
    return rc;
}

/* compare: two serve reports (table with ratios), or two sweep reports (a
 * table per point and, with --plot, both curves on one figure). */
static int cmd_compare(int argc, char **argv) {
    const char *files[2] = {NULL, NULL}, *plot = NULL, *names[2] = {"A", "B"};
    int nf = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_serve(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--plot") && i + 1 < argc) {
            plot = argv[++i];
        } else if (!strcmp(argv[i], "--names") && i + 1 < argc) {
            static char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            char *comma = strchr(buf, ',');
            if (!comma) {
                fprintf(stderr, "kvik bench compare: --names expects A,B\n");
                return 2;
            }
            *comma = 0;
            names[0] = buf;
            names[1] = comma + 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kvik bench compare: unknown argument '%s'\n", argv[i]);
            return 2;
        } else if (nf < 2) {
            files[nf++] = argv[i];
        } else {
            fprintf(stderr, "kvik bench compare: expected two reports\n");
            return 2;
        }
    }
    if (nf != 2) {
        fprintf(stderr, "usage: kvik bench compare A.json B.json [--names A,B] [--plot OUT.svg]\n");
        return 2;
    }
    struct kvik_err err = {0};
    struct lg_sweep_point *pa = NULL, *pb = NULL;
    int na = 0, nb = 0;
    if (lg_sweep_load(files[0], &pa, &na, &err) == KVIK_OK && lg_sweep_load(files[1], &pb, &nb, &err) == KVIK_OK) {
        printf("A (%s): %s\n", names[0], files[0]);
        lg_report_sweep_text(stdout, pa, na);
        printf("B (%s): %s\n", names[1], files[1]);
        lg_report_sweep_text(stdout, pb, nb);
        int m = na < nb ? na : nb;
        printf("\nB/A per point: output tok/s, TTFT p50, TPOT p50\n");
        for (int i = 0; i < m; i++) {
            const struct lg_summary *a = &pa[i].s, *b = &pb[i].s;
            printf("  point %d: %.3f  %.3f  %.3f\n", i + 1,
                   a->output_throughput > 0 ? b->output_throughput / a->output_throughput : NAN,
                   a->ttft.median > 0 ? b->ttft.median / a->ttft.median : NAN,
                   a->tpot.median > 0 ? b->tpot.median / a->tpot.median : NAN);
        }
        int rc = 0;
        if (plot) {
            struct lg_sweep_series se[2] = {{names[0], pa, na}, {names[1], pb, nb}};
            if (lg_plot_sweep_svg(plot, "throughput-latency", se, 2, &err) != KVIK_OK) {
                fprintf(stderr, "kvik bench compare: %s\n", err.msg);
                rc = 1;
            }
        }
        free(pa);
        free(pb);
        return rc;
    }
    free(pa);
    free(pb);
    if (lg_report_compare(stdout, files[0], files[1], &err) != KVIK_OK) {
        fprintf(stderr, "kvik bench compare: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int cmd_bench_serve(int argc, char **argv) {
    if (!strcmp(argv[1], "sweep")) return cmd_sweep(argc, argv);
    if (!strcmp(argv[1], "compare")) return cmd_compare(argc, argv);
    return bench_serve_main(argc, argv);
}
