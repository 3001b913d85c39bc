/*
 * test_quantize.c — `kvik quantize` against llama.cpp's llama-quantize
 * (tests/data/quant_golden.json, scripts/gen_quant_golden.sh), and its
 * behaviour on bad input.
 *
 * The golden cases name an input (four synthetic models and SmolLM2
 * dequantized to F32, all made by kvik here as the script made them), a
 * type and llama-quantize's options. For every case the tensor types kvik
 * chooses (kvik quantize --dry-run) must equal the peer's. The bytes are
 * compared where kvik can make the case's types: the test prints, per
 * tensor type, how many tensors match, and fails only for the types in
 * k_exact, the ones tensor_quantize_rows claims byte-exact with ggml.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "tensor/tensor.h"
#include "test.h"
#include "tools/imatrix_file.h"
#include "tools/quantize.h"

/* The types tensor_quantize_rows makes byte-exact with ggml's quantizer:
 * without importance weights (plain) and with them (F32, F16, BF16 and Q8_0
 * ignore them, so their bytes are the plain ones). Today that is every type
 * kvik makes; a type left out here would have its bytes reported, not
 * required. */
static const struct {
    int type;
    bool plain, imatrix;
} k_exact[] = {
    {TENSOR_TYPE_F32, true, true},  {TENSOR_TYPE_F16, true, true},  {TENSOR_TYPE_BF16, true, true},
    {TENSOR_TYPE_Q8_0, true, true}, {TENSOR_TYPE_Q4_0, true, true}, {TENSOR_TYPE_Q4_1, true, true},
    {TENSOR_TYPE_Q5_0, true, true}, {TENSOR_TYPE_Q5_1, true, true}, {TENSOR_TYPE_Q2_K, true, true},
    {TENSOR_TYPE_Q3_K, true, true}, {TENSOR_TYPE_Q4_K, true, true}, {TENSOR_TYPE_Q5_K, true, true},
    {TENSOR_TYPE_Q6_K, true, true},
};

static bool type_exact(int type, bool imatrix) {
    for (size_t i = 0; i < sizeof k_exact / sizeof *k_exact; i++)
        if (k_exact[i].type == type) return imatrix ? k_exact[i].imatrix : k_exact[i].plain;
    return false;
}

/* ---- fixture: the inputs, made once per run ------------------------------- */

static char g_dir[64];
static json_t *g_golden;
static char g_vocab[4096];

static void fixture_cleanup(void) {
    if (!g_dir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "test_quantize: cannot remove %s\n", g_dir);
}

/* The temporary folder and the golden data; NULL (test failed or skipped)
 * when either is missing. */
