/*
 * cmd_eval.c — `kvik eval`: the task regression gate. Runs every case of a
 * task file (tools/eval.h) against a model, reports pass/fail per case and
 * the pass rate per tag, writes the results as JSON, and against a baseline
 * results file lists the cases that changed and fails when a tag's pass
 * rate dropped by more than --max-drop points.
 *
 * Generated replies come from the serving engine, one request per case,
 * as `kvik run` submits its prompt (gen.c), --parallel of them side by
 * side (a token's logits do not depend on what shares its batch, so the
 * replies are those of one case at a time). A choice case generates
 * nothing: each option's tokens follow the prompt's in one forward pass of
 * the model (as `kvik perplexity` runs its chunks), and the option scores
 * the sum of its tokens' log-probabilities (log-softmax in double).
 *
 * With --url the same cases run against any OpenAI-compatible server
 * instead (eval_url.h): generated replies from /v1/completions or
 * /v1/chat/completions, choice options scored from the prompt
 * log-probabilities /v1/completions echoes (echo, logprobs, max_tokens 0).
 * A case the server refuses, or a choice case on a server without echoed
 * logprobs, fails with the reason; no answer at all ends the run.
 *
 * Exit status: 0 all ran and the gate held (or no baseline); 1 the gate
 * failed, or a runtime error; 2 bad arguments, or a task or baseline file
 * that does not parse (reported before the model loads).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/eval_url.h"
#include "cli/gen.h"
#include "model/kv.h"
#include "tools/eval.h"
#include "tools/ppl.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik eval [-m MODEL | --url URL] --tasks FILE.jsonl [options]\n"
            "  -m PATH          model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  --url URL        run the cases against an OpenAI-compatible server (http://HOST:PORT[/v1])\n"
            "  --api-key KEY    with --url: sent as \"Authorization: Bearer KEY\"\n"
            "  --model NAME     with --url: the model name to ask for (default: the first of /v1/models)\n"
            "  --tasks FILE     the cases, one JSON object a line (docs/quality.md, \"kvik eval\")\n"
            "  --baseline FILE  results of an earlier run (-o): list the changed cases and gate on them\n"
            "  --max-drop PCT   the largest drop of a tag's pass rate, in points, that passes (default 0)\n"
            "  -o FILE          write the results JSON to FILE\n"
            "  --json           print the results JSON on stdout\n"
            "  -t N             threads (default: all CPUs)\n"
            "  -c N             context size (default: the model's, at most 8192)\n"
            "  --kv-type T      K/V cache rows: f32 (default), f16 or q8_0\n"
            "  --parallel N     generated cases run side by side, 1..64 (default 8)\n"
            "  --chat-template NAME  for \"messages\" cases: chatml, llama3, gemma, mistral or phi3\n"
            "exit status: 0 passed the gate, 1 the gate failed (or an error), 2 bad arguments or task file\n");
}

struct eval_opts {
    struct gen_opts g;
    const char *tasks, *baseline, *out;
    const char *url, *api_key, *model_name; /* --url, --api-key, --model */
    double max_drop;
    long parallel; /* --parallel */
    bool json;
};

