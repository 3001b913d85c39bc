/*
 * test_real_model.c — the library on the real default model
 * (SmolLM2-135M-Instruct, Q4_1), when it is in the model cache (`make
 * model`; .ci/run fetches it). Without it these tests skip.
 *
 * Checks that the strict reader accepts a file llama.cpp's tools wrote, that
 * the metadata reads as the model card says, that every tensor's byte size
 * matches its type and shape, and that the SIMD kernels agree with the
 * scalar reference on real weights (not only on random bits).
 */
#include <float.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "tensor/kernels.h"
#include "tensor/quants.h"
#include "test.h"

TEST(real_model_metadata_and_tensors) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    struct gguf_str arch;
    CHECK(gguf_get_str(g, "general.architecture", &arch, &err) == KVIK_OK);
    CHECK(arch.len == 5 && !memcmp(arch.ptr, "llama", 5));
    uint32_t layers = 0, embd = 0;
    CHECK(gguf_get_u32(g, "llama.block_count", &layers, &err) == KVIK_OK);
    CHECK(gguf_get_u32(g, "llama.embedding_length", &embd, &err) == KVIK_OK);
    CHECK_EQ_INT(layers, 30);
    CHECK_EQ_INT(embd, 576);
    CHECK_EQ_INT(gguf_n_tensors(g), 272); /* 9 per layer + embedding + output norm */
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        size_t row = tensor_row_size(t->type, t->ne[0]);
        CHECK_MSG(row && (uint64_t)row * (uint64_t)(t->n_elems / t->ne[0]) == t->n_bytes,
                  "%s: %llu bytes for its shape", t->name, (unsigned long long)t->n_bytes);
    }
    int64_t emb = gguf_find_tensor(g, "token_embd.weight");
    REQUIRE(emb >= 0);
    CHECK_EQ_INT(gguf_tensor(g, emb)->type, TENSOR_TYPE_Q8_0);
    CHECK_EQ_INT(gguf_tensor(g, emb)->ne[1], 49152);
    gguf_close(g);
}

TEST(real_model_kernels_agree_on_real_weights) {
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    static const char *const names[] = {"blk.0.ffn_up.weight", "blk.29.attn_q.weight", "token_embd.weight"};
    for (size_t ni = 0; ni < sizeof names / sizeof *names; ni++) {
        const struct gguf_tensor *t = gguf_tensor(g, gguf_find_tensor(g, names[ni]));
        REQUIRE(t);
        const struct type_traits *tt = tensor_type_traits(t->type);
        int64_t cols = t->ne[0], rows = 64;
        size_t row_bytes = tensor_row_size(t->type, cols);
        float *x = malloc((size_t)cols * sizeof(float));
        float *w = malloc((size_t)cols * sizeof(float));
        void *xq = mem_alloc_aligned(tensor_row_size(tt->vec_dot_type, cols));
        for (int64_t i = 0; i < cols; i++) x[i] = sinf((float)i * 0.37f);
        tensor_kernels_get(TENSOR_ISA_SCALAR)->quantize[tt->vec_dot_type](x, xq, cols);
        float *xd = malloc((size_t)cols * sizeof(float));
        tensor_type_traits(tt->vec_dot_type)->to_float(xq, xd, cols);
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)t->data + (size_t)r * row_bytes;
            tt->to_float(row, w, cols);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < cols; i++) {
                CHECK(isfinite(w[i]));
                exact += (double)w[i] * xd[i];
                mag += fabs((double)w[i] * xd[i]);
            }
            /* See test_kernels.c for the bound; with Q4_1 the activation
             * block sums are stored as f16, which adds up to half an f16
             * ulp (2^-11 relative) of each block's min term m * s. */
            double tol = 4.0 * (double)(cols / tt->block_size + 8) * FLT_EPSILON * mag;
            if (t->type == TENSOR_TYPE_Q4_1) {
                const block_q4_1 *wb = (const block_q4_1 *)row;
                const block_q8_1 *yb = xq;
                for (int64_t b = 0; b < cols / QK; b++)
                    tol += fabs((double)fp16_to_fp32(wb[b].m) * fp16_to_fp32(yb[b].s)) * ldexp(1.0, -11);
            }
            for (int isa = 0; isa < TENSOR_ISA_COUNT; isa++) {
                const struct tensor_kernels *k = tensor_kernels_get(isa);
                if (!k) continue;
                float got;
                k->vec_dot[t->type](cols, &got, row, xq);
                CHECK_MSG(fabs(got - exact) <= tol, "%s row %lld %s: %g vs %g (tol %g)", names[ni],
                          (long long)r, k->name, got, exact, tol);
            }
        }
        free(x), free(w), free(xd), mem_free(xq);
    }
    gguf_close(g);
}

TEST(real_model_kvik_info) {
    char path[4096], cmd[8400];
    if (!test_default_model(path, sizeof path)) return;
    snprintf(cmd, sizeof cmd, "'%s' info '%s' > /dev/null 2>&1", test_env("KVIK_BIN"), path);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' info --json '%s' | python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "sys.exit(0 if len(d[\"tensors\"]) == 272 else 1)' 2>/dev/null",
             test_env("KVIK_BIN"), path);
    if (system("python3 -c 'import json' 2>/dev/null") == 0) CHECK_EQ_INT(system(cmd), 0);
}

/* End to end through the command line. The expected ids come from
 * independent implementations: the prompt ids from Hugging Face tokenizers
 * (a BPE built from the file's vocabulary and merges), the greedy first
 * token (7042, " Paris") from llama.cpp (llama-cpp-python 0.3.36) on the same
 * file. The full golden comparison lives in test_golden.c. */
TEST(real_model_kvik_run_greedy) {
    char path[4096], cmd[8400];
    if (!test_default_model(path, sizeof path)) return;
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'The capital of France is' -n 4 --temp 0 --json 2>/dev/null",
             test_env("KVIK_BIN"), path);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_EQ_INT(pclose(p), 0);
    CHECK(strstr(out, "\"prompt_ids\":[504,3575,282,4649,314]") != NULL);
    CHECK(strstr(out, "\"generated_ids\":[7042,") != NULL);
    CHECK(strstr(out, "\"text\":\" Paris") != NULL);
}