static json_t *fixture(void) {
    if (g_golden) return g_golden;
    if (!test_default_model(g_vocab, sizeof g_vocab)) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/quant_golden.json", test_env("KVIK_TEST_DATA"));
    json_error_t je;
    g_golden = json_load_file(path, 0, &je);
    if (!g_golden) {
        test_fail(__FILE__, __LINE__, "%s: %s", path, je.text);
        return NULL;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/kvik-quantize-XXXXXX");
    if (!mkdtemp(g_dir)) {
        test_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        g_dir[0] = 0;
        return NULL;
    }
    atexit(fixture_cleanup);
    return g_golden;
}

/* A legacy .dat importance matrix by the golden data's formula (every 2-D
 * weight of the model but token_embd). as_gguf writes the same matrix as a
 * GGUF imatrix instead. */
static bool write_imatrix(const char *model, const char *path, bool as_gguf) {
    struct gguf *g;
    if (gguf_open(model, &g, NULL)) return false;
    int64_t n = gguf_n_tensors(g), k = 0;
    struct imatrix_entry *e = calloc((size_t)n, sizeof *e);
    bool ok = e != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        size_t len = strlen(t->name);
        if (t->n_dims < 2 || t->ne[1] < 2 || len < 7 || strcmp(t->name + len - 7, ".weight") ||
            !strcmp(t->name, "token_embd.weight"))
            continue;
        unsigned s = 0;
        for (size_t c = 0; c < len; c++) s += (unsigned char)t->name[c];
        e[k].name = strdup(t->name);
        e[k].n_cols = t->ne[0];
        e[k].n_mat = 1;
        e[k].sums = malloc((size_t)t->ne[0] * sizeof(float));
        e[k].counts = malloc(sizeof(int64_t));
        ok = e[k].name && e[k].sums && e[k].counts;
        for (int64_t c = 0; ok && c < t->ne[0]; c++)
            e[k].sums[c] = (float)(((uint64_t)c * 37 + (uint64_t)s * 11) % 251 + 1) * 0.125f * 4.0f;
        if (ok) e[k].counts[0] = 4;
        k++;
    }
    gguf_close(g);
    if (ok && as_gguf) {
        char *ds[] = {"synthetic"};
        struct imatrix m = {.entries = e, .n_entries = k, .datasets = ds, .n_datasets = 1, .chunk_count = 4,
                            .chunk_size = 512};
        /* imatrix_save takes the entries sorted by name */
        for (int64_t i = 1; i < k; i++)
            for (int64_t j = i; j > 0 && strcmp(e[j - 1].name, e[j].name) > 0; j--) {
                struct imatrix_entry x = e[j];
                e[j] = e[j - 1];
                e[j - 1] = x;
            }
        ok = imatrix_save(&m, path, NULL) == KVIK_OK;
    } else if (ok) {
        FILE *f = fopen(path, "wb");
        int32_t v = (int32_t)k;
        ok = f && fwrite(&v, 4, 1, f) == 1;
        for (int64_t i = 0; ok && i < k; i++) {
            int32_t len = (int32_t)strlen(e[i].name), ncall = 4, nval = (int32_t)e[i].n_cols;
            ok = fwrite(&len, 4, 1, f) == 1 && fwrite(e[i].name, 1, (size_t)len, f) == (size_t)len &&
                 fwrite(&ncall, 4, 1, f) == 1 && fwrite(&nval, 4, 1, f) == 1 &&
                 fwrite(e[i].sums, 4, (size_t)nval, f) == (size_t)nval;
        }
        int32_t chunks = 4, dlen = 9;
        ok = ok && fwrite(&chunks, 4, 1, f) == 1 && fwrite(&dlen, 4, 1, f) == 1 && fwrite("synthetic", 1, 9, f) == 9;
        if (f) ok = fclose(f) == 0 && ok;
    }
    for (int64_t i = 0; i < k; i++) {
        free(e[i].name);
        free(e[i].sums);
        free(e[i].counts);
    }
    free(e);
    return ok;
}

/* The path of a golden input (made on first use; its SHA-256 checked
 * against the one llama-quantize read), or NULL after a failure. */
static const char *input_path(const char *key, char *buf, size_t len) {
    json_t *in = json_object_get(json_object_get(g_golden, "inputs"), key);
    if (!in) {
        test_fail(__FILE__, __LINE__, "golden data: no input %s", key);
        return NULL;
    }
    snprintf(buf, len, "%s/%s-f32.gguf", g_dir, key);
    struct stat st;
    if (stat(buf, &st) == 0) return buf;
    struct kvik_err err = {0};
    const char *shape = json_string_value(json_object_get(in, "synth"));
    if (shape) {
        struct synth_params p = {.shape = synth_shape_find(shape), .type = TENSOR_TYPE_F32,
                                 .seed = (uint64_t)json_integer_value(json_object_get(in, "seed")),
                                 .vocab_path = g_vocab, .n_threads = 2};
        if (!p.shape || synth_write(buf, &p, NULL, &err)) {
            test_fail(__FILE__, __LINE__, "synth %s: %s", shape, p.shape ? err.msg : "unknown shape");
            return NULL;
        }
    } else {
        struct quant_params p;
        quant_params_default(&p);
        p.ftype = QUANT_FTYPE_F32;
        p.n_threads = 2;
        if (quant_file(g_vocab, buf, &p, NULL, &err)) {
            test_fail(__FILE__, __LINE__, "dequantizing the default model: %s", err.msg);
            return NULL;
        }
    }
    char sha[65];
    const char *want = json_string_value(json_object_get(in, "sha256"));
    if (!sha256_file(buf, sha) || !want || strcmp(sha, want)) {
        test_fail(__FILE__, __LINE__,
                  "input %s: sha256 %s, llama-quantize read %s: the input kvik makes changed; rerun "
                  "scripts/gen_quant_golden.sh",
                  key, sha, want ? want : "?");
        remove(buf);
        return NULL;
    }
    char im[4200];
    snprintf(im, sizeof im, "%s/%s.imatrix.dat", g_dir, key);
    if (!write_imatrix(buf, im, false)) {
        test_fail(__FILE__, __LINE__, "cannot write %s", im);
        return NULL;
    }
    return buf;
}

