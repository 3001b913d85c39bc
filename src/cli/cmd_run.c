/*
 * cmd_run.c — `kvik run`: generate text from a prompt with a model.
 *
 * The prompt is tokenized, prefilled in batches of up to PREFILL_BATCH
 * tokens (matrix-matrix products), then tokens are sampled one at a time
 * (mat-vec) and streamed to stdout through the UTF-8-safe detokenizer.
 * Statistics go to stderr; --json prints one object instead of streaming.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

enum { PREFILL_BATCH = 512 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik run [-m MODEL] (-p TEXT | -f FILE) [options]\n"
            "  -m PATH        model (default: $KVIK_MODEL, else the default model in the cache)\n"
            "  -p TEXT        prompt\n"
            "  -f FILE        read the prompt from FILE\n"
            "  -n N           tokens to generate (default 128)\n"
            "  -t N           threads (default: all CPUs)\n"
            "  -c N           context size (default: the model's, at most 4096)\n"
            "  --temp X       temperature (default 0.8; 0: greedy)\n"
            "  --top-k N      (default 40; 0: off)\n"
            "  --top-p X      (default 0.95)\n"
            "  --min-p X      (default 0.05)\n"
            "  --repeat-penalty X  (default 1.0: off)\n"
            "  -s SEED        random seed (default: from the clock)\n"
            "  --chat         wrap the prompt as a user turn in the model's chat template\n"
            "  --chat-template NAME  chatml, llama3, gemma, mistral or phi3 (implies --chat)\n"
            "  --json         print one JSON object (text, token ids, timings) instead of streaming\n");
}

struct run_opts {
    const char *model, *prompt, *prompt_file, *chat_template;
    long n_gen, threads, n_ctx;
    bool json, chat;
    struct sampler_params sp;
};

static int parse_args(int argc, char **argv, struct run_opts *o) {
    *o = (struct run_opts){.n_gen = 128, .threads = cpu_count(), .n_ctx = 0, .sp = sampler_params_default()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        } else if (!strcmp(a, "--chat")) {
            o->chat = true;
            continue;
        } else if (!v) {
            fprintf(stderr, "kvik run: unknown argument or missing value: '%s' (try kvik run --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--chat-template")) {
            o->chat_template = v;
            o->chat = true;
        } else if (!strcmp(a, "-m")) o->model = v;
        else if (!strcmp(a, "-p")) o->prompt = v;
        else if (!strcmp(a, "-f")) o->prompt_file = v;
        else if (!strcmp(a, "-n")) ok = cli_parse_long(v, 0, 1 << 24, &o->n_gen);
        else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &o->threads);
        else if (!strcmp(a, "-c")) ok = cli_parse_long(v, 1, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "--temp")) ok = cli_parse_float(v, -1e9f, 1e9f, &o->sp.temp);
        else if (!strcmp(a, "--top-k")) ok = cli_parse_long(v, 0, 1 << 30, &l) && ((o->sp.top_k = (int32_t)l), 1);
        else if (!strcmp(a, "--top-p")) ok = cli_parse_float(v, 0, 1, &o->sp.top_p);
        else if (!strcmp(a, "--min-p")) ok = cli_parse_float(v, 0, 1, &o->sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) ok = cli_parse_float(v, 0, 1e9f, &o->sp.repeat_penalty);
        else if (!strcmp(a, "-s")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            ok = *v && !*end && !errno;
            o->sp.seed = s;
        } else {
            fprintf(stderr, "kvik run: unknown argument '%s' (try kvik run --help)\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "kvik run: bad value '%s' for %s\n", v, a);
            return 2;
        }
        i++;
    }
    if (!o->prompt == !o->prompt_file) {
        fprintf(stderr, "kvik run: give exactly one of -p TEXT or -f FILE\n");
        return 2;
    }
    return -1;
}

/* The prompt as one user turn of the model's chat template (or the one
 * --chat-template names), with the generation prompt; *out is malloc'd. */
