/*
 * cmd_convert.c — `kvik convert DIR OUT.gguf [TYPE]`: a Hugging Face model
 * directory (safetensors, config.json, tokenizer.json) to GGUF
 * (convert/convert.h). One line per tensor on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "convert/convert.h"
#include "tools/quantize.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik convert [OPTIONS] DIR OUT.gguf [TYPE]\n"
            "\n"
            "Converts a Hugging Face model directory (config.json, tokenizer.json,\n"
            "model.safetensors or its shards) to GGUF with llama.cpp's tensor names and keys.\n"
            "Families: bert encoders (sentence-transformers pooling kept), llama and qwen2\n"
            "decoders. TYPE is F16 (default), F32, BF16 or any type of `kvik quantize`, which\n"
            "then quantizes an F32 conversion.\n"
            "\n"
            "  --name NAME    general.name (default: the directory's name)\n"
            "  --pre NAME     decoders: tokenizer.ggml.pre, when tokenizer.json does not tell\n"
            "  -t N           quantizer threads (default: all CPUs)\n"
            "  -q, --quiet    no per-tensor lines\n"
            "  -h, --help     this text\n");
}

int cmd_convert(int argc, char **argv) {
    struct convert_params p;
    convert_params_default(&p);
    p.progress = true;
    const char *pos[3];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = !strcmp(a, "--name") || !strcmp(a, "--pre") || !strcmp(a, "-t");
        if (takes && i + 1 >= argc) {
            fprintf(stderr, "kvik convert: %s needs a value (try kvik convert --help)\n", a);
            return 2;
        }
        const char *v = takes ? argv[++i] : NULL;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--name")) {
            p.name = v;
        } else if (!strcmp(a, "--pre")) {
            p.pre = v;
        } else if (!strcmp(a, "-t")) {
            if (!cli_parse_long(v, 1, 1024, &n)) {
                fprintf(stderr, "kvik convert: -t: bad value '%s'\n", v);
                return 2;
            }
            p.n_threads = (int)n;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            p.progress = false;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kvik convert: unknown argument '%s' (try kvik convert --help)\n", a);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "kvik convert: too many arguments (try kvik convert --help)\n");
            return 2;
        }
    }
    if (n_pos < 2) {
        usage(stderr);
        return 2;
    }
    p.dir = pos[0];
    p.out_path = pos[1];
    if (n_pos == 3 && (p.ftype = quant_ftype_parse(pos[2], NULL)) < 0) {
        fprintf(stderr, "kvik convert: unknown type '%s' (try kvik quantize --help)\n", pos[2]);
        return 2;
    }
    struct kvik_err err = {0};
    if (convert_hf(&p, &err)) {
        fprintf(stderr, "kvik convert: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "kvik convert: %s -> %s (%s)\n", p.dir, p.out_path, quant_ftype_name(p.ftype));
    return 0;
}
