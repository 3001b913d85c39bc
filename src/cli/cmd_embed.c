/*
 * cmd_embed.c — `kvik embed -m MODEL (-p TEXT | -f FILE)`: embeddings of
 * texts by a BERT-family encoder (model/encoder.h), one JSON array of
 * floats a line on stdout, in input order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/base.h"
#include "model/encoder.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik embed -m MODEL (-p TEXT | -f FILE) [OPTIONS]\n"
            "\n"
            "Embeds each text (-p, repeatable; or each line of FILE) with an encoder GGUF\n"
            "(kvik convert makes one; kvik pull all-minilm-l6-v2) and prints one JSON array\n"
            "of floats a line. A text longer than the model's positions keeps its first\n"
            "n_ctx - 2 tokens between [CLS] and [SEP].\n"
            "\n"
            "  --pooling P       mean, cls or last (default: the file's)\n"
            "  --no-normalize    leave the vectors unnormalised (default: unit length)\n"
            "  --batch N         texts per forward pass (default 32)\n"
            "  --ids             print each text's token ids before its vector\n"
            "  -o FILE           write the vectors to FILE instead, as raw little-endian float32\n"
            "                    rows (n_texts x n_embd), and a progress line on stderr\n"
            "  -t N              threads (default: all CPUs)\n"
            "  -h, --help        this text\n");
}

static void print_vec(const float *v, int d) {
    putchar('[');
    for (int k = 0; k < d; k++) printf("%s%.9g", k ? ", " : "", (double)v[k]);
    puts("]");
}

int cmd_embed(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *out_path = NULL;
    FILE *of = NULL;
    const char **texts = calloc((size_t)argc, sizeof *texts);
    int n_texts = 0, pooling = ENCODER_POOL_NONE, batch = 32, threads = 0;
    bool normalize = true, show_ids = false;
    char *buf = NULL;
    int rc = 2;
    if (!texts) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = !strcmp(a, "-m") || !strcmp(a, "-p") || !strcmp(a, "-f") || !strcmp(a, "--pooling") ||
                     !strcmp(a, "--batch") || !strcmp(a, "-t") || !strcmp(a, "-o");
        if (takes && i + 1 >= argc) {
            fprintf(stderr, "kvik embed: %s needs a value (try kvik embed --help)\n", a);
            goto out;
        }
        const char *v = takes ? argv[++i] : NULL;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "-m")) {
            model = v;
        } else if (!strcmp(a, "-p")) {
            texts[n_texts++] = v;
        } else if (!strcmp(a, "-f")) {
            file = v;
        } else if (!strcmp(a, "-o")) {
            out_path = v;
        } else if (!strcmp(a, "--pooling")) {
            if (!strcmp(v, "mean")) pooling = ENCODER_POOL_MEAN;
            else if (!strcmp(v, "cls")) pooling = ENCODER_POOL_CLS;
            else if (!strcmp(v, "last")) pooling = ENCODER_POOL_LAST;
            else {
                fprintf(stderr, "kvik embed: --pooling: '%s' is not mean, cls or last\n", v);
                goto out;
            }
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-t")) {
            if (!cli_parse_long(v, 1, 1024, &n)) {
                fprintf(stderr, "kvik embed: %s: bad value '%s'\n", a, v);
                goto out;
            }
            *(!strcmp(a, "-t") ? &threads : &batch) = (int)n;
        } else if (!strcmp(a, "--no-normalize")) {
            normalize = false;
        } else if (!strcmp(a, "--ids")) {
            show_ids = true;
        } else {
            fprintf(stderr, "kvik embed: unknown argument '%s' (try kvik embed --help)\n", a);
            goto out;
        }
    }
    if (!model || (!n_texts && !file) || (n_texts && file)) {
        fprintf(stderr, "kvik embed: give -m MODEL and either -p TEXT or -f FILE (try kvik embed --help)\n");
        goto out;
    }
    rc = 1;
    const char **lines = texts;
    if (file) {
        size_t len;
        if (!(buf = cli_read_file(file, &len))) {
            fprintf(stderr, "kvik embed: cannot read %s\n", file);
            goto out;
        }
        size_t cap = 1;
        for (size_t i = 0; i < len; i++) cap += buf[i] == '\n';
        free(texts);
        if (!(texts = lines = calloc(cap, sizeof *texts))) goto out;
        for (char *p = buf, *end = buf + len; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            if (nl) *nl = 0;
            texts[n_texts++] = p;
            p = nl ? nl + 1 : end;
        }
    }
    char path[4096];
    const char *mp = cli_resolve_model(model, path, sizeof path);
    if (!mp) goto out;
    struct kvik_err err = {0};
    struct encoder *e = NULL;
    if (encoder_load(mp, &e, &err)) {
        fprintf(stderr, "kvik embed: %s: %s\n", mp, err.msg);
        goto out;
    }
    const struct encoder_hparams *hp = encoder_hparams(e);
    if (pooling == ENCODER_POOL_NONE && hp->pooling == ENCODER_POOL_RANK) {
        fprintf(stderr, "kvik embed: %s is a cross-encoder (a reranker): serve it with kvik serve --rerank-model, "
                "or embed with --pooling\n", mp);
        encoder_free(e);
        goto out;
    }
    if (out_path && !(of = fopen(out_path, "wb"))) {
        fprintf(stderr, "kvik embed: cannot write %s\n", out_path);
        encoder_free(e);
        goto out;
    }
    int64_t t0 = clock_ns();
    struct encoder_ctx *ctx = encoder_ctx_new(e, threads ? threads : cpu_count(), batch * hp->n_ctx, &err);
    int32_t *ids = malloc((size_t)batch * (size_t)hp->n_ctx * sizeof *ids);
    const int32_t **rows = malloc((size_t)batch * sizeof *rows);
    int *n_ids = malloc((size_t)batch * sizeof *n_ids);
    float *out = malloc((size_t)batch * (size_t)hp->n_embd * sizeof *out);
    if (!ctx || !ids || !rows || !n_ids || !out) {
        fprintf(stderr, "kvik embed: %s\n", ctx ? "out of memory" : err.msg);
    } else {
        rc = 0;
        for (int i0 = 0; i0 < n_texts && !rc; i0 += batch) {
            int nb = n_texts - i0 < batch ? n_texts - i0 : batch;
            for (int b = 0; b < nb && !rc; b++) {
                int32_t *r = ids + (size_t)b * (size_t)hp->n_ctx;
                int64_t n = encoder_tokenize(e, lines[i0 + b], strlen(lines[i0 + b]), r, hp->n_ctx);
                if (n < 0) {
                    fprintf(stderr, "kvik embed: text %d: cannot tokenize\n", i0 + b + 1);
                    rc = 1;
                }
                rows[b] = r;
                n_ids[b] = (int)n;
            }
            if (!rc && encoder_embed(ctx, nb, rows, NULL, n_ids, pooling, normalize, out, &err)) {
                fprintf(stderr, "kvik embed: %s\n", err.msg);
                rc = 1;
            }
            if (of && !rc) {
                if (fwrite(out, sizeof *out * (size_t)hp->n_embd, (size_t)nb, of) != (size_t)nb) {
                    fprintf(stderr, "kvik embed: cannot write %s\n", out_path);
                    rc = 1;
                }
                if (((i0 / batch) % 64 == 0 || i0 + nb == n_texts) && !rc)
                    fprintf(stderr, "kvik embed: %d of %d texts, %.1f a second\n", i0 + nb, n_texts,
                            (i0 + nb) / ((double)(clock_ns() - t0) * 1e-9));
                continue;
            }
            for (int b = 0; b < nb && !rc; b++) {
                if (show_ids) {
                    cli_json_ids(stdout, rows[b], n_ids[b]);
                    putchar('\n');
                }
                print_vec(out + (size_t)b * (size_t)hp->n_embd, hp->n_embd);
            }
        }
    }
    free(ids);
    free(rows);
    free(n_ids);
    free(out);
    encoder_ctx_free(ctx);
    encoder_free(e);
    if (of && fclose(of) != 0 && !rc) {
        fprintf(stderr, "kvik embed: cannot write %s\n", out_path);
        rc = 1;
    }
out:
    free(texts);
    free(buf);
    return rc;
}