static kvik_status render_chat(const struct model *m, const struct run_opts *o, const char *prompt,
                               size_t prompt_len, char **out, struct kvik_err *err) {
    struct chat_format fmt = {0};
    kvik_status st;
    if (o->chat_template) {
        if ((st = chat_template_from_name(o->chat_template, &fmt.tmpl, err))) return st;
    } else {
        struct gguf_str t;
        if (gguf_get_str(m->file, "tokenizer.chat_template", &t, NULL) != KVIK_OK)
            return err_set(err, KVIK_ERR_UNSUPPORTED, "the model has no chat template; name one with --chat-template");
        char *text = malloc(t.len + 1);
        if (!text) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
        memcpy(text, t.ptr, t.len);
        text[t.len] = 0;
        st = chat_detect(text, &fmt, err);
        free(text);
        if (st) return st;
        if (fmt.approximate)
            fprintf(stderr, "kvik run: warning: the model's %s template does more than kvik renders\n",
                    chat_template_name(fmt.tmpl));
    }
    char *content = malloc(prompt_len + 1);
    if (!content) {
        chat_format_free(&fmt);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    memcpy(content, prompt, prompt_len);
    content[prompt_len] = 0;
    struct chat_msg msg = {.role = "user", .content = content};
    size_t needed = 0;
    st = chat_format_apply(&fmt, &msg, 1, true, NULL, 0, &needed, err);
    if (!st && !(*out = malloc(needed + 1))) st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
    if (!st) st = chat_format_apply(&fmt, &msg, 1, true, *out, needed + 1, &needed, err);
    free(content);
    chat_format_free(&fmt);
    return st;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    struct kvik_err err = {0};
    if (sampler_params_validate(&o.sp, &err)) {
        fprintf(stderr, "kvik run: %s\n", err.msg);
        return 2;
    }
    char pathbuf[4096];
    const char *path = cli_resolve_model(o.model, pathbuf, sizeof pathbuf);
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

    struct model *m = NULL;
    struct tokenizer *tok = NULL;
    struct model_ctx *ctx = NULL;
    struct sampler *smp = NULL;
    struct kv_flat kv = {0};
    int32_t *ids = NULL;
    float *logits = NULL;
    char *text = NULL, *chat_text = NULL;
    size_t text_len = 0, text_cap = 0;
    rc = 1;
    if (!cli_model_exists(path, o.model, "run")) goto done;
    int64_t t_load = clock_ns();
    if (model_load(path, &m, &err) || tokenizer_load(m->file, &tok, &err)) goto fail;
    bool parse_special = false;
    if (o.chat) {
        if (render_chat(m, &o, prompt, prompt_len, &chat_text, &err)) goto fail;
        prompt = chat_text;
        prompt_len = strlen(chat_text);
        parse_special = true; /* the template's markers are special tokens */
    }
    const struct model_hparams *hp = &m->hp;
    int n_ctx = (int)(o.n_ctx ? o.n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096));
    int64_t n_prompt = tokenizer_encode(tok, prompt, prompt_len, true, parse_special, NULL, 0);
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
    int64_t n_total = n_prompt + o.n_gen < n_ctx ? n_prompt + o.n_gen : n_ctx;
    ids = malloc(sizeof(int32_t) * (size_t)n_total);
    logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    if (!ids || !logits) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tokenizer_encode(tok, prompt, prompt_len, true, parse_special, ids, n_prompt);
    int max_batch = n_prompt < PREFILL_BATCH ? (int)n_prompt : PREFILL_BATCH;
    if (!(ctx = model_ctx_new(m, (int)o.threads, max_batch, n_ctx, &err))) goto fail;
    if (kv_flat_init(&kv, hp->n_layer, 1, n_ctx, hp->n_head_kv * hp->head_dim, &err)) goto fail;
    if (!(smp = sampler_new(&o.sp, hp->n_vocab, &err))) goto fail;
    for (int64_t i = 0; i < n_prompt; i++) sampler_accept(smp, ids[i]);
    t_load = clock_ns() - t_load;

    /* prefill */
    int32_t pos[PREFILL_BATCH], seq[PREFILL_BATCH] = {0};
    int64_t t0 = clock_ns();
    for (int64_t start = 0; start < n_prompt; start += max_batch) {
        int nb = (int)(n_prompt - start < max_batch ? n_prompt - start : max_batch);
        for (int i = 0; i < nb; i++) pos[i] = (int32_t)(start + i);
        struct model_batch b = {.n = nb, .tokens = ids + start, .pos = pos, .seq = seq};
        if (model_forward(ctx, &kv.base, &b, logits, &err)) goto fail;
    }
    int64_t t_prefill = clock_ns() - t0;

    /* decode */
    struct detok_stream ds;
    detok_init(&ds, tok, false);
    size_t piece_cap = detok_min_cap(tok);
    char *piece = malloc(piece_cap);
    if (!piece) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int64_t n = n_prompt, t_first = 0;
    int64_t t1 = clock_ns();
    while (n < n_total) {
        int32_t next = sampler_sample(smp, logits);
        if (n == n_prompt) t_first = clock_ns() - t0;
        sampler_accept(smp, next);
        ids[n++] = next;
        if (tokenizer_is_eog(tok, next)) break;
        int64_t k = detok_push(&ds, next, piece, piece_cap);
        if (k > 0) {
            if (o.json) {
                if (text_len + (size_t)k > text_cap) {
                    size_t nc = (text_cap ? text_cap * 2 : 4096) + (size_t)k;
                    char *nt = realloc(text, nc);
                    if (!nt) break;
                    text = nt, text_cap = nc;
                }
                memcpy(text + text_len, piece, (size_t)k);
                text_len += (size_t)k;
            } else {
                fwrite(piece, 1, (size_t)k, stdout);
                fflush(stdout);
            }
        }
        if (n >= n_total) break;
        int32_t p = (int32_t)(n - 1), s = 0;
        struct model_batch b = {.n = 1, .tokens = &ids[n - 1], .pos = &p, .seq = &s};
        if (model_forward(ctx, &kv.base, &b, logits, &err)) {
            free(piece);
            goto fail;
        }
    }
    int64_t k = detok_flush(&ds, piece, piece_cap);
    if (k > 0 && !o.json) fwrite(piece, 1, (size_t)k, stdout);
    if (k > 0 && o.json && text_len + (size_t)k <= text_cap) memcpy(text + text_len, piece, (size_t)k), text_len += (size_t)k;
    free(piece);
    int64_t t_decode = clock_ns() - t1;
    int64_t n_gen = n - n_prompt;
    double decode_s = (double)t_decode * 1e-9, prefill_s = (double)t_prefill * 1e-9;
    /* tokens after the first are the ones decode produced */
    double tg = n_gen > 1 ? (double)(n_gen - 1) / decode_s : 0;
    double gbs = tg * (double)model_decode_bytes(m) / 1e9;
    if (o.json) {
        printf("{\"model\":");
        cli_json_str(stdout, path, strlen(path));
        printf(",\"text\":");
        cli_json_str(stdout, text ? text : "", text_len);
        printf(",\"prompt_ids\":");
        cli_json_ids(stdout, ids, n_prompt);
        printf(",\"generated_ids\":");
        cli_json_ids(stdout, ids + n_prompt, n_gen);
        printf(",\"timings\":{\"load_s\":%.4f,\"prompt_tokens\":%lld,\"prefill_s\":%.4f,\"prefill_tok_s\":%.2f,"
               "\"ttft_s\":%.4f,\"generated_tokens\":%lld,\"decode_s\":%.4f,\"decode_tok_s\":%.2f,"
               "\"ms_per_token\":%.3f,\"weights_gbs\":%.2f,\"peak_rss_bytes\":%llu}}\n",
               (double)t_load * 1e-9, (long long)n_prompt, prefill_s, (double)n_prompt / prefill_s,
               (double)t_first * 1e-9, (long long)n_gen, decode_s, tg, tg > 0 ? 1e3 / tg : 0, gbs,
               (unsigned long long)mem_peak_rss());
    } else {
        printf("\n");
        fprintf(stderr,
                "\nkvik: prompt %lld tokens, prefill %.1f tok/s, time to first token %.1f ms\n"
                "kvik: generated %lld tokens, decode %.2f tok/s (%.2f ms/token), weights read %.2f GB/s, "
                "peak RSS %.1f MiB, %ld threads, %s\n",
                (long long)n_prompt, (double)n_prompt / prefill_s, (double)t_first * 1e-6, (long long)n_gen, tg,
                tg > 0 ? 1e3 / tg : 0, gbs, (double)mem_peak_rss() / (1 << 20), o.threads, kvik_cpu_isa());
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kvik run: %s\n", err.msg);
done:
    free(text);
    free(chat_text);
    free(ids);
    free(logits);
    sampler_free(smp);
    kv_flat_free(&kv);
    model_ctx_free(ctx);
    tokenizer_free(tok);
    model_free(m);
    free(prompt_owned);
    return rc;
}
