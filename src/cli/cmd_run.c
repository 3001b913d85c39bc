/*
 * cmd_run.c — `kvik run`: generate text from a prompt with a model.
 *
 * The prompt is tokenized and submitted to the serving engine as one
 * request (gen.c), as `kvik serve` submits its requests: the engine
 * prefills it in forward passes of up to GEN_MAX_BATCH tokens
 * (matrix-matrix products), then decodes one token a step (mat-vec, or a
 * draft verified in one pass with --spec), and the text streams to stdout
 * through the UTF-8-safe detokenizer. Statistics go to stderr; --json
 * prints one object instead of streaming.
 *
 * Timings: prefill is submit to the first token (the prompt's forward
 * passes and the first sample), decode is the first token to the end,
 * which produced the tokens after the first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/gen.h"
#include "tools/bench.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik run [-m MODEL] (-p TEXT | -f FILE) [options]\n"
            "  -m PATH        model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -p TEXT        prompt\n"
            "  -f FILE        read the prompt from FILE\n"
            "  -n N           tokens to generate (default 128)\n" GEN_USAGE_OPTIONS GEN_USAGE_SPEC
            "  --chat         wrap the prompt as a user turn in the model's chat template\n"
            "  --chat-template NAME  chatml, llama3, gemma, mistral or phi3 (implies --chat)\n"
            "  --json         print one JSON object (text, token ids, timings) instead of streaming\n");
}

struct run_opts {
    struct gen_opts g;
    const char *prompt, *prompt_file;
    bool json, chat;
};

static int run_opt(void *p, const char *a, const char *v) {
    struct run_opts *o = p;
    if (!strcmp(a, "--json")) return o->json = true, GEN_OPT_FLAG;
    if (!strcmp(a, "--chat")) return o->chat = true, GEN_OPT_FLAG;
    if (!v) return 0;
    if (!strcmp(a, "-p")) return o->prompt = v, GEN_OPT_VALUE;
    if (!strcmp(a, "-f")) return o->prompt_file = v, GEN_OPT_VALUE;
    return 0;
}

static int parse_args(int argc, char **argv, struct run_opts *o) {
    *o = (struct run_opts){.g = gen_opts_default(ENGINE_DEFAULT_MAX_TOKENS)};
    int rc = gen_parse_args(argc, argv, "run", &o->g, run_opt, o, usage);
    if (rc >= 0) return rc;
    if (o->g.chat_template) o->chat = true;
    if (!o->prompt == !o->prompt_file) {
        fprintf(stderr, "kvik run: give exactly one of -p TEXT or -f FILE\n");
        return 2;
    }
    return -1;
}

/* The prompt as one user turn of the model's chat template (or the one
 * --chat-template names), with the generation prompt, tokenized (the
 * template's markers as special tokens, the prompt as plain text); *ids
 * is malloc'd. */