/* The case's options as shell words (single-quoted), "@imatrix" replaced. */
static void case_args(json_t *c, char *out, size_t len) {
    size_t n = 0;
    out[0] = 0;
    const char *key = json_string_value(json_object_get(c, "input"));
    json_t *a;
    size_t i;
    json_array_foreach(json_object_get(c, "args"), i, a) {
        const char *s = json_string_value(a);
        char im[4200];
        if (!strcmp(s, "@imatrix")) {
            snprintf(im, sizeof im, "%s/%s.imatrix.dat", g_dir, key);
            s = im;
        }
        n += (size_t)snprintf(out + n, n < len ? len - n : 0, "'%s' ", s);
    }
}

static bool case_uses_imatrix(json_t *c) {
    json_t *a;
    size_t i;
    json_array_foreach(json_object_get(c, "args"), i, a) if (!strcmp(json_string_value(a), "@imatrix")) return true;
    return false;
}

/* "TYPE HASH" of tensor k of a case. */
static void golden_tensor(json_t *c, size_t k, char *type, size_t tlen, const char **hash) {
    const char *s = json_string_value(json_array_get(json_object_get(c, "tensors"), k));
    const char *sp = s ? strchr(s, ' ') : NULL;
    snprintf(type, tlen, "%.*s", sp ? (int)(sp - s) : 0, sp ? s : "");
    *hash = sp ? sp + 1 : "";
}

static char g_out[1 << 16], g_err[1 << 14];

/* The output's metadata against llama-quantize's: the same keys (but
 * quantize.imatrix.file, a path), the same numbers and strings. */
static void check_meta(const struct gguf *g, json_t *meta, const char *what) {
    int64_t n = 0;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_key(g, i);
        if (!strcmp(key, "quantize.imatrix.file")) continue;
        n++;
        json_t *want = json_object_get(meta, key);
        if (!want) {
            test_fail(__FILE__, __LINE__, "%s: key %s, which llama-quantize does not write", what, key);
            continue;
        }
        const struct gguf_value *v = gguf_kv_value(g, i);
        int64_t iv;
        double dv;
        bool ok = true;
        if (json_is_null(want)) ok = v->type == GGUF_TYPE_ARRAY;
        else if (json_is_boolean(want)) ok = v->type == GGUF_TYPE_BOOL && (*v->p != 0) == json_is_true(want);
        else if (json_is_integer(want)) ok = gguf_value_to_i64(v, &iv) && iv == json_integer_value(want);
        else if (json_is_real(want)) ok = gguf_value_to_f64(v, &dv) && dv == json_real_value(want);
        else if (json_is_string(want))
            ok = v->type == GGUF_TYPE_STRING && v->n == strlen(json_string_value(want)) &&
                 !memcmp(v->p, json_string_value(want), v->n);
        CHECK_MSG(ok, "%s: key %s differs from llama-quantize's", what, key);
    }
    CHECK_MSG(n == (int64_t)json_object_size(meta), "%s: %lld keys, llama-quantize %zu", what, (long long)n,
              json_object_size(meta));
}

TEST(quantize_golden_types) {
    json_t *golden = fixture();
    if (!golden) return;
    json_t *c;
    size_t ci;
    int n_cases = 0, n_tensors = 0;
    json_array_foreach(json_object_get(golden, "cases"), ci, c) {
        const char *key = json_string_value(json_object_get(c, "input"));
        const char *type = json_string_value(json_object_get(c, "type"));
        char in[4096], args[8192], cmd[16384];
        if (!input_path(key, in, sizeof in)) return;
        case_args(c, args, sizeof args);
        snprintf(cmd, sizeof cmd, "quantize --dry-run %s '%s' %s", args, in, type);
        int rc = test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err);
        if (rc != 0) {
            test_fail(__FILE__, __LINE__, "%s %s %s: exit %d: %s", key, type, args, rc, g_err);
            continue;
        }
        json_t *names = json_object_get(json_object_get(json_object_get(golden, "inputs"), key), "tensors");
        char *save, *line = strtok_r(g_out, "\n", &save);
        size_t k = 0;
        int bad = 0;
        for (; line; line = strtok_r(NULL, "\n", &save), k++) {
            char *sp = strchr(line, ' ');
            char want[16];
            const char *hash;
            golden_tensor(c, k, want, sizeof want, &hash);
            const char *name = json_string_value(json_array_get(names, k));
            if (!sp || !name || strncmp(line, name, (size_t)(sp - line)) || strcasecmp(sp + 1, want)) {
                if (bad++ < 5)
                    test_fail(__FILE__, __LINE__, "%s %s %s: tensor %zu: kvik '%s', llama-quantize '%s %s'", key,
                              type, args, k, line, name ? name : "(none)", want);
            }
        }
        if (k != json_array_size(names))
            test_fail(__FILE__, __LINE__, "%s %s: %zu tensors, llama-quantize %zu", key, type, k,
                      json_array_size(names));
        n_cases++;
        n_tensors += (int)k;
    }
    printf("    quantize types: %d cases, %d tensors compared with llama-quantize\n", n_cases, n_tensors);
}

