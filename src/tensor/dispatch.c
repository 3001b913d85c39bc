/*
 * dispatch.c — one kernel table per instruction set, and the choice of the
 * best one for this CPU, made once. KVIK_ISA=scalar|avx2|avx512|amx in the
 * environment caps the choice (tests and benchmarks use it to compare paths
 * in one binary). KVIK_ATTN=f32 keeps attention in F32 vectors where the
 * AMX table would put its products on BF16 tiles (attn_amx.c), to measure
 * what the tiles cost in accuracy.
 */
#include <pthread.h>
#include <stdlib.h>

#include "tensor/kernels.h"

static struct tensor_kernels g_tables[TENSOR_ISA_COUNT];
static bool g_supported[TENSOR_ISA_COUNT];
static const struct tensor_kernels *g_best;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

float tensor_fp16_table[1 << 16];

static void init_tables(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) tensor_fp16_table[h] = fp16_to_fp32((uint16_t)h);
    tensor_kernels_init_scalar(&g_tables[TENSOR_ISA_SCALAR]);
    g_supported[TENSOR_ISA_SCALAR] = true;
#ifndef KVIK_NO_SIMD
    const struct cpu_features *f = cpu_features_get();
    /* The SIMD tables reuse the scalar activation quantizers, and the
     * scalar argmax and rope where they have none of their own (AVX2). */
    for (int isa = TENSOR_ISA_AVX2; isa < TENSOR_ISA_COUNT; isa++) {
        memcpy(g_tables[isa].quantize, g_tables[TENSOR_ISA_SCALAR].quantize,
               sizeof g_tables[isa].quantize);
        g_tables[isa].argmax = g_tables[TENSOR_ISA_SCALAR].argmax;
        g_tables[isa].rope = g_tables[TENSOR_ISA_SCALAR].rope;
    }
    if (f->avx2 && f->fma && f->f16c) {
        tensor_kernels_init_avx2(&g_tables[TENSOR_ISA_AVX2]);
        g_supported[TENSOR_ISA_AVX2] = true;
    }
    if (g_supported[TENSOR_ISA_AVX2] && f->avx512f && f->avx512bw && f->avx512vl &&
        f->avx512dq && f->avx512vnni) {
        tensor_kernels_init_avx512(&g_tables[TENSOR_ISA_AVX512]);
        g_supported[TENSOR_ISA_AVX512] = true;
    }
    if (g_supported[TENSOR_ISA_AVX512] && f->amx_int8) {
        g_tables[TENSOR_ISA_AMX] = g_tables[TENSOR_ISA_AVX512];
        tensor_kernels_init_amx(&g_tables[TENSOR_ISA_AMX]);
        tensor_kernels_init_amx_k(&g_tables[TENSOR_ISA_AMX]);
        const char *attn = getenv("KVIK_ATTN");
        if (attn && strcmp(attn, "f32") && strcmp(attn, "bf16"))
            log_warn("KVIK_ATTN=%s not recognised (f32, bf16); ignored", attn);
        if (f->amx_bf16 && f->avx512bf16 && !(attn && !strcmp(attn, "f32")))
            tensor_kernels_init_amx_attn(&g_tables[TENSOR_ISA_AMX]);
        g_supported[TENSOR_ISA_AMX] = true;
    }
#endif
    int cap = TENSOR_ISA_COUNT - 1;
    const char *env = getenv("KVIK_ISA");
    if (env) {
        if (!strcmp(env, "scalar")) cap = TENSOR_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) cap = TENSOR_ISA_AVX2;
        else if (!strcmp(env, "avx512")) cap = TENSOR_ISA_AVX512;
        else if (!strcmp(env, "amx")) cap = TENSOR_ISA_AMX;
        else log_warn("KVIK_ISA=%s not recognised (scalar, avx2, avx512, amx); ignored", env);
    }
    for (int isa = cap; isa >= 0; isa--) {
        if (g_supported[isa]) {
            g_best = &g_tables[isa];
            break;
        }
    }
}

const struct tensor_kernels *tensor_kernels_get(enum tensor_isa isa) {
    pthread_once(&g_once, init_tables);
    if ((int)isa < 0 || isa >= TENSOR_ISA_COUNT || !g_supported[isa]) return NULL;
    return &g_tables[isa];
}

const struct tensor_kernels *tensor_kernels_best(void) {
    pthread_once(&g_once, init_tables);
    return g_best;
}

size_t tensor_repack_size(const struct tensor_matrix *w) {
    const struct tensor_kernels *k = tensor_kernels_best();
    if (w->type < 0 || w->type >= TENSOR_TYPE_COUNT || !k->repack[w->type]) return 0;
    return k->repack_size[w->type](w->rows, w->cols);
}

void tensor_repack(const struct tensor_matrix *w, void *dst) { tensor_kernels_best()->repack[w->type](w, dst); }

const char *kvik_cpu_isa(void) { return tensor_kernels_best()->name; }
