/*
 * cmd_quantize.c — `kvik quantize IN.gguf OUT.gguf TYPE [NTHREADS]`: the
 * file converter (tools/quantize.h), with llama-quantize's options. One
 * line per tensor on stderr, then a summary line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tensor/tensor.h"
#include "tools/quantize.h"

enum { MAX_OVERRIDES = 256 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik quantize [OPTIONS] IN.gguf OUT.gguf TYPE [NTHREADS]\n"
            "\n"
            "Converts a GGUF model's weight matrices to TYPE, choosing each tensor's type as\n"
            "llama.cpp's llama-quantize does (the _S/_M/_L mixes give attention V, FFN down and\n"
            "the output more bits). All metadata is kept; general.file_type is set to TYPE.\n"
            "`kvik quantize IN OUT F32` dequantizes any file. IN may be a model name of `kvik list`.\n"
            "\n"
            "  --imatrix FILE              importance matrix (GGUF or legacy .dat) guiding the rounding\n"
            "  --output-type T             output.weight's type (also --output-tensor-type)\n"
            "  --token-embedding-type T    token_embd.weight's type\n"
            "  --tensor-type PATTERN=T     tensors whose name matches the regular expression PATTERN\n"
            "                              get type T (repeatable; the first match wins)\n"
            "  --pure                      no mix rules: every quantized tensor gets TYPE's default type\n"
            "  --allow-requantize          accept quantized input when TYPE is quantized\n"
            "  --leave-output-tensor       keep output.weight as it is\n"
            "  -t N                        threads (default: all CPUs)\n"
            "  --dry-run                   print each tensor's name and chosen type on stdout, write\n"
            "                              nothing (OUT.gguf may be left out)\n"
            "  -q, --quiet                 no per-tensor lines\n"
            "  -h, --help                  this text\n"
            "\n"
            "T is a tensor type: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k.\n"
            "TYPE (a name or llama.cpp's file type id):\n");
    quant_ftype_list(f);
}

static bool parse_type(const char *flag, const char *v, int *out) {
    int t = tensor_type_from_name(v);
    if (t < 0 || !tensor_type_traits(t) || t == TENSOR_TYPE_Q8_1 || t == TENSOR_TYPE_Q8_K ||
        !tensor_type_traits(t)->to_float || tensor_type_traits(t)->block_size > 256) {
        fprintf(stderr, "kvik quantize: %s: unknown tensor type '%s'\n", flag, v);
        return false;
    }
    *out = t;
    return true;
}

/* --dry-run: the plan, one "NAME TYPE" line per tensor in output order. */
static int dry_run_plan(const char *in, const struct quant_params *p) {
    struct gguf *g = NULL;
    struct quant_plan plan;
    struct kvik_err err = {0};
    if (gguf_open(in, &g, &err) || quant_plan_make(g, p, &plan, &err)) {
        fprintf(stderr, "kvik quantize: %s\n", err.msg);
        gguf_close(g);
        return 1;
    }
    for (int64_t k = 0; k < plan.n_tensors; k++)
        printf("%s %s\n", gguf_tensor(g, plan.tensors[k].index)->name, tensor_type_name(plan.tensors[k].type));
    quant_plan_free(&plan);
    gguf_close(g);
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    struct quant_params p;
    quant_params_default(&p);
    p.progress = true;
    static struct quant_override overrides[MAX_OVERRIDES];
    static char patterns[MAX_OVERRIDES][256];
    const char *pos[4];
    int n_pos = 0;
    long threads = 0;
    bool dry_run = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes = !strcmp(a, "--imatrix") || !strcmp(a, "--output-type") || !strcmp(a, "--output-tensor-type") ||
                     !strcmp(a, "--token-embedding-type") || !strcmp(a, "--tensor-type") || !strcmp(a, "-t");
        const char *v = takes && i + 1 < argc ? argv[i + 1] : NULL;
        if (takes && !v) {
            fprintf(stderr, "kvik quantize: %s needs a value (try kvik quantize --help)\n", a);
            return 2;
        }
        if (takes) i++;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--imatrix")) {
            p.imatrix_path = v;
        } else if (!strcmp(a, "--output-type") || !strcmp(a, "--output-tensor-type")) {
            if (!parse_type(a, v, &p.output_type)) return 2;
        } else if (!strcmp(a, "--token-embedding-type")) {
            if (!parse_type(a, v, &p.token_embd_type)) return 2;
        } else if (!strcmp(a, "--tensor-type")) {
            const char *eq = strrchr(v, '=');
            if (!eq || eq == v || !eq[1]) {
                fprintf(stderr, "kvik quantize: --tensor-type '%s': want PATTERN=TYPE\n", v);
                return 2;
            }
            if (p.n_overrides == MAX_OVERRIDES || (size_t)(eq - v) >= sizeof patterns[0]) {
                fprintf(stderr, "kvik quantize: --tensor-type '%s': too many or too long\n", v);
                return 2;
            }
            char *pat = patterns[p.n_overrides];
            for (size_t k = 0; k < (size_t)(eq - v); k++) /* lowercased, as llama-quantize does */
                pat[k] = (char)(v[k] >= 'A' && v[k] <= 'Z' ? v[k] - 'A' + 'a' : v[k]);
            pat[eq - v] = 0;
            overrides[p.n_overrides].pattern = pat;
            if (!parse_type("--tensor-type", eq + 1, &overrides[p.n_overrides].type)) return 2;
            p.n_overrides++;
        } else if (!strcmp(a, "-t")) {
            if (!cli_parse_long(v, 1, 1024, &threads)) {
                fprintf(stderr, "kvik quantize: -t: bad value '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            p.leave_output = true;
        } else if (!strcmp(a, "--dry-run")) {
            dry_run = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            p.progress = false;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kvik quantize: unknown argument '%s' (try kvik quantize --help)\n", a);
            return 2;
        } else if (n_pos < 4) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "kvik quantize: too many arguments (try kvik quantize --help)\n");
            return 2;
        }
    }
    p.overrides = overrides;
    if (dry_run && n_pos == 2) { /* IN TYPE */
        pos[2] = pos[1];
        pos[1] = NULL;
        n_pos = 3;
    }
    if (n_pos < 3) {
        fprintf(stderr, "kvik quantize: want IN.gguf OUT.gguf TYPE (try kvik quantize --help)\n");
        return 2;
    }
    p.ftype = quant_ftype_parse(pos[2], NULL);
    if (p.ftype < 0) {
        fprintf(stderr, "kvik quantize: unknown type '%s' (kvik quantize --help lists them)\n", pos[2]);
        return 2;
    }
    if (n_pos == 4 && !cli_parse_long(pos[3], 1, 1024, &threads)) {
        fprintf(stderr, "kvik quantize: bad thread count '%s'\n", pos[3]);
        return 2;
    }
    p.n_threads = (int)threads;

    char buf[4096];
    const char *in = cli_resolve_model(pos[0], buf, sizeof buf);
    if (!in) return 1;
    if (dry_run) return dry_run_plan(in, &p);
    struct quant_stats s;
    struct kvik_err err = {0};
    if (quant_file(in, pos[1], &p, &s, &err) != KVIK_OK) {
        fprintf(stderr, "kvik quantize: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr,
            "kvik quantize: wrote %s: %lld tensors (%lld converted, %d fallbacks), %.2f -> %.2f MiB in %.2f s\n",
            pos[1], (long long)s.n_tensors, (long long)s.n_converted, s.n_fallback, (double)s.bytes_in / 1048576.0,
            (double)s.bytes_out / 1048576.0, s.seconds);
    return 0;
}
