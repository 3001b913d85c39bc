/*
 * cmd_imatrix.c — `kvik imatrix`: the importance matrix of a model over
 * calibration text, as llama-imatrix computes it (tools/imatrix.h says
 * what is collected), saved in llama.cpp's GGUF imatrix format.
 *
 *   kvik imatrix -m M -f TEXT [-o FILE.gguf] [-c 512] [--chunks N] [-t N]
 *
 * The text is tokenized as kvik perplexity and llama-imatrix read -f and
 * needs at least 2 * n_ctx tokens. Attention runs in F32 (KVIK_ATTN=f32)
 * unless KVIK_ATTN says otherwise. Progress goes to stderr, one line per
 * chunk; a summary line (one JSON object with --json) to stdout.
 */
#include <stdlib.h>

#include "cli/cli.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/imatrix.h"
#include "tools/ppl.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik imatrix [-m MODEL] -f TEXT [-o FILE] [-c N] [-b N] [--chunks N] [-t N]\n"
            "                    [--process-output] [--json]\n"
            "  -m PATH     model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -f FILE     the calibration text (one trailing newline dropped); at least 2 * N tokens\n"
            "  -o FILE     where the importance matrix goes (GGUF; default imatrix.gguf)\n"
            "  -c N        tokens per chunk (default 512, at least %d); every position counts\n"
            "  -b N        tokens per forward pass (default N of -c, at least %d)\n"
            "  --chunks N  at most N chunks (default: all the text fills)\n"
            "  -t N        threads (default: all CPUs)\n"
            "  --process-output  collect output.weight too (never a tied output, as llama-imatrix)\n"
            "  --json      the summary as one JSON object on stdout\n",
            IMATRIX_MIN_CTX, IMATRIX_MIN_CTX);
}

struct opts {
    const char *model, *text, *out;
    long n_ctx, n_batch, threads, chunks;
};

static enum cli_flag opt_flag(void *user, const char *a, const char *v) {
    struct opts *o = user;
    bool ok = true;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "-f")) o->text = v;
    else if (!strcmp(a, "-o")) o->out = v;
    else if (!strcmp(a, "-c")) ok = cli_parse_long(v, IMATRIX_MIN_CTX, 1 << 20, &o->n_ctx);
    else if (!strcmp(a, "-b")) ok = cli_parse_long(v, IMATRIX_MIN_CTX, 1 << 20, &o->n_batch);
    else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &o->threads);
    else if (!strcmp(a, "--chunks")) ok = cli_parse_long(v, 1, 1 << 24, &o->chunks);
    else return CLI_FLAG_UNKNOWN;
    return ok ? CLI_FLAG_OK : CLI_FLAG_BAD_VALUE;
}

static void progress(void *arg, int chunk, int n_chunk, double secs) {
    (void)arg;
    fprintf(stderr, "kvik imatrix: [%d/%d] %.2f s\n", chunk, n_chunk, secs);
}