static int parse_args(int argc, char **argv, struct eval_opts *o) {
    *o = (struct eval_opts){.g = gen_opts_default(0), .parallel = 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        bool known = !strcmp(a, "-m") || !strcmp(a, "--tasks") || !strcmp(a, "--baseline") || !strcmp(a, "-o") ||
                     !strcmp(a, "--max-drop") || !strcmp(a, "-t") || !strcmp(a, "-c") || !strcmp(a, "--kv-type") ||
                     !strcmp(a, "--chat-template") || !strcmp(a, "--url") || !strcmp(a, "--api-key") ||
                     !strcmp(a, "--model") || !strcmp(a, "--parallel");
        if (!known) {
            fprintf(stderr, "kvik eval: unknown argument '%s' (try kvik eval --help)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "kvik eval: %s needs a value\n", a);
            return 2;
        }
        i++;
        bool ok = true;
        float f;
        if (!strcmp(a, "-m")) o->g.model = v;
        else if (!strcmp(a, "--tasks")) o->tasks = v;
        else if (!strcmp(a, "--baseline")) o->baseline = v;
        else if (!strcmp(a, "-o")) o->out = v;
        else if (!strcmp(a, "--chat-template")) o->g.chat_template = v;
        else if (!strcmp(a, "--url")) o->url = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--model")) o->model_name = v;
        else if (!strcmp(a, "--max-drop")) ok = cli_parse_float(v, 0, 100, &f) && ((o->max_drop = f), 1);
        else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &o->g.threads);
        else if (!strcmp(a, "--parallel")) ok = cli_parse_long(v, 1, 64, &o->parallel);
        else if (!strcmp(a, "-c")) ok = cli_parse_long(v, 1, 1 << 20, &o->g.n_ctx);
        else if (!strcmp(v, "f32")) o->g.kv_type = TENSOR_TYPE_F32;
        else if (!strcmp(v, "f16")) o->g.kv_type = TENSOR_TYPE_F16;
        else if (!strcmp(v, "q8_0")) o->g.kv_type = TENSOR_TYPE_Q8_0;
        else ok = false;
        if (!ok) {
            fprintf(stderr, "kvik eval: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!o->tasks) {
        fprintf(stderr, "kvik eval: no task file: --tasks FILE.jsonl (try kvik eval --help)\n");
        return 2;
    }
    if (o->url && o->g.model) {
        fprintf(stderr, "kvik eval: -m and --url exclude each other (a local model, or a server)\n");
        return 2;
    }
    if (!o->url && (o->api_key || o->model_name)) {
        fprintf(stderr, "kvik eval: --api-key and --model go with --url\n");
        return 2;
    }
    return -1;
}

/* What one case came to. */
struct outcome {
    bool pass;
    char *reply;     // generated cases: the reply (malloc'd, NUL-terminated)
    size_t reply_len;
    double *scores;  // choice: [options.n] log-likelihoods
    const char *why; // a case that could not run: why (static)
    /* a generated case while it runs */
    struct gen_job *job; // submitted, not yet waited for
    int32_t *out;        // [max_tokens] its ids
    struct gen_text text;
};

static bool generated(const struct eval_case *c, const struct outcome *r) {
    return !r->why && c->check != EVAL_CHECK_CHOICE;
}

/* Queues case c's generation (greedy unless the case samples). */
static kvik_status submit_case(struct gen *g, const struct eval_case *c, const int32_t *ids, int n_ids,
                               struct outcome *r, struct kvik_err *err) {
    struct sampler_params sp = sampler_params_default();
    sp.temp = (float)c->temperature;
    sp.seed = c->seed;
    if (!(r->out = malloc(sizeof(int32_t) * (size_t)c->max_tokens)))
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    return gen_submit(g, ids, n_ids, c->max_tokens, &sp, 0, r->out, NULL, &r->text, &r->job, err);
}

/* Waits for case c's generation; after it r holds the reply and pass. */
static kvik_status finish_case(const struct eval_case *c, struct outcome *r, struct kvik_err *err) {
    struct gen_result gr;
    kvik_status st = gen_wait(r->job, &gr, err);
    r->job = NULL;
    free(r->out);
    r->out = NULL;
    struct gen_text t = r->text;
    r->text = (struct gen_text){0};
    if (!st && !(r->reply = malloc(t.len + 1))) st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
    if (!st) {
        if (t.len) memcpy(r->reply, t.buf, t.len);
        r->reply[t.len] = 0;
        r->reply_len = t.len;
        r->pass = eval_check_reply(c, r->reply, r->reply_len);
    }
    free(t.buf);
    return st;
}

/* Runs case c against the server: r's reply or scores and pass; a case
 * the server refuses (or, for a choice case, cannot score) gets r->why
 * and its message on stderr. Returns non-OK only when the run cannot go
 * on (no answer at all, out of memory). */
static kvik_status url_case(struct eval_url *u, const struct eval_case *c, struct outcome *r, bool *said_no_echo,
                            struct kvik_err *err) {
    struct kvik_err e2 = {0};
    kvik_status st;
    if (c->check == EVAL_CHECK_CHOICE && !c->prompt) {
        r->why = "a choice case with messages: --url scores raw prompts only";
        return KVIK_OK;
    }
    if (c->check == EVAL_CHECK_CHOICE) {
        if (!(r->scores = malloc(sizeof(double) * (size_t)c->options.n)))
            return err_set(err, KVIK_ERR_NOMEM, "out of memory");
        st = eval_url_score(u, c, r->scores, &e2);
        if (!st) r->pass = eval_choice_pass(c, r->scores);
    } else {
        st = eval_url_generate(u, c, &r->reply, &r->reply_len, &e2);
        if (!st) r->pass = eval_check_reply(c, r->reply, r->reply_len);
    }
    if (st == KVIK_ERR_INVALID_ARG || st == KVIK_ERR_UNSUPPORTED || st == KVIK_ERR_FORMAT) {
        free(r->scores);
        r->scores = NULL;
        r->pass = false;
        r->why = st == KVIK_ERR_UNSUPPORTED ? "the server returns no prompt log-probabilities"
                 : st == KVIK_ERR_FORMAT    ? "the server's answer has no reply"
                                            : "the server refused the request";
        if (st != KVIK_ERR_UNSUPPORTED || !*said_no_echo) fprintf(stderr, "kvik eval: case %s: %s\n", c->id, e2.msg);
        if (st == KVIK_ERR_UNSUPPORTED) *said_no_echo = true;
        return KVIK_OK;
    }
    if (st) {
        *err = e2;
        return st;
    }
    return KVIK_OK;
}

/* A case's prompt tokens (BOS as the vocabulary says; control-token text
 * in a raw prompt or a message content stays text); *ids malloc'd. */
static kvik_status encode_prompt(const struct gen *g, const struct chat_format *fmt, const struct eval_case *c,
                                 int32_t **ids, int64_t *n, struct kvik_err *err) {
    *ids = NULL, *n = 0;
    if (c->prompt) {
        size_t len = strlen(c->prompt);
        int64_t k = tokenizer_encode(g->tok, c->prompt, len, true, false, NULL, 0);
        if (k <= 0) return err_set(err, KVIK_ERR_INVALID_ARG, "case %s: cannot tokenize the prompt", c->id);
        if (!(*ids = malloc(sizeof(int32_t) * (size_t)k))) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
        tokenizer_encode(g->tok, c->prompt, len, true, false, *ids, k);
        *n = k;
        return KVIK_OK;
    }
    struct chat_msg *m = malloc(sizeof *m * (size_t)c->n_msgs);
    if (!m) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n_msgs; i++) m[i] = (struct chat_msg){.role = c->msgs[i].role, .content = c->msgs[i].content};
    size_t nn = 0;
    struct kvik_err e2 = {0};
    kvik_status st = chat_encode(fmt, g->tok, m, (size_t)c->n_msgs, true, ids, &nn, &e2);
    free(m);
    if (st) return err_set(err, st, "case %s (line %d): %s", c->id, c->line, e2.msg);
    *n = (int64_t)nn;
    return KVIK_OK;
}

/* The forward-pass state of the choice cases. */
struct scorer {
    struct model_ctx *ctx;
    struct kv_flat kv;
    int n_ctx, n_batch, n_vocab;
    int32_t *seq, *pos;
    bool *mark;
    int max_rows;  // the most option tokens
    float *logits; // [max_rows][n_vocab]: the rows that predict an option's tokens
};

static void scorer_free(struct scorer *s) {
    model_ctx_free(s->ctx);
    kv_flat_free(&s->kv);
    free(s->seq), free(s->pos), free(s->mark), free(s->logits);
    *s = (struct scorer){0};
}

static kvik_status scorer_init(struct scorer *s, const struct gen *g, const struct eval_opts *o, int n_ctx,
                               int max_rows, struct kvik_err *err) {
    const struct model *m = g->model;
    s->n_ctx = n_ctx;
    s->n_batch = n_ctx < GEN_MAX_BATCH ? n_ctx : GEN_MAX_BATCH;
    s->n_vocab = m->hp.n_vocab;
    s->max_rows = max_rows;
    if (!kv_type_fits(o->g.kv_type, m->hp.n_head_kv * m->hp.head_dim, m->hp.head_dim))
        return err_set(err, KVIK_ERR_UNSUPPORTED, "--kv-type does not fit heads of %d", m->hp.head_dim);
    if (!(s->ctx = model_ctx_new(m, (int)o->g.threads, s->n_batch, n_ctx, err))) return err->code ? err->code : KVIK_ERR_NOMEM;
    kvik_status st = kv_flat_init(&s->kv, m->hp.n_layer, 1, n_ctx, m->hp.n_head_kv * m->hp.head_dim, o->g.kv_type, err);
    if (st) return st;
    s->seq = calloc((size_t)s->n_batch, sizeof(int32_t));
    s->pos = malloc(sizeof(int32_t) * (size_t)s->n_batch);
    s->mark = malloc((size_t)s->n_batch);
    s->logits = malloc(sizeof(float) * (size_t)max_rows * (size_t)s->n_vocab);
    if (!s->seq || !s->pos || !s->mark || !s->logits) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

/* The log-likelihood of ids[n_prompt..n) after ids[0..n_prompt): the sum
 * of log p(ids[i] | ids[0..i)) over the option's tokens. */
static kvik_status score_tokens(struct scorer *s, const int32_t *ids, int n_prompt, int n, double *out,
                                struct kvik_err *err) {
    const int first = n_prompt - 1; /* the first row that predicts an option token */
    int rows = 0;
    for (int start = 0; start < n - 1; start += s->n_batch) {
        int nb = n - 1 - start < s->n_batch ? n - 1 - start : s->n_batch;
        for (int i = 0; i < nb; i++) s->pos[i] = start + i, s->mark[i] = start + i >= first;
        struct model_batch mb = {.n = nb, .tokens = ids + start, .pos = s->pos, .seq = s->seq, .logits = s->mark};
        kvik_status st = model_forward(s->ctx, &s->kv.base, &mb, s->logits + (size_t)rows * (size_t)s->n_vocab, err);
        if (st) return st;
        for (int i = 0; i < nb; i++) rows += s->mark[i];
    }
    double sum = 0;
    for (int r = 0; r < rows; r++) {
        struct ppl_row row;
        ppl_score(s->logits + (size_t)r * (size_t)s->n_vocab, s->n_vocab, ids[first + r + 1], &row);
        sum -= row.nll;
    }
    *out = sum;
    return KVIK_OK;
}

/* Tallies per tag, in the order the tags first appear; the overall one
 * last. */
struct tallies {
    struct eval_tally *t; // [n]
    int n;
    struct eval_tally all;
};

static kvik_status tally(struct tallies *ts, const struct eval_set *set, const struct outcome *res) {
    ts->all = (struct eval_tally){.tag = ""};
    for (int i = 0; i < set->n; i++) {
        const struct eval_case *c = &set->cases[i];
        ts->all.total++, ts->all.pass += res[i].pass;
        for (int k = 0; k < c->tags.n; k++) {
            int j = 0;
            while (j < ts->n && strcmp(ts->t[j].tag, c->tags.s[k])) j++;
            if (j == ts->n) {
                struct eval_tally *g = realloc(ts->t, sizeof *g * (size_t)(ts->n + 1));
                if (!g) return KVIK_ERR_NOMEM;
                ts->t = g;
                ts->t[ts->n++] = (struct eval_tally){.tag = c->tags.s[k]};
            }
            ts->t[j].total++, ts->t[j].pass += res[i].pass;
        }
    }
    return KVIK_OK;
}

static void write_tally(FILE *f, const struct eval_tally *t) {
    fprintf(f, "{\"pass\":%d,\"total\":%d,\"rate\":%.2f}", t->pass, t->total, eval_rate(t));
}

static void write_results(FILE *f, const char *model, const char *tasks, const struct eval_set *set,
                          const struct outcome *res, const struct tallies *ts) {
    fprintf(f, "{\"model\":");
    cli_json_str(f, model, strlen(model));
    fprintf(f, ",\"tasks\":");
    cli_json_str(f, tasks, strlen(tasks));
    fprintf(f, ",\"cases\":[");
    for (int i = 0; i < set->n; i++) {
        const struct eval_case *c = &set->cases[i];
        fprintf(f, "%s\n{\"id\":", i ? "," : "");
        cli_json_str(f, c->id, strlen(c->id));
        fprintf(f, ",\"tags\":[");
        for (int k = 0; k < c->tags.n; k++) {
            if (k) fputc(',', f);
            cli_json_str(f, c->tags.s[k], strlen(c->tags.s[k]));
        }
        fprintf(f, "],\"check\":\"%s\",\"pass\":%s", eval_check_name(c->check), res[i].pass ? "true" : "false");
        if (res[i].why) fprintf(f, ",\"error\":\"%s\"", res[i].why);
        if (c->check == EVAL_CHECK_CHOICE && res[i].scores) {
            fprintf(f, ",\"scores\":[");
            for (int k = 0; k < c->options.n; k++) fprintf(f, "%s%.6f", k ? "," : "", res[i].scores[k]);
            fputc(']', f);
        } else if (res[i].reply) {
            fprintf(f, ",\"reply\":");
            cli_json_str(f, res[i].reply, res[i].reply_len);
        }
        fputc('}', f);
    }
    fprintf(f, "],\n\"tags\":{");
    for (int j = 0; j < ts->n; j++) {
        fprintf(f, "%s", j ? "," : "");
        cli_json_str(f, ts->t[j].tag, strlen(ts->t[j].tag));
        fputc(':', f);
        write_tally(f, &ts->t[j]);
    }
    fprintf(f, "},\"overall\":");
    write_tally(f, &ts->all);
    fprintf(f, "}\n");
}

/* A reply as one short line for stderr. */
static void print_reply(const char *s, size_t n) {
    fputc('"', stderr);
    size_t i = 0;
    for (; i < n && (i < 72 || ((unsigned char)s[i] & 0xC0) == 0x80); i++) { /* whole characters */
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') fputs("\\n", stderr);
        else if (ch < 0x20 || ch == 0x7f) fprintf(stderr, "\\x%02x", ch);
        else fputc(ch, stderr);
    }
    fputs(i < n ? "\"..." : "\"", stderr);
}

/* One line on stderr: pass or FAIL, the case, and why it failed. */
static void print_outcome(const struct eval_case *c, const struct outcome *r) {
    fprintf(stderr, "%s %s", r->pass ? "pass" : "FAIL", c->id);
    if (r->why) fprintf(stderr, ": %s", r->why);
    else if (!r->pass && r->reply) fputs(": ", stderr), print_reply(r->reply, r->reply_len);
    else if (!r->pass && r->scores) {
        int best = c->answer == 0;
        for (int k = 0; k < c->options.n; k++)
            if (k != c->answer && r->scores[k] > r->scores[best]) best = k;
        fprintf(stderr, ": option %d scores %.3f, the answer (%d) %.3f", best, r->scores[best], c->answer,
                r->scores[c->answer]);
    }
    fputc('\n', stderr);
}

/* Compares with the baseline: prints the changed cases and every tag's
 * rate against its old one; true when no tag (nor the overall rate) drops
 * by more than max_drop points. */
static bool gate(const struct eval_results *base, const struct eval_set *set, const struct outcome *res,
                 const struct tallies *ts, double max_drop) {
    int fixed = 0, broken = 0, added = 0;
    for (int i = 0; i < set->n; i++) {
        int j = 0;
        while (j < base->n_cases && strcmp(base->ids[j], set->cases[i].id)) j++;
        if (j == base->n_cases) {
            added++;
            continue;
        }
        if (base->pass[j] == res[i].pass) continue;
        fprintf(stderr, "kvik eval: %s %s\n", res[i].pass ? "fixed " : "broken", set->cases[i].id);
        res[i].pass ? fixed++ : broken++;
    }
    int gone = 0;
    for (int j = 0; j < base->n_cases; j++) {
        int i = 0;
        while (i < set->n && strcmp(base->ids[j], set->cases[i].id)) i++;
        gone += i == set->n;
    }
    fprintf(stderr, "kvik eval: against the baseline: %d fixed, %d broken, %d new, %d not in this run\n", fixed,
            broken, added, gone);
    bool ok = true;
    for (int k = 0; k <= base->n_tags; k++) {
        const struct eval_tally *b = k < base->n_tags ? &base->tags[k] : &base->overall;
        if (k == base->n_tags && !base->has_overall) break;
        const struct eval_tally *now = NULL;
        if (k == base->n_tags) now = &ts->all;
        for (int j = 0; j < ts->n && !now; j++)
            if (!strcmp(ts->t[j].tag, b->tag)) now = &ts->t[j];
        const char *kind = k == base->n_tags ? "" : "tag ", *name = k == base->n_tags ? "overall" : b->tag;
        if (!now) {
            fprintf(stderr, "kvik eval: tag %s: not in this run\n", name);
            continue;
        }
        double drop = eval_rate(b) - eval_rate(now);
        bool fail = drop > max_drop + 1e-9;
        if (fail || drop != 0)
            fprintf(stderr, "kvik eval: %s%s: %.1f%% -> %.1f%% (%+.1f points)%s\n", kind, name, eval_rate(b),
                    eval_rate(now), -drop, fail ? ": dropped more than --max-drop" : "");
        if (fail) ok = false;
    }
    return ok;
}

static char *read_or_say(const char *path, const char *what, size_t *len) {
    char *buf = cli_read_file(path, len);
    if (!buf) fprintf(stderr, "kvik eval: cannot read %s '%s': %s\n", what, path, strerror(errno));
    return buf;
}

int cmd_eval(int argc, char **argv) {
    struct eval_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    struct kvik_err err = {0};
    struct eval_set set = {0};
    struct eval_results base = {0};
    size_t len;
    char *buf = read_or_say(o.tasks, "task file", &len);
    if (!buf) return 2;
    kvik_status st = eval_set_parse(buf, len, &set, &err);
    free(buf);
    if (st) {
        fprintf(stderr, "kvik eval: %s: %s\n", o.tasks, err.msg);
        return st == KVIK_ERR_FORMAT ? 2 : 1;
    }
    if (o.baseline) {
        if (!(buf = read_or_say(o.baseline, "baseline", &len))) {
            eval_set_free(&set);
            return 2;
        }
        st = eval_results_parse(buf, len, &base, &err);
        free(buf);
        if (st) {
            fprintf(stderr, "kvik eval: %s: %s\n", o.baseline, err.msg);
            eval_set_free(&set);
            return st == KVIK_ERR_FORMAT ? 2 : 1;
        }
    }

    char pathbuf[4096];
    const char *path = NULL;
    struct gen g = {0};
    struct chat_format fmt = {0};
    bool have_fmt = false;
    struct scorer sc = {0};
    struct outcome *res = calloc((size_t)set.n, sizeof *res);
    int32_t **ids = calloc((size_t)set.n, sizeof *ids);
    int64_t *n_ids = calloc((size_t)set.n, sizeof *n_ids);
    struct tallies ts = {0};
    int32_t *opt_ids = NULL;
    struct eval_url *url = NULL;
    char url_label[4096];
    rc = 1;
    if (!res || !ids || !n_ids) goto nomem;
    if (o.url) { /* every case against the server */
        if (!(url = eval_url_new(o.url, o.api_key, o.model_name, &err))) goto fail;
        snprintf(url_label, sizeof url_label, "%s (model %s)", o.url, eval_url_model(url));
        path = url_label;
        fprintf(stderr, "kvik eval: %d cases from %s against %s\n", set.n, o.tasks, url_label);
        bool said_no_echo = false;
        for (int i = 0; i < set.n; i++) {
            if (url_case(url, &set.cases[i], &res[i], &said_no_echo, &err)) goto fail;
            print_outcome(&set.cases[i], &res[i]);
        }
        goto report;
    }
    if (!gen_opts_check(&o.g, "eval", pathbuf, sizeof pathbuf, &path)) {
        rc = 2;
        goto done;
    }
    if (!path || !cli_model_exists(path, o.g.model, "eval")) goto done;
    if (gen_load(&g, path, &o.g, &err)) goto fail;
    bool any_chat = false;
    for (int i = 0; i < set.n; i++) any_chat |= set.cases[i].prompt == NULL;
    if (any_chat) {
        if (gen_chat_format(g.model, o.g.chat_template, "eval", &fmt, &err)) goto fail;
        have_fmt = true;
    }

    /* every prompt's tokens, and the room the engine and the scorer need */
    int gen_ctx = 1, score_ctx = 0, opt_max = 0;
    for (int i = 0; i < set.n; i++) {
        const struct eval_case *c = &set.cases[i];
        if (encode_prompt(&g, &fmt, c, &ids[i], &n_ids[i], &err)) goto fail;
        int64_t need = n_ids[i];
        if (c->check == EVAL_CHECK_CHOICE) {
            for (int k = 0; k < c->options.n; k++) {
                int64_t m = tokenizer_encode(g.tok, c->options.s[k], strlen(c->options.s[k]), false, false, NULL, 0);
                if (n_ids[i] + m > need) need = n_ids[i] + m;
                if (m > opt_max && n_ids[i] + m <= g.n_ctx) opt_max = (int)m;
            }
        } else {
            need += c->max_tokens;
        }
        if (need > g.n_ctx) {
            res[i].why = "does not fit the context";
            continue;
        }
        if (c->check == EVAL_CHECK_CHOICE) score_ctx = need > score_ctx ? (int)need : score_ctx;
        else gen_ctx = need > gen_ctx ? (int)need : gen_ctx;
    }
    int n_gen_cases = 0;
    for (int i = 0; i < set.n; i++) n_gen_cases += generated(&set.cases[i], &res[i]);
    int n_seqs = n_gen_cases < o.parallel ? n_gen_cases : (int)o.parallel;
    if (n_seqs < 1) n_seqs = 1;
    int max_batch = gen_ctx < GEN_MAX_BATCH ? gen_ctx : GEN_MAX_BATCH;
    if (max_batch < n_seqs) max_batch = n_seqs;
    if (gen_start(&g, &o.g, n_seqs, gen_ctx, max_batch, false, &err)) goto fail;
    if (score_ctx && scorer_init(&sc, &g, &o, score_ctx, opt_max, &err)) goto fail;
    if (score_ctx && !(opt_ids = malloc(sizeof(int32_t) * (size_t)score_ctx))) goto nomem;
    fprintf(stderr, "kvik eval: %d cases from %s\n", set.n, o.tasks);

    /* the generated cases, n_seqs at a time, each finished in file order */
    for (int i = 0, next = 0, in_flight = 0; i < set.n; i++) {
        if (!generated(&set.cases[i], &res[i])) continue;
        for (; next < set.n && in_flight < n_seqs; next++) {
            if (!generated(&set.cases[next], &res[next])) continue;
            if (submit_case(&g, &set.cases[next], ids[next], (int)n_ids[next], &res[next], &err)) goto fail;
            in_flight++;
        }
        in_flight--;
        if (finish_case(&set.cases[i], &res[i], &err)) goto fail;
        print_outcome(&set.cases[i], &res[i]);
    }
    /* then the choice cases */
    for (int i = 0; i < set.n; i++) {
        const struct eval_case *c = &set.cases[i];
        struct outcome *r = &res[i];
        if (r->why || c->check != EVAL_CHECK_CHOICE) continue;
        if (!(r->scores = malloc(sizeof(double) * (size_t)c->options.n))) goto nomem;
        for (int k = 0; k < c->options.n; k++) {
            memcpy(opt_ids, ids[i], sizeof(int32_t) * (size_t)n_ids[i]);
            int64_t m = tokenizer_encode(g.tok, c->options.s[k], strlen(c->options.s[k]), false, false,
                                         opt_ids + n_ids[i], score_ctx - n_ids[i]);
            if (m <= 0) {
                r->scores[k] = -INFINITY;
                continue;
            }
            if (score_tokens(&sc, opt_ids, (int)n_ids[i], (int)(n_ids[i] + m), &r->scores[k], &err)) goto fail;
        }
        r->pass = eval_choice_pass(c, r->scores);
        print_outcome(c, r);
    }

report:
    if (tally(&ts, &set, res)) goto nomem;
    for (int j = 0; j < ts.n; j++)
        fprintf(stderr, "kvik eval: tag %-16s %3d/%-3d %5.1f%%\n", ts.t[j].tag, ts.t[j].pass, ts.t[j].total,
                eval_rate(&ts.t[j]));
    fprintf(stderr, "kvik eval: overall %d/%d = %.1f%%\n", ts.all.pass, ts.all.total, eval_rate(&ts.all));
    if (o.out) {
        FILE *f = fopen(o.out, "w");
        if (!f) {
            err_set(&err, KVIK_ERR_IO, "cannot write %s: %s", o.out, strerror(errno));
            goto fail;
        }
        write_results(f, path, o.tasks, &set, res, &ts);
        if (fclose(f)) {
            err_set(&err, KVIK_ERR_IO, "cannot write %s: %s", o.out, strerror(errno));
            goto fail;
        }
    }
    if (o.json) write_results(stdout, path, o.tasks, &set, res, &ts);
    rc = 0;
    if (o.baseline && !gate(&base, &set, res, &ts, o.max_drop)) {
        fprintf(stderr, "kvik eval: the gate failed against %s (--max-drop %.1f)\n", o.baseline, o.max_drop);
        rc = 1;
    }
    goto done;
nomem:
    err_set(&err, KVIK_ERR_NOMEM, "out of memory");
fail:
    fprintf(stderr, "kvik eval: %s\n", err.msg);
    rc = 1;
done:
    free(opt_ids);
    eval_url_free(url);
    free(ts.t);
    for (int i = 0; res && i < set.n; i++) { /* jobs still running when the run failed */
        struct kvik_err e2 = {0};
        if (res[i].job) finish_case(&set.cases[i], &res[i], &e2);
        free(res[i].reply), free(res[i].scores);
    }
    for (int i = 0; ids && i < set.n; i++) free(ids[i]);
    free(res), free(ids), free(n_ids);
    scorer_free(&sc);
    if (have_fmt) chat_format_free(&fmt);
    gen_free(&g);
    eval_results_free(&base);
    eval_set_free(&set);
    return rc;
}