/* Per tensor type: tensors compared and matching, without and with an imatrix. */
struct tally {
    int n[TENSOR_TYPE_COUNT][2], same[TENSOR_TYPE_COUNT][2];
};

TEST(quantize_golden_bytes) {
    json_t *golden = fixture();
    if (!golden) return;
    static struct tally t;
    memset(&t, 0, sizeof t);
    json_t *c;
    size_t ci;
    int n_run = 0, n_unsupported = 0;
    json_array_foreach(json_object_get(golden, "cases"), ci, c) {
        const char *key = json_string_value(json_object_get(c, "input"));
        const char *type = json_string_value(json_object_get(c, "type"));
        bool im = case_uses_imatrix(c);
        char in[4096], out[4200], args[8192], cmd[20000];
        if (!input_path(key, in, sizeof in)) return;
        case_args(c, args, sizeof args);
        snprintf(out, sizeof out, "%s/out.gguf", g_dir);
        snprintf(cmd, sizeof cmd, "quantize -q -t 2 %s '%s' '%s' %s", args, in, out, type);
        int rc = test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err);
        if (rc != 0) {
            if (strstr(g_err, "cannot make")) { /* a type the row quantizer does not make yet */
                printf("    quantize bytes: %s %s %s: skipped: %s", key, type, args, g_err);
                n_unsupported++;
                continue;
            }
            test_fail(__FILE__, __LINE__, "%s %s %s: exit %d: %s", key, type, args, rc, g_err);
            continue;
        }
        struct gguf *g;
        struct kvik_err err = {0};
        if (gguf_open(out, &g, &err)) {
            test_fail(__FILE__, __LINE__, "%s %s: output: %s", key, type, err.msg);
            continue;
        }
        json_t *meta = json_object_get(c, "meta");
        if (meta) {
            char what[256];
            snprintf(what, sizeof what, "%s %s%s metadata", key, type, im ? " imatrix" : "");
            check_meta(g, meta, what);
        }
        json_t *names = json_object_get(json_object_get(json_object_get(golden, "inputs"), key), "tensors");
        int bad = 0;
        for (size_t k = 0; k < json_array_size(names); k++) {
            const char *name = json_string_value(json_array_get(names, k)), *hash;
            char want[16];
            golden_tensor(c, k, want, sizeof want, &hash);
            int64_t i = gguf_find_tensor(g, name);
            const struct gguf_tensor *gt = gguf_tensor(g, i);
            if (!gt || strcasecmp(tensor_type_name(gt->type), want)) {
                test_fail(__FILE__, __LINE__, "%s %s %s: tensor %s: type %s, llama-quantize %s", key, type, args, name,
                          gt ? tensor_type_name(gt->type) : "(missing)", want);
                continue;
            }
            struct sha256 s;
            uint8_t d[32];
            char hex[65];
            sha256_init(&s);
            sha256_update(&s, gt->data, gt->n_bytes);
            sha256_final(&s, d);
            for (int b = 0; b < 32; b++) snprintf(hex + 2 * b, 3, "%02x", d[b]);
            bool same = !strncmp(hex, hash, 16);
            /* importance weights reach every quantized tensor but token_embd (the
             * imatrix has no entry for it) and Q8_0 (which takes none) */
            bool with_im = im && strcmp(name, "token_embd.weight") && tensor_type_traits(gt->type)->is_quantized &&
                           gt->type != TENSOR_TYPE_Q8_0;
            t.n[gt->type][with_im]++;
            t.same[gt->type][with_im] += same;
            if (!same && type_exact(gt->type, with_im) && bad++ < 3)
                test_fail(__FILE__, __LINE__, "%s %s %s: tensor %s (%s%s): bytes differ from llama-quantize's", key,
                          type, args, name, want, with_im ? ", imatrix" : "");
        }
        gguf_close(g);
        remove(out);
        n_run++;
    }
    printf("    quantize bytes: %d cases run, %d skipped (types the row quantizer does not make)\n", n_run,
           n_unsupported);
    for (int ty = 0; ty < TENSOR_TYPE_COUNT; ty++)
        for (int w = 0; w < 2; w++)
            if (t.n[ty][w])
                printf("    quantize bytes: %-5s %s %4d of %4d tensors equal llama-quantize's%s\n",
                       tensor_type_name(ty), w ? "imatrix" : "plain  ", t.same[ty][w], t.n[ty][w],
                       type_exact(ty, w) ? " (required)" : "");
}

