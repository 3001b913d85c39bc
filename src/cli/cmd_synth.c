/*
 * cmd_synth.c — `kvik synth`: writes a random-weight GGUF of a real model's
 * shape in a chosen weight type, with a real tokenizer copied from another
 * GGUF (model/synth.h), so benchmarks can use realistic sizes without
 * downloads, and tests compare implementations on one file of any family
 * (llama, qwen2, gemma3, phi3). Progress goes to stderr for files over
 * 256 MB, then one line saying what was written. Ctrl-C or SIGTERM removes
 * the FILE.tmp being written.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "model/synth.h"
#include "tensor/tensor.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik synth --shape NAME --type TYPE -o FILE [--vocab GGUF] [--seed N] [-t N]\n"
            "       kvik synth --list\n"
            "  --shape NAME   a model shape (kvik synth --list)\n"
            "  --type TYPE    weight type: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k\n"
            "                 (norms stay F32; the output matrix is Q6_K, or Q8_0, as llama.cpp's\n"
            "                 quantizer makes it; K-quants fall back to 32-weight types on widths\n"
            "                 that are not a multiple of 256)\n"
            "  -o FILE        output (written to FILE.tmp, then renamed)\n"
            "  --vocab GGUF   copy the tokenizer.* keys of this file, cut or padded to the shape's\n"
            "                 vocabulary (default: the default model, as kvik run finds it)\n"
            "  --seed N       weights seed (default 1); the same seed gives the same file\n"
            "  -t N           threads (default: all CPUs)\n"
            "  --list         print the shapes\n"
            "Weights are random (finite, trained-model magnitudes): for speed measurements, and for\n"
            "comparing implementations on the same file. Each shape follows its family's GGUF\n"
            "conventions (llama, qwen2, gemma3, phi3) as llama.cpp writes and loads them.\n");
}

static void list_shapes(void) {
    size_t n;
    const struct synth_shape *s = synth_shapes(&n);
    printf("%-18s %-6s %6s %5s %6s %5s %4s %4s %7s %7s %8s %5s %8s  %s\n", "shape", "family", "layers", "embd",
           "ff", "heads", "kv", "head", "vocab", "ctx", "rope", "tied", "params", "model");
    for (size_t i = 0; i < n; i++) {
        double params = (double)synth_shape_params(&s[i]);
        char extra[96] = "";
        if (s[i].rope_llama3.factor > 0)
            snprintf(extra, sizeof extra, ", llama3 rope factor %g", (double)s[i].rope_llama3.factor);
        else if (s[i].family == SYNTH_FAMILY_GEMMA3)
            snprintf(extra, sizeof extra, ", window %d, sliding rope %g", s[i].sliding_window,
                     (double)s[i].rope_base_swa);
        printf("%-18s %-6s %6d %5d %6d %5d %4d %4d %7d %7d %8.0f %5s %7.2f%c  %s%s%s%s%s\n", s[i].name,
               synth_family_name(s[i].family), s[i].n_layer, s[i].n_embd, s[i].n_ff, s[i].n_head, s[i].n_head_kv,
               synth_shape_head_dim(&s[i]), s[i].n_vocab, s[i].n_ctx, (double)s[i].rope_base,
               s[i].tied_output ? "yes" : "no", params >= 1e9 ? params / 1e9 : params / 1e6,
               params >= 1e9 ? 'B' : 'M', s[i].model, extra, s[i].note ? " (" : "", s[i].note ? s[i].note : "",
               s[i].note ? ")" : "");
    }
}

/* Progress on stderr: a line rewritten in place on a terminal, else a line
 * every 10%. */
struct progress {
    int64_t t0, last;   /* ns */
    int last_decile;
    bool tty;
};