static kvik_status encode_chat(const struct gen *g, const struct run_opts *o, const char *prompt,
                               size_t prompt_len, int32_t **ids, int64_t *n_ids, struct kvik_err *err) {
    struct chat_format fmt;
    kvik_status st = gen_chat_format(g->model, o->g.chat_template, "run", &fmt, err);
    if (st) return st;
    char *content = malloc(prompt_len + 1);
    if (!content) {
        chat_format_free(&fmt);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    memcpy(content, prompt, prompt_len);
    content[prompt_len] = 0;
    struct chat_msg msg = {.role = "user", .content = content};
    size_t n = 0;
    st = chat_encode(&fmt, g->tok, &msg, 1, true, ids, &n, err);
    *n_ids = (int64_t)n;
    free(content);
    chat_format_free(&fmt);
    return st;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    char pathbuf[4096];
    const char *path;
    if (!gen_opts_check(&o.g, "run", pathbuf, sizeof pathbuf, &path)) return 2;
    if (!path) return 1; /* cli_resolve_model said why */
    size_t prompt_len = 0;
    char *prompt_owned = NULL;
    const char *prompt = o.prompt;
    if (o.prompt_file) {
        if (!(prompt_owned = cli_read_file(o.prompt_file, &prompt_len))) {
            fprintf(stderr, "kvik run: cannot read prompt file '%s': %s\n", o.prompt_file, strerror(errno));
            return 1;
        }
        prompt = prompt_owned;
    } else {
        prompt_len = strlen(prompt);
    }

    struct kvik_err err = {0};
    struct gen g = {0};
    struct gen_text text = {0};
    int32_t *ids = NULL;
    rc = 1;
    if (!cli_model_exists(path, o.g.model, "run")) goto done;
    int64_t t_load = clock_ns();
    if (gen_load(&g, path, &o.g, &err)) goto fail;
    int n_ctx = g.n_ctx;
    int64_t n_prompt = 0;
    if (o.chat) {
        if (encode_chat(&g, &o, prompt, prompt_len, &ids, &n_prompt, &err)) goto fail;
    } else {
        n_prompt = tokenizer_encode(g.tok, prompt, prompt_len, true, false, NULL, 0);
    }
    if (n_prompt < 0) {
        err_set(&err, (kvik_status)n_prompt, "cannot tokenize the prompt");
        goto fail;
    }
    if (n_prompt == 0) {
        err_set(&err, KVIK_ERR_INVALID_ARG, "the prompt is empty");
        goto fail;
    }
    if (n_prompt >= n_ctx) {
        err_set(&err, KVIK_ERR_INVALID_ARG, "prompt of %lld tokens does not fit the context of %d (-c)",
                (long long)n_prompt, n_ctx);
        goto fail;
    }
    int max_tokens = (int)(n_prompt + o.g.n_gen < n_ctx ? o.g.n_gen : n_ctx - n_prompt);
    int32_t *grown = realloc(ids, sizeof(int32_t) * (size_t)(n_prompt + max_tokens));
    if (!grown) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    ids = grown;
    if (!o.chat) tokenizer_encode(g.tok, prompt, prompt_len, true, false, ids, n_prompt);
    int max_batch = n_prompt < GEN_MAX_BATCH ? (int)n_prompt : GEN_MAX_BATCH;
    if (max_batch < o.g.spec_max + 1) max_batch = (int)o.g.spec_max + 1; /* a draft and the token before it */
    /* the pool holds this request's positions, not the whole context */
    if (gen_start(&g, &o.g, 1, (int)n_prompt + (max_tokens > 0 ? max_tokens : 1), max_batch, false, &err)) goto fail;
    t_load = clock_ns() - t_load;

    struct gen_result res;
    if (gen_generate(&g, ids, (int)n_prompt, max_tokens, &o.g.sp, 0, ids + n_prompt, o.json ? NULL : stdout,
                     o.json ? &text : NULL, &res, &err))
        goto fail;
    engine_drain(g.engine, clock_ns()); /* nothing is left: the statistics are complete */
    struct engine_stats est;
    engine_stats(g.engine, &est);
    int64_t n_gen = res.n_gen;
    int64_t t_first = res.t_first ? res.t_first - res.t_submit : 0;
    double prefill_s = (double)t_first * 1e-9;
    double decode_s = res.t_first ? (double)(res.t_end - res.t_first) * 1e-9 : 0;
    /* tokens after the first are the ones decode produced */
    double tg = n_gen > 1 && decode_s > 0 ? (double)(n_gen - 1) / decode_s : 0;
    double pp = prefill_s > 0 ? (double)n_prompt / prefill_s : 0; /* 0 when no token came */
    double gbs = tg * (double)model_decode_bytes(g.model) / 1e9;
    /* the machine's read bandwidth as `kvik bench kernels` last measured it */
    int64_t bw_when = 0;
    double bw = bench_bandwidth_recall((int)o.g.threads, &bw_when);
    char bw_text[160];
    if (bw > 0)
        snprintf(bw_text, sizeof bw_text, " = %.0f%% of the %.1f GB/s read bandwidth measured %.1f days ago", 100 * gbs / bw,
                 bw, (double)(time(NULL) - bw_when) / 86400.0);
    else
        snprintf(bw_text, sizeof bw_text, " (kvik bench kernels -t %ld measures the read bandwidth to compare with)",
                 o.g.threads);
    /* verification steps: the engine's steps after the prompt's */
    int64_t prefill_steps = (n_prompt + max_batch - 1) / max_batch;
    int64_t spec_steps = g.spec && (int64_t)est.steps > prefill_steps ? (int64_t)est.steps - prefill_steps : 0;
    double acc = est.spec_draft_tokens ? (double)est.spec_accepted / (double)est.spec_draft_tokens : 0;
    if (o.json) {
        printf("{\"model\":");
        cli_json_str(stdout, path, strlen(path));
        printf(",\"text\":");
        cli_json_str(stdout, text.buf ? text.buf : "", text.len);
        printf(",\"prompt_ids\":");
        cli_json_ids(stdout, ids, n_prompt);
        printf(",\"generated_ids\":");
        cli_json_ids(stdout, ids + n_prompt, n_gen);
        printf(",\"timings\":{\"load_s\":%.4f,\"prompt_tokens\":%lld,\"prefill_s\":%.4f,\"prefill_tok_s\":%.2f,"
               "\"ttft_s\":%.4f,\"generated_tokens\":%lld,\"decode_s\":%.4f,\"decode_tok_s\":%.2f,"
               "\"ms_per_token\":%.3f,\"weights_gbs\":%.2f,\"read_bandwidth_gbs\":%.2f,\"pct_read_bandwidth\":%.1f,"
               "\"peak_rss_bytes\":%llu,\"spec_steps\":%lld,\"spec_drafts\":%lld,\"spec_lookup_drafts\":%lld,"
               "\"spec_draft_tokens\":%lld,"
               "\"spec_accepted_tokens\":%lld,\"spec_acceptance\":%.4f}}\n",
               (double)t_load * 1e-9, (long long)n_prompt, prefill_s, pp,
               (double)t_first * 1e-9, (long long)n_gen, decode_s, tg, tg > 0 ? 1e3 / tg : 0, gbs, bw,
               bw > 0 ? 100 * gbs / bw : 0, (unsigned long long)mem_peak_rss(), (long long)spec_steps,
               (long long)est.spec_drafts, (long long)est.spec_lookup_drafts, (long long)est.spec_draft_tokens,
               (long long)est.spec_accepted, acc);
    } else {
        printf("\n");
        fprintf(stderr,
                "\nkvik: prompt %lld tokens, prefill %.1f tok/s, time to first token %.1f ms\n"
                "kvik: generated %lld tokens, decode %.2f tok/s (%.2f ms/token), weights read %.2f GB/s%s\n"
                "kvik: peak RSS %.1f MiB, %ld threads, %s\n",
                (long long)n_prompt, pp, (double)t_first * 1e-6, (long long)n_gen, tg,
                tg > 0 ? 1e3 / tg : 0, gbs, bw_text, (double)mem_peak_rss() / (1 << 20), o.g.threads, kvik_cpu_isa());
        if (g.spec)
            fprintf(stderr,
                    "kvik: speculative: %lld verification steps, %lld drafts (%lld by prompt lookup) of %lld tokens, "
                    "%lld accepted (%.1f%%)\n",
                    (long long)spec_steps, (long long)est.spec_drafts, (long long)est.spec_lookup_drafts,
                    (long long)est.spec_draft_tokens,
                    (long long)est.spec_accepted, 100 * acc);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kvik run: %s\n", err.msg);
done:
    free(text.buf);
    free(ids);
    gen_free(&g);
    free(prompt_owned);
    return rc;
}