/* ---- behaviour ------------------------------------------------------------ */

TEST(quantize_cli_errors) {
    json_t *golden = fixture();
    if (!golden) return;
    char in[4096], cmd[16384], out[4200];
    if (!input_path("quant-llama3", in, sizeof in)) return;
    snprintf(out, sizeof out, "%s/err.gguf", g_dir);
    static const struct {
        const char *args;
        int rc;
        const char *msg;
    } k_cases[] = {
        {"quantize", 2, "want IN.gguf OUT.gguf TYPE"},
        {"quantize IN OUT Q4_K_X", 2, "unknown type 'Q4_K_X'"},
        {"quantize IN OUT IQ2_XXS", 2, "unknown type"},
        {"quantize --bogus IN OUT Q4_0", 2, "unknown argument '--bogus'"},
        {"quantize --output-type q9_9 IN OUT Q4_0", 2, "unknown tensor type 'q9_9'"},
        {"quantize --tensor-type attn_q IN OUT Q4_0", 2, "want PATTERN=TYPE"},
        {"quantize --tensor-type 'attn_(q=q8_0' IN OUT Q4_0", 1, "pattern"},
        {"quantize -t 0 IN OUT Q4_0", 2, "-t"},
        {"quantize /nonexistent/model.gguf OUT Q4_0", 1, "nonexistent"},
        {"quantize IN OUT Q2_K_S", 1, "needs an importance matrix"},
        {"quantize --imatrix /nonexistent.dat IN OUT Q4_K_M", 1, "nonexistent"},
        {"quantize IN IN Q4_0", 1, "same file"},
        {"quantize --token-embedding-type q4_K IN-QWEN OUT Q8_0", 1, "do not fit"},
        {"quantize NOARCH OUT Q4_0", 1, "general.architecture"},
        {"quantize TRUNC OUT Q4_0", 1, "trunc.gguf"},
    };
    char qwen[4096], noarch[4200], trunc[4200];
    if (!input_path("quant-qwen2", qwen, sizeof qwen)) return;
    /* a well-formed GGUF without general.architecture, and a truncated one */
    snprintf(noarch, sizeof noarch, "%s/noarch.gguf", g_dir);
    snprintf(trunc, sizeof trunc, "%s/trunc.gguf", g_dir);
    struct gguf_writer *w = gguf_writer_new();
    int64_t ne[2] = {32, 4};
    REQUIRE(w && gguf_writer_add_tensor(w, "blk.0.attn_q.weight", TENSOR_TYPE_F32, 2, ne, NULL) == KVIK_OK &&
            gguf_writer_write_file(w, noarch, NULL) == KVIK_OK);
    gguf_writer_free(w);
    FILE *f = fopen(trunc, "wb");
    REQUIRE(f && fwrite("GGUF\3\0\0\0\1", 1, 9, f) == 9 && fclose(f) == 0);
    for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
        /* IN, IN-QWEN and OUT stand for the paths */
        char args[1024];
        size_t n = 0;
        for (const char *p = k_cases[i].args; *p && n + 4300 < sizeof cmd;) {
            if (!strncmp(p, "IN-QWEN", 7)) n += (size_t)snprintf(cmd + n, sizeof cmd - n, "'%s'", qwen), p += 7;
            else if (!strncmp(p, "NOARCH", 6)) n += (size_t)snprintf(cmd + n, sizeof cmd - n, "'%s'", noarch), p += 6;
            else if (!strncmp(p, "TRUNC", 5)) n += (size_t)snprintf(cmd + n, sizeof cmd - n, "'%s'", trunc), p += 5;
            else if (!strncmp(p, "IN", 2)) n += (size_t)snprintf(cmd + n, sizeof cmd - n, "'%s'", in), p += 2;
            else if (!strncmp(p, "OUT", 3)) n += (size_t)snprintf(cmd + n, sizeof cmd - n, "'%s'", out), p += 3;
            else cmd[n++] = *p++;
        }
        cmd[n] = 0;
        snprintf(args, sizeof args, "%s", k_cases[i].args);
        int rc = test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err);
        CHECK_MSG(rc == k_cases[i].rc, "%s: exit %d, want %d (%s)", args, rc, k_cases[i].rc, g_err);
        CHECK_MSG(strstr(g_err, k_cases[i].msg) != NULL, "%s: stderr '%s' lacks '%s'", args, g_err, k_cases[i].msg);
        CHECK_MSG(!strchr(g_err, '\n') || strchr(g_err, '\n') == g_err + strlen(g_err) - 1,
                  "%s: more than one line on stderr: %s", args, g_err);
        struct stat st;
        CHECK_MSG(stat(out, &st) != 0, "%s: left an output file", args);
    }
}