static void show_progress(void *user, uint64_t done, uint64_t total) {
    struct progress *pr = user;
    if (total < ((uint64_t)256 << 20)) return;
    int64_t now = clock_ns();
    double pct = 100.0 * (double)done / (double)total;
    if (pr->tty) {
        if (done < total && now - pr->last < 200000000) return;
        pr->last = now;
        fprintf(stderr, "\rkvik synth: %6.0f / %.0f MB (%3.0f%%)%s", (double)done / 1e6, (double)total / 1e6, pct,
                done == total ? "\n" : "");
    } else if ((int)(pct / 10) > pr->last_decile) {
        pr->last_decile = (int)(pct / 10);
        fprintf(stderr, "kvik synth: %.0f / %.0f MB (%.0f%%) after %.1f s\n", (double)done / 1e6,
                (double)total / 1e6, pct, (double)(now - pr->t0) / 1e9);
    }
}

/* The FILE.tmp synth_write is writing, removed if a signal ends the run. */
static char g_tmp_path[4096];

static void on_signal(int sig) {
    unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

int cmd_synth(int argc, char **argv) {
    const char *shape_name = NULL, *type_name = NULL, *out = NULL, *vocab_arg = NULL;
    long threads = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i += 2) { /* every option but --help and --list takes a value */
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--list")) {
            list_shapes();
            return 0;
        } else if (!v) {
            fprintf(stderr, "kvik synth: unknown argument or missing value: '%s' (try kvik synth --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--shape")) shape_name = v;
        else if (!strcmp(a, "--type")) type_name = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--vocab")) vocab_arg = v;
        else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, &threads);
        else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 10);
            ok = *v >= '0' && *v <= '9' && !*end && !errno;
        } else {
            fprintf(stderr, "kvik synth: unknown argument '%s' (try kvik synth --help)\n", a);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "kvik synth: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!shape_name || !type_name || !out) {
        fprintf(stderr, "kvik synth: %s is required (try kvik synth --help)\n",
                !shape_name ? "--shape" : !type_name ? "--type" : "-o FILE");
        return 2;
    }
    const struct synth_shape *shape = synth_shape_find(shape_name);
    if (!shape) {
        fprintf(stderr, "kvik synth: unknown shape '%s' (kvik synth --list names them)\n", shape_name);
        return 2;
    }
    int type = tensor_type_from_name(type_name);
    if (type < 0 || !synth_type_supported(type)) {
        fprintf(stderr, "kvik synth: unknown or unsupported weight type '%s' (try kvik synth --help)\n",
                type_name);
        return 2;
    }
    char buf[4096];
    const char *vocab = cli_resolve_model(vocab_arg, buf, sizeof buf);
    if (!cli_model_exists(vocab, vocab_arg, "synth")) return 1;

    if (snprintf(g_tmp_path, sizeof g_tmp_path, "%s.tmp", out) < (int)sizeof g_tmp_path) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
    }
    struct progress pr = {.t0 = clock_ns(), .tty = isatty(2)};
    struct synth_params p = {.shape = shape, .type = type, .seed = seed, .vocab_path = vocab,
                             .n_threads = (int)threads, .progress = show_progress, .progress_user = &pr};
    struct synth_info info;
    struct kvik_err err = {0};
    if (synth_write(out, &p, &info, &err)) {
        if (pr.tty && pr.last) fputc('\n', stderr);
        fprintf(stderr, "kvik synth: %s\n", err.msg);
        return 1;
    }
    double secs = (double)(clock_ns() - pr.t0) / 1e9;
    char vocab_note[96] = "";
    if (info.vocab_src != shape->n_vocab)
        snprintf(vocab_note, sizeof vocab_note, " (%s from %lld%s)",
                 info.vocab_src > shape->n_vocab ? "cut" : "padded", (long long)info.vocab_src,
                 info.merges_dropped ? ", merges dropped past the cut" : "");
    fprintf(stderr, "kvik synth: wrote %s: %s %s, %.2fB params, %d tokens%s, %.1f MB in %.1f s (%.0f MB/s)\n",
            out, shape->name, tensor_type_name(type), (double)info.n_params / 1e9, shape->n_vocab, vocab_note,
            (double)info.file_bytes / 1e6, secs, secs > 0 ? (double)info.file_bytes / 1e6 / secs : 0.0);
    return 0;
}