int cmd_imatrix(int argc, char **argv) {
    /* attention in F32 unless asked otherwise: the kernel table's BF16
     * attention moves the sums of sharply attending heads by tens of
     * percent (docs/quality.md) */
    setenv("KVIK_ATTN", "f32", 0);
    struct opts o = {.threads = cpu_count(), .out = "imatrix.gguf", .n_ctx = 512};
    bool json = false, process_output = false;
    /* --process-output takes no value: taken out before the flag loop */
    char **args = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!args) {
        fprintf(stderr, "kvik imatrix: out of memory\n");
        return 1;
    }
    int n_args = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--process-output") && strcmp(argv[i - 1], "-f") &&
            strcmp(argv[i - 1], "-o") && strcmp(argv[i - 1], "-m"))
            process_output = true;
        else args[n_args++] = argv[i];
    }
    int st = cli_parse_flags(n_args, args, 1, "imatrix", usage, &json, opt_flag, &o);
    free(args);
    if (st >= 0) return st;
    if (!o.text) {
        fprintf(stderr, "kvik imatrix: no text: -f FILE (try kvik imatrix --help)\n");
        return 2;
    }
    if (o.n_batch > o.n_ctx) {
        fprintf(stderr, "kvik imatrix: -b %ld is larger than -c %ld\n", o.n_batch, o.n_ctx);
        return 2;
    }
    if (!*o.out) {
        fprintf(stderr, "kvik imatrix: -o needs a file name\n");
        return 2;
    }

    struct kvik_err err = {0};
    struct model *m = NULL;
    struct tokenizer *tok = NULL;
    struct model_ctx *ctx = NULL;
    struct imatrix im = {0};
    int32_t *tokens = NULL;
    int rc = 1;
    char pathbuf[4096];
    const char *path = cli_resolve_model(o.model, pathbuf, sizeof pathbuf);
    if (!cli_model_exists(path, o.model, "imatrix")) goto done;
    if (model_load(path, &m, &err) || tokenizer_load(m->file, &tok, &err)) goto fail;
    if (tokenizer_n_vocab(tok) > m->hp.n_vocab) {
        err_set(&err, KVIK_ERR_FORMAT, "the vocabulary (%d) is larger than the output (%d)", tokenizer_n_vocab(tok),
                m->hp.n_vocab);
        goto fail;
    }
    int64_t n_tokens = 0;
    if (!(tokens = ppl_tokenize_file(tok, o.text, &n_tokens, &err))) goto fail;
    const int n_ctx = (int)o.n_ctx, n_batch = o.n_batch ? (int)o.n_batch : n_ctx;
    if (n_tokens < 2 * (int64_t)n_ctx) {
        err_set(&err, KVIK_ERR_INVALID_ARG, "%s tokenizes to %lld tokens; a context of %d needs at least %lld", o.text,
                (long long)n_tokens, n_ctx, 2 * (long long)n_ctx);
        goto fail;
    }
    if (n_ctx > m->hp.n_ctx_train)
        fprintf(stderr, "kvik imatrix: warning: the model was trained on %d tokens of context, -c is %d\n",
                m->hp.n_ctx_train, n_ctx);
    if (!(ctx = model_ctx_new(m, (int)o.threads, n_batch, n_ctx, &err))) goto fail;
    int64_t n_chunk = n_tokens / n_ctx;
    if (o.chunks && o.chunks < n_chunk) n_chunk = o.chunks;
    const bool add_bos = tokenizer_add_bos(tok);
    fprintf(stderr, "kvik imatrix: %lld tokens, %lld chunks of %d%s\n", (long long)n_tokens, (long long)n_chunk, n_ctx,
            add_bos ? ", BOS first in each chunk" : "");
    struct imatrix_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .n_chunks = (int)n_chunk,
                               .process_output = process_output, .dataset = o.text, .progress = progress};
    int64_t t0 = clock_ns();
    if (imatrix_compute(m, ctx, tokens, n_tokens, add_bos, tokenizer_bos(tok), &p, &im, &err)) goto fail;
    double secs = (double)(clock_ns() - t0) * 1e-9;
    if (imatrix_save(&im, o.out, &err)) goto fail;
    fprintf(stderr, "kvik imatrix: %lld positions in %.2f s (%.1f tok/s)\n", (long long)n_chunk * n_ctx, secs,
            (double)n_chunk * n_ctx / secs);
    if (json) {
        printf("{\"output\":");
        cli_json_str(stdout, o.out, strlen(o.out));
        printf(",\"n_entries\":%lld,\"n_chunks\":%d,\"n_ctx\":%d,\"n_tokens\":%lld,\"seconds\":%.3f}\n",
               (long long)im.n_entries, im.chunk_count, n_ctx, (long long)n_tokens, secs);
    } else {
        printf("importance matrix of %lld weights over %d chunks of %d tokens saved to %s\n", (long long)im.n_entries,
               im.chunk_count, n_ctx, o.out);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kvik imatrix: %s\n", err.msg);
done:
    imatrix_free(&im);
    free(tokens);
    model_ctx_free(ctx);
    tokenizer_free(tok);
    model_free(m);
    return rc;
}