/* A file type by llama.cpp's numeric id is the same as by its name; the
 * aliases Q3_K, Q4_K and Q5_K are the _M mixes. */
TEST(quantize_type_names) {
    const char *canon = NULL;
    CHECK(quant_ftype_parse("15", &canon) == QUANT_FTYPE_Q4_K_M && canon && !strcmp(canon, "Q4_K_M"));
    CHECK(quant_ftype_parse("q4_k_m", NULL) == QUANT_FTYPE_Q4_K_M);
    CHECK(quant_ftype_parse("Q4_K", &canon) == QUANT_FTYPE_Q4_K_M && !strcmp(canon, "Q4_K_M"));
    CHECK(quant_ftype_parse("Q3_K", NULL) == QUANT_FTYPE_Q3_K_M && quant_ftype_parse("q5_k", NULL) == QUANT_FTYPE_Q5_K_M);
    CHECK(quant_ftype_parse("0", NULL) == QUANT_FTYPE_F32 && quant_ftype_parse("32", NULL) == QUANT_FTYPE_BF16);
    CHECK(quant_ftype_parse("21", NULL) == QUANT_FTYPE_Q2_K_S && quant_ftype_parse("7", NULL) == QUANT_FTYPE_Q8_0);
    CHECK(quant_ftype_parse("4", NULL) == -1 && quant_ftype_parse("IQ4_NL", NULL) == -1);
    CHECK(quant_ftype_parse("", NULL) == -1 && quant_ftype_parse("15x", NULL) == -1 && quant_ftype_parse(NULL, NULL) == -1);
    CHECK(quant_ftype_default_type(QUANT_FTYPE_Q3_K_L) == TENSOR_TYPE_Q3_K);
    CHECK(quant_ftype_default_type(QUANT_FTYPE_Q2_K_S) == TENSOR_TYPE_Q2_K && quant_ftype_default_type(4) == -1);
    json_t *golden = fixture();
    if (!golden) return;
    char in[4096], cmd[8400];
    static char by_name[sizeof g_out];
    if (!input_path("quant-llama3", in, sizeof in)) return;
    snprintf(cmd, sizeof cmd, "quantize --dry-run '%s' Q4_K_M", in);
    REQUIRE(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0);
    memcpy(by_name, g_out, sizeof g_out);
    snprintf(cmd, sizeof cmd, "quantize --dry-run '%s' 15", in);
    REQUIRE(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0);
    CHECK(!strcmp(by_name, g_out) && strstr(g_out, "blk.0.attn_v.weight Q6_K"));
}

/* A metadata string of a file, or "" (copied into buf). */
static const char *meta_str(const struct gguf *g, const char *key, char *buf, size_t len) {
    struct gguf_str s;
    buf[0] = 0;
    if (gguf_get_str(g, key, &s, NULL) == KVIK_OK) snprintf(buf, len, "%.*s", (int)s.len, s.ptr);
    return buf;
}

