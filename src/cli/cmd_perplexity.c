/*
 * cmd_perplexity.c — `kvik perplexity`: a model's perplexity over a text,
 * scored as llama-perplexity scores it (tools/ppl.h says what is scored),
 * and the KL divergence of one model (or KV-cache type) against another's
 * saved log-probabilities.
 *
 *   kvik perplexity -m M -f TEXT [-c 512] [--kl-divergence-base FILE]
 *   kvik perplexity -m M [-f TEXT] --kl-divergence FILE
 *
 * The text is tokenized whole (one trailing newline dropped, as
 * llama-perplexity reads -f; BOS in front where the vocabulary adds it;
 * special-token text is plain text) and needs at least 2 * n_ctx tokens.
 * Each chunk is one sequence in a flat KV cache, run through the model in
 * batches of -b tokens from position 0; its scored rows are scored on -t
 * threads. Progress goes to stderr, one line per chunk; the result to
 * stdout (one JSON object with --json).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/ppl.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik perplexity [-m MODEL] -f TEXT [-c N] [-b N] [-t N] [--chunks N] [--kv-type T] [--json]\n"
            "                       [--kl-divergence-base FILE [--kl-top-k N] | --kl-divergence FILE]\n"
            "  -m PATH     model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -f FILE     the text (one trailing newline dropped); at least 2 * N tokens of it\n"
            "  -c N        tokens per chunk (default 512); the second half of each chunk is scored\n"
            "  -b N        tokens per forward pass (default min(512, N))\n"
            "  -t N        threads (default: all CPUs)\n"
            "  --chunks N  score at most N chunks (default: all the text fills)\n"
            "  --kv-type T K/V cache rows: f32 (default), f16 or q8_0\n"
            "  --json      one JSON object on stdout\n"
            "  --kl-divergence-base FILE  also save the model's log-probabilities of the scored tokens\n"
            "              (the top --kl-top-k ids of each, default 256, and the rest's mass) to FILE\n"
            "  --kl-divergence FILE  score against FILE's log-probabilities (of a base model, run with\n"
            "              the same -c over the same tokens; -f, if given, must tokenize to them):\n"
            "              KL divergence, same top token, the change of p(the token) (dp), both PPLs\n");
}

struct opts {
    const char *model, *text, *base_out, *base_in;
    long n_ctx, n_batch, threads, chunks, top_k;
    int kv_type;
};

static enum cli_flag opt_flag(void *user, const char *a, const char *v) {
    struct opts *o = user;
    bool ok = true;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "-f")) o->text = v;
    else if (!strcmp(a, "--kl-divergence-base")) o->base_out = v;
    else if (!strcmp(a, "--kl-divergence")) o->base_in = v;
    else if (!strcmp(a, "-c")) ok = cli_parse_long(v, PPL_MIN_CTX, 1 << 20, &o->n_ctx);
    else if (!strcmp(a, "-b")) ok = cli_parse_long(v, 1, 1 << 20, &o->n_batch);
    else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &o->threads);
    else if (!strcmp(a, "--chunks")) ok = cli_parse_long(v, 1, 1 << 24, &o->chunks);
    else if (!strcmp(a, "--kl-top-k")) ok = cli_parse_long(v, 1, PPL_TOPK_MAX, &o->top_k);
    else if (!strcmp(a, "--kv-type")) {
        if (!strcmp(v, "f32")) o->kv_type = TENSOR_TYPE_F32;
        else if (!strcmp(v, "f16")) o->kv_type = TENSOR_TYPE_F16;
        else if (!strcmp(v, "q8_0")) o->kv_type = TENSOR_TYPE_Q8_0;
        else ok = false;
    } else return CLI_FLAG_UNKNOWN;
    return ok ? CLI_FLAG_OK : CLI_FLAG_BAD_VALUE;
}

static const char *kv_name(int type) {
    return type == TENSOR_TYPE_F16 ? "f16" : type == TENSOR_TYPE_Q8_0 ? "q8_0" : "f32";
}

static void print_json(const char *path, const struct opts *o, int n_ctx, int n_chunk, int64_t n_tokens,
                       const struct ppl_stats *st, double secs, const struct ppl_kld_summary *k, int top_k) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("{\"model\":");
    cli_json_str(stdout, base, strlen(base));
    printf(",\"n_ctx\":%d,\"n_chunks\":%d,\"n_tokens\":%lld,\"n_scored\":%lld,\"kv_type\":\"%s\",\"ppl\":%.6f,"
           "\"ppl_err\":%.6f,\"seconds\":%.3f",
           n_ctx, n_chunk, (long long)n_tokens, (long long)st->count, kv_name(o->kv_type),
           ppl_stats_ppl(st), ppl_stats_err(st), secs);
    if (k)
        printf(",\"top_k\":%d,\"ppl_base\":%.6f,\"ppl_base_err\":%.6f,\"ppl_ratio\":%.6f,\"ln_ppl_ratio\":%.8f,"
               "\"ln_ppl_ratio_err\":%.8f,\"kld_mean\":%.8g,\"kld_err\":%.8g,\"kld_median\":%.8g,\"kld_p99\":%.8g,"
               "\"kld_max\":%.8g,\"same_top_p\":%.6f,\"dp_mean\":%.8g,\"dp_rms\":%.8g,\"dp_p1\":%.8g,\"dp_p99\":%.8g,"
               "\"dp_max\":%.8g",
               top_k, k->ppl_base, k->ppl_base_err, exp(k->ln_ratio), k->ln_ratio, k->ln_ratio_err, k->kld_mean,
               k->kld_err, k->kld_median, k->kld_p99, k->kld_max, k->same_top, k->dp_mean, k->dp_rms, k->dp_p1,
               k->dp_p99, k->dp_max);
    printf("}\n");
}

static void print_kld(const struct ppl_kld_summary *k, int top_k) {
    printf("PPL(model)              : %10.6f +/- %.6f\n", k->ppl, k->ppl_err);
    printf("PPL(base)               : %10.6f +/- %.6f\n", k->ppl_base, k->ppl_base_err);
    printf("PPL(model)/PPL(base)    : %10.6f (ln %.6f +/- %.6f)\n", exp(k->ln_ratio), k->ln_ratio, k->ln_ratio_err);
    printf("KL divergence (top %d + rest): mean %.6f +/- %.6f, median %.6f, 99%% %.6f, max %.6f\n", top_k,
           k->kld_mean, k->kld_err, k->kld_median, k->kld_p99, k->kld_max);
    printf("dp = p - p(base) of the token: mean %.3f%%, RMS %.3f%%, 1%% %.3f%%, 99%% %.3f%%, max |dp| %.3f%%\n",
           100 * k->dp_mean, 100 * k->dp_rms, 100 * k->dp_p1, 100 * k->dp_p99, 100 * k->dp_max);
    printf("Same top token          : %.3f%% of %lld\n", 100 * k->same_top, (long long)k->count);
}

int cmd_perplexity(int argc, char **argv) {
    struct opts o = {.threads = cpu_count(), .kv_type = TENSOR_TYPE_F32, .top_k = PPL_TOPK_DEFAULT};
    bool json = false;
    int st = cli_parse_flags(argc, argv, 1, "perplexity", usage, &json, opt_flag, &o);
    if (st >= 0) return st;
    if (o.base_in && o.base_out) {
        fprintf(stderr, "kvik perplexity: --kl-divergence and --kl-divergence-base exclude each other\n");
        return 2;
    }
    if (!o.text && !o.base_in) {
        fprintf(stderr, "kvik perplexity: no text: -f FILE (try kvik perplexity --help)\n");
        return 2;
    }
    if (o.top_k != PPL_TOPK_DEFAULT && !o.base_out) {
        fprintf(stderr, "kvik perplexity: --kl-top-k goes with --kl-divergence-base\n");
        return 2;
    }

    struct kvik_err err = {0};
    struct model *m = NULL;
    struct tokenizer *tok = NULL;
    struct model_ctx *ctx = NULL;
    struct kv_flat kv = {0};
    struct pool *pool = NULL;
    struct mapped_file base_file = {0};
    struct ppl_base base = {0};
    int32_t *tokens = NULL, *ctok = NULL, *pos = NULL, *seq = NULL, *next = NULL;
    bool *mark = NULL;
    float *logits = NULL;
    struct ppl_row *rows = NULL;
    uint8_t *recs = NULL;
    FILE *out = NULL;
    int rc = 1;

    /* the base file first: a bad one is reported before a model loads */
    if (o.base_in) {
        if (file_map(&base_file, o.base_in, &err)) goto fail;
        kvik_status s = ppl_base_parse(base_file.data, base_file.size, &base, &err);
        if (s) {
            struct kvik_err e2 = err;
            err_set(&err, s, "%s: %s", o.base_in, e2.msg);
            goto fail;
        }
    }
    char pathbuf[4096];
    const char *path = cli_resolve_model(o.model, pathbuf, sizeof pathbuf);
    if (!cli_model_exists(path, o.model, "perplexity")) goto done;
    if (model_load(path, &m, &err) || tokenizer_load(m->file, &tok, &err)) goto fail;
    const int n_vocab = m->hp.n_vocab;
    if (tokenizer_n_vocab(tok) > n_vocab) {
        err_set(&err, KVIK_ERR_FORMAT, "the vocabulary (%d) is larger than the output (%d)", tokenizer_n_vocab(tok), n_vocab);
        goto fail;
    }

    int n_ctx = o.n_ctx ? (int)o.n_ctx : 512;
    if (o.base_in) {
        if (base.n_vocab != n_vocab) {
            err_set(&err, KVIK_ERR_INVALID_ARG, "%s is of a vocabulary of %d tokens, the model's has %d", o.base_in,
                    base.n_vocab, n_vocab);
            goto fail;
        }
        if (o.n_ctx && o.n_ctx != base.n_ctx) {
            err_set(&err, KVIK_ERR_INVALID_ARG, "%s was scored with -c %d, not %ld", o.base_in, base.n_ctx, o.n_ctx);
            goto fail;
        }
        n_ctx = base.n_ctx;
    }
    int64_t n_tokens = 0;
    if (o.text && !(tokens = ppl_tokenize_file(tok, o.text, &n_tokens, &err))) goto fail;
    int n_chunk;
    if (o.base_in) {
        /* the base's tokens, and the text's must be the same */
        int64_t nb = (int64_t)base.n_chunk * n_ctx;
        if (tokens) {
            int64_t i = 0;
            while (i < nb && i < n_tokens && tokens[i] == ppl_base_token(&base, i)) i++;
            if (i < nb) {
                if (i < n_tokens)
                    err_set(&err, KVIK_ERR_INVALID_ARG, "the tokens of %s differ from those of %s (token %lld: %d, not %d)",
                            o.text, o.base_in, (long long)i, tokens[i], ppl_base_token(&base, i));
                else
                    err_set(&err, KVIK_ERR_INVALID_ARG, "%s gives %lld tokens, %s holds %lld", o.text, (long long)n_tokens,
                            o.base_in, (long long)nb);
                goto fail;
            }
            free(tokens);
        }
        if (!(tokens = malloc(sizeof(int32_t) * (size_t)nb))) goto nomem;
        for (int64_t i = 0; i < nb; i++) tokens[i] = ppl_base_token(&base, i); /* each < n_vocab */
        if (!o.text) n_tokens = nb;
        n_chunk = base.n_chunk;
    } else {
        if (n_tokens < 2 * (int64_t)n_ctx) {
            err_set(&err, KVIK_ERR_INVALID_ARG, "%s tokenizes to %lld tokens; a context of %d needs at least %lld", o.text,
                    (long long)n_tokens, n_ctx, 2 * (long long)n_ctx);
            goto fail;
        }
        n_chunk = (int)(n_tokens / n_ctx);
    }
    if (o.chunks && o.chunks < n_chunk) n_chunk = (int)o.chunks;
    if (n_ctx > m->hp.n_ctx_train)
        fprintf(stderr, "kvik perplexity: warning: the model was trained on %d tokens of context, -c is %d\n",
                m->hp.n_ctx_train, n_ctx);
    const bool add_bos = tokenizer_add_bos(tok);
    const int32_t bos = tokenizer_bos(tok);
    if (add_bos && (bos < 0 || bos >= n_vocab)) {
        err_set(&err, KVIK_ERR_FORMAT, "the vocabulary adds BOS but has no BOS id");
        goto fail;
    }
    const int first = ppl_first(n_ctx), n_scored = ppl_n_scored(n_ctx), n_eval = n_ctx - 1;
    const int top_k = o.base_in ? base.top_k : (int)(o.top_k < n_vocab ? o.top_k : n_vocab);
    int n_batch = o.n_batch ? (int)o.n_batch : 512;
    if (n_batch > n_eval) n_batch = n_eval;

    if (!(ctx = model_ctx_new(m, (int)o.threads, n_batch, n_ctx, &err))) goto fail;
    if (!kv_type_fits(o.kv_type, m->hp.n_head_kv * m->hp.head_dim, m->hp.head_dim)) {
        err_set(&err, KVIK_ERR_UNSUPPORTED, "--kv-type %s does not fit heads of %d", kv_name(o.kv_type),
                m->hp.head_dim);
        goto fail;
    }
    if (kv_flat_init(&kv, m->hp.n_layer, 1, n_ctx, m->hp.n_head_kv * m->hp.head_dim, o.kv_type, &err)) goto fail;
    if (!(pool = pool_create((int)o.threads, &err))) goto fail;
    size_t rb = ppl_record_bytes(top_k);
    ctok = malloc(sizeof(int32_t) * (size_t)n_ctx);
    pos = malloc(sizeof(int32_t) * (size_t)n_batch);
    seq = calloc((size_t)n_batch, sizeof(int32_t));
    mark = malloc((size_t)n_batch);
    next = malloc(sizeof(int32_t) * (size_t)n_scored);
    logits = malloc(sizeof(float) * (size_t)n_scored * (size_t)n_vocab);
    rows = malloc(sizeof(struct ppl_row) * (size_t)n_chunk * (size_t)n_scored);
    if (o.base_out) recs = malloc(rb * (size_t)n_scored);
    if (!ctok || !pos || !seq || !mark || !next || !logits || !rows || (o.base_out && !recs)) goto nomem;
    if (o.base_out) {
        if (!(out = fopen(o.base_out, "wb"))) {
            err_set(&err, KVIK_ERR_IO, "cannot write %s: %s", o.base_out, strerror(errno));
            goto fail;
        }
        if (ppl_base_write_header(out, n_ctx, n_vocab, n_chunk, top_k, tokens, &err)) goto fail;
    }

    if (!json)
        fprintf(stderr, "kvik perplexity: %lld tokens, %d chunks of %d, %d scored per chunk, %s K/V%s\n",
                (long long)n_tokens, n_chunk, n_ctx, n_scored, kv_name(o.kv_type),
                add_bos ? ", BOS first in each chunk" : "");
    struct ppl_stats stats = {0};
    int64_t t0 = clock_ns();
    for (int c = 0; c < n_chunk; c++) {
        int64_t tc = clock_ns();
        memcpy(ctok, tokens + (size_t)c * (size_t)n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (add_bos) ctok[0] = bos;
        for (int j = 0; j < n_scored; j++) next[j] = ctok[first + j + 1];
        /* positions 0 .. n_ctx - 2: the last token is only ever predicted */
        for (int start = 0; start < n_eval; start += n_batch) {
            int nb = n_eval - start < n_batch ? n_eval - start : n_batch;
            for (int i = 0; i < nb; i++) pos[i] = start + i, mark[i] = start + i >= first;
            int before = start - first < 0 ? 0 : start - first; /* rows of earlier batches */
            struct model_batch mb = {.n = nb, .tokens = ctok + start, .pos = pos, .seq = seq, .logits = mark};
            if (model_forward(ctx, &kv.base, &mb, logits + (size_t)before * (size_t)n_vocab, &err)) goto fail;
        }
        struct ppl_row *cr = rows + (size_t)c * (size_t)n_scored;
        ppl_score_rows(pool, logits, n_scored, n_vocab, next, top_k, recs,
                       o.base_in ? ppl_base_record(&base, c, 0) : NULL, cr);
        for (int j = 0; j < n_scored; j++) {
            if (!isfinite(cr[j].nll)) {
                err_set(&err, KVIK_ERR_FORMAT, "chunk %d: the model's logits at position %d are not finite", c + 1,
                        first + j);
                goto fail;
            }
            ppl_stats_add(&stats, cr[j].nll);
        }
        if (out && fwrite(recs, rb, (size_t)n_scored, out) != (size_t)n_scored) {
            err_set(&err, KVIK_ERR_IO, "cannot write %s: %s", o.base_out, strerror(errno));
            goto fail;
        }
        fprintf(stderr, "kvik perplexity: [%d/%d] %.4f (%.2f s)\n", c + 1, n_chunk, ppl_stats_ppl(&stats),
                (double)(clock_ns() - tc) * 1e-9);
    }
    double secs = (double)(clock_ns() - t0) * 1e-9;
    if (out) {
        int e = fclose(out);
        out = NULL;
        if (e) {
            err_set(&err, KVIK_ERR_IO, "cannot write %s: %s", o.base_out, strerror(errno));
            goto fail;
        }
    }
    fprintf(stderr, "kvik perplexity: %lld positions in %.2f s (%.1f tok/s, scoring included)\n",
            (long long)n_chunk * n_eval, secs, (double)n_chunk * n_eval / secs);

    struct ppl_kld_summary ks;
    if (o.base_in && ppl_kld_summarize(rows, stats.count, &ks, &err)) goto fail;
    if (json) {
        print_json(path, &o, n_ctx, n_chunk, n_tokens, &stats, secs, o.base_in ? &ks : NULL, top_k);
    } else {
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl_stats_ppl(&stats), ppl_stats_err(&stats));
        if (o.base_in) print_kld(&ks, top_k);
        if (o.base_out) printf("log-probabilities (top %d) saved to %s\n", top_k, o.base_out);
    }
    rc = 0;
    goto done;
nomem:
    err_set(&err, KVIK_ERR_NOMEM, "out of memory");
fail:
    fprintf(stderr, "kvik perplexity: %s\n", err.msg);
    if (out) {
        fclose(out);
        out = NULL;
        remove(o.base_out);
    }
done:
    if (out) fclose(out);
    free(tokens), free(ctok), free(pos), free(seq), free(mark), free(next), free(logits), free(rows), free(recs);
    pool_free(pool);
    kv_flat_free(&kv);
    model_ctx_free(ctx);
    tokenizer_free(tok);
    model_free(m);
    file_unmap(&base_file);
    return rc;
}