TEST(quantize_requantize_and_round_trip) {
    json_t *golden = fixture();
    if (!golden) return;
    char in[4096], q8[4200], q4[4200], back[4200], cmd[16384];
    if (!input_path("quant-llama3", in, sizeof in)) return;
    snprintf(q8, sizeof q8, "%s/rt-q8.gguf", g_dir);
    snprintf(q4, sizeof q4, "%s/rt-q4.gguf", g_dir);
    snprintf(back, sizeof back, "%s/rt-f32.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "quantize -q '%s' '%s' Q8_0 2", in, q8);
    REQUIRE_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    /* a quantized input is refused for a quantized target, accepted with the flag */
    snprintf(cmd, sizeof cmd, "quantize -q '%s' '%s' Q4_K_M", q8, q4);
    CHECK_EQ_INT(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err), 1);
    CHECK_MSG(strstr(g_err, "requantizing is disabled") && strstr(g_err, "Q8_0"), "%s", g_err);
    snprintf(cmd, sizeof cmd, "quantize -q --allow-requantize '%s' '%s' Q4_K_M", q8, q4);
    CHECK_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    /* ... and dequantized without it: every value is Q8_0's */
    snprintf(cmd, sizeof cmd, "quantize -q '%s' '%s' F32", q8, back);
    REQUIRE_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    struct gguf *a = NULL, *b = NULL, *c = NULL;
    REQUIRE(gguf_open(in, &a, NULL) == KVIK_OK);
    if (gguf_open(q8, &b, NULL) || gguf_open(back, &c, NULL)) {
        test_fail(__FILE__, __LINE__, "cannot open the outputs");
        goto done;
    }
    CHECK_EQ_INT(gguf_n_tensors(c), gguf_n_tensors(a));
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const struct gguf_tensor *ta = gguf_tensor(a, i);
        const struct gguf_tensor *tb = gguf_tensor(b, gguf_find_tensor(b, ta->name));
        const struct gguf_tensor *tc = gguf_tensor(c, gguf_find_tensor(c, ta->name));
        if (!tb || !tc) {
            test_fail(__FILE__, __LINE__, "tensor %s missing", ta->name);
            continue;
        }
        CHECK(tc->type == TENSOR_TYPE_F32);
        CHECK_MSG(tb->type == (ta->n_dims > 1 ? TENSOR_TYPE_Q8_0 : TENSOR_TYPE_F32), "%s is %s", ta->name,
                  tensor_type_name(tb->type));
        float *want = malloc((size_t)ta->n_elems * sizeof(float));
        if (!want) continue;
        tensor_type_traits(tb->type)->to_float(tb->data, want, tb->n_elems);
        CHECK_MSG(!memcmp(want, tc->data, (size_t)ta->n_elems * sizeof(float)), "%s: F32 is not Q8_0's values",
                  ta->name);
        free(want);
    }
    /* metadata: all keys kept, the file type and quantizer version set */
    char x[256], y[256];
    for (int64_t i = 0; i < gguf_n_kv(a); i++) {
        const char *key = gguf_key(a, i);
        CHECK_MSG(gguf_find_key(b, key) >= 0, "key %s dropped", key);
    }
    CHECK_STR(meta_str(b, "tokenizer.ggml.model", x, sizeof x), meta_str(a, "tokenizer.ggml.model", y, sizeof y));
    const struct gguf_value *ta, *tb;
    CHECK(gguf_get_arr(a, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &ta, NULL) == KVIK_OK &&
          gguf_get_arr(b, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tb, NULL) == KVIK_OK &&
          gguf_arr_len(ta) == gguf_arr_len(tb) && ta->nbytes == tb->nbytes && !memcmp(ta->p, tb->p, ta->nbytes));
    uint32_t ft = 99, qv = 0;
    CHECK(gguf_get_u32(b, "general.file_type", &ft, NULL) == KVIK_OK && ft == QUANT_FTYPE_Q8_0);
    CHECK(gguf_get_u32(b, "general.quantization_version", &qv, NULL) == KVIK_OK && qv == 2);
    CHECK(gguf_get_u32(c, "general.file_type", &ft, NULL) == KVIK_OK && ft == QUANT_FTYPE_F32);
done:
    gguf_close(a);
    gguf_close(b);
    gguf_close(c);
    remove(q8);
    remove(q4);
    remove(back);
}

/* The same importance matrix as GGUF and as legacy .dat gives the same
 * file; the quantize.imatrix.* keys say which was used. */
TEST(quantize_imatrix_formats) {
    json_t *golden = fixture();
    if (!golden) return;
    char in[4096], dat[4200], gg[4200], o1[4200], o2[4200], cmd[16384];
    if (!input_path("quant-llama3", in, sizeof in)) return;
    snprintf(dat, sizeof dat, "%s/quant-llama3.imatrix.dat", g_dir);
    snprintf(gg, sizeof gg, "%s/quant-llama3.imatrix.gguf", g_dir);
    snprintf(o1, sizeof o1, "%s/im1.gguf", g_dir);
    snprintf(o2, sizeof o2, "%s/im2.gguf", g_dir);
    REQUIRE(write_imatrix(in, gg, true));
    snprintf(cmd, sizeof cmd, "quantize -q --imatrix '%s' '%s' '%s' Q4_0 2", dat, in, o1);
    REQUIRE_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    snprintf(cmd, sizeof cmd, "quantize -q --imatrix '%s' '%s' '%s' Q4_0 2", gg, in, o2);
    REQUIRE_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    struct gguf *a = NULL, *b = NULL;
    if (gguf_open(o1, &a, NULL) || gguf_open(o2, &b, NULL)) {
        test_fail(__FILE__, __LINE__, "cannot open the outputs");
    } else {
        for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
            const struct gguf_tensor *ta = gguf_tensor(a, i), *tb = gguf_tensor(b, i);
            CHECK_MSG(tb && ta->type == tb->type && ta->n_bytes == tb->n_bytes &&
                          !memcmp(ta->data, tb->data, ta->n_bytes),
                      "%s differs between the two imatrix formats", ta->name);
        }
        char x[4200];
        uint32_t n = 0, ch = 0;
        CHECK_STR(meta_str(a, "quantize.imatrix.file", x, sizeof x), dat);
        CHECK_STR(meta_str(b, "quantize.imatrix.dataset", x, sizeof x), "synthetic");
        CHECK(gguf_get_u32(a, "quantize.imatrix.entries_count", &n, NULL) == KVIK_OK && n == 16 * 7 + 1);
        CHECK(gguf_get_u32(b, "quantize.imatrix.chunks_count", &ch, NULL) == KVIK_OK && ch == 4);
        /* with an imatrix, Q4_0's first eighth of FFN down is Q4_1 (llama-quantize's guard) */
        const struct gguf_tensor *d0 = gguf_tensor(a, gguf_find_tensor(a, "blk.0.ffn_down.weight"));
        const struct gguf_tensor *d5 = gguf_tensor(a, gguf_find_tensor(a, "blk.5.ffn_down.weight"));
        CHECK(d0 && d0->type == TENSOR_TYPE_Q4_1 && d5 && d5->type == TENSOR_TYPE_Q4_0);
    }
    gguf_close(a);
    gguf_close(b);
    remove(o1);
    remove(o2);
}

/* llama.cpp loads and runs a file kvik quantized (skipped when llama-bench
 * is not built: bench/build-llama.sh llama-bench). */
TEST(quantize_output_loads_in_llama_cpp) {
    char bench[4200];
    const char *peer = getenv("KVIK_PEER_DIR");
    const char *home = getenv("HOME");
    if (peer) snprintf(bench, sizeof bench, "%s/build-0.3.36/bin/llama-bench", peer);
    else snprintf(bench, sizeof bench, "%s/.cache/kvik/peer/build-0.3.36/bin/llama-bench", home ? home : "");
    if (access(bench, X_OK) != 0) {
        test_skip("llama-bench is not built (bench/build-llama.sh llama-bench)");
        return;
    }
    json_t *golden = fixture();
    if (!golden) return;
    char in[4096], out[4200], cmd[16384];
    if (!input_path("quant-qwen2", in, sizeof in)) return;
    snprintf(out, sizeof out, "%s/load.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "quantize -q '%s' '%s' Q4_K_M 2", in, out);
    REQUIRE_MSG(test_run_kvik(cmd, g_out, sizeof g_out, g_err, sizeof g_err) == 0, "%s", g_err);
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -p 16 -n 4 -r 1 -t 2 >/dev/null 2>&1", bench, out);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "llama-bench on kvik's Q4_K_M file: status %d", rc);
    remove(out);
}
