/*
 * quantize.h — the file converter: a GGUF model in, the same model with its
 * weight matrices in another type out, each tensor's type chosen as
 * llama.cpp's llama-quantize (0.3.36) chooses it.
 *
 * A file type (QUANT_FTYPE_*, llama.cpp's llama_ftype ids) names a default
 * weight type and, for the K-quant mixes (_S, _M, _L), the rules that give
 * some tensors more bits. The choice per tensor, in order:
 *  1. Kept as it is: tensors of fewer than 2 dimensions (counting only
 *     dimensions > 1), names not ending in "weight", norms ("_norm.weight"),
 *     MoE routers, position embeddings and the other small tables of
 *     quant_policy.c's list; output.weight under leave_output.
 *  2. token_embd_type for the token embeddings and output_type for
 *     output.weight, when given.
 *  3. For a quantized default type: the first tensor_type pattern whose
 *     regular expression matches part of the name, else (unless pure) the
 *     mix's rules: the output matrix (and token_embd when the output is
 *     tied to it) is Q6_K, or Q8_0 where its rows do not fit the default
 *     type's blocks; attention V and FFN down take more bits on the
 *     "more bits" layers (the first and last eighth, and every third
 *     between) in Q4_K_M/Q5_K_M, the first layers in Q3_K_M/Q4_K_S,
 *     all layers in Q2_K/Q3_K_L; grouped-query models (n_head / n_head_kv
 *     >= 4) get Q4_K attention V in Q2_K. Then a 256-weight type whose
 *     blocks do not divide a row falls back: Q2_K, Q3_K -> Q4_0, Q4_K ->
 *     Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and F16 where even that does not fit.
 *  4. Otherwise the default type (F32, F16, BF16 files: every tensor
 *     step 1 keeps not).
 * Tensors are visited in llama.cpp's order: names without a "blk.N." layer
 * first, then by layer, by name within one; the layer counters of the rules
 * advance in that order, and the output file lists tensors in it.
 */
#ifndef KVIK_TOOLS_QUANTIZE_H
#define KVIK_TOOLS_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "gguf/gguf.h"
#include "tools/imatrix_file.h"

/* llama.cpp's llama_ftype ids: the values general.file_type stores. */
enum quant_ftype {
    QUANT_FTYPE_F32 = 0,
    QUANT_FTYPE_F16 = 1,
    QUANT_FTYPE_Q4_0 = 2,
    QUANT_FTYPE_Q4_1 = 3,
    QUANT_FTYPE_Q8_0 = 7,
    QUANT_FTYPE_Q5_0 = 8,
    QUANT_FTYPE_Q5_1 = 9,
    QUANT_FTYPE_Q2_K = 10,
    QUANT_FTYPE_Q3_K_S = 11,
    QUANT_FTYPE_Q3_K_M = 12,
    QUANT_FTYPE_Q3_K_L = 13,
    QUANT_FTYPE_Q4_K_S = 14,
    QUANT_FTYPE_Q4_K_M = 15,
    QUANT_FTYPE_Q5_K_S = 16,
    QUANT_FTYPE_Q5_K_M = 17,
    QUANT_FTYPE_Q6_K = 18,
    QUANT_FTYPE_Q2_K_S = 21,
    QUANT_FTYPE_BF16 = 32,
};

/* A file type by llama-quantize's name ("Q4_K_M", "q4_k_m"; the aliases
 * Q3_K, Q4_K, Q5_K for the _M mixes) or numeric id ("15"); -1 if none.
 * *canonical (may be NULL) gets the canonical name. */
int quant_ftype_parse(const char *s, const char **canonical);
/* "Q4_K_M"; NULL for an id that is not one of the above. */
const char *quant_ftype_name(int ftype);
/* The default weight type (enum tensor_type) of a file type; -1 if none. */
int quant_ftype_default_type(int ftype);
/* Writes the accepted names, one "  ID  or  NAME" line each, to f. */
void quant_ftype_list(FILE *f);

/* One --tensor-type PATTERN=TYPE: an extended regular expression searched
 * for in each tensor name (lowercased, as llama-quantize does). */
struct quant_override {
    const char *pattern;
    int type; /* enum tensor_type */
};

struct quant_params {
    int ftype;                /* enum quant_ftype */
    int n_threads;            /* 0: all CPUs */
    int output_type;          /* output.weight's type; -1: the mix decides */
    int token_embd_type;      /* token_embd.weight's type; -1: the mix decides */
    const struct quant_override *overrides; /* [n_overrides], first match wins */
    int n_overrides;
    bool pure;                /* no mix rules: every quantized tensor gets the default type */
    bool allow_requantize;    /* allow quantized input when the target type is quantized */
    bool leave_output;        /* keep output.weight as it is */
    const char *imatrix_path; /* importance matrix file (GGUF or legacy .dat); NULL: none */
    bool progress;            /* one line per tensor on stderr */
};

void quant_params_default(struct quant_params *p);

/* One tensor's plan. */
struct quant_plan_tensor {
    int64_t index;   /* in the input file */
    int type;        /* output type (enum tensor_type) */
    bool convert;    /* type differs from the input's: rows are converted */
    bool fallback;   /* a 256-weight type did not fit the rows */
};

/* The plan of a whole file, in output order. */
struct quant_plan {
    struct quant_plan_tensor *tensors; /* [n_tensors] */
    int64_t n_tensors;
    int n_fallback;
    bool requires_imatrix; /* some tensor needs an importance matrix (Q2_K_S) */
};

/*
 * Chooses every tensor's type for params (its imatrix_path only says
 * whether an imatrix is used). Errors: KVIK_ERR_INVALID_ARG for an unknown
 * file type, a bad pattern, or a type the rows cannot take; KVIK_ERR_FORMAT
 * for a file the rules cannot read (no general.architecture, no block
 * count). Free with quant_plan_free (also after a failure).
 */
kvik_status quant_plan_make(const struct gguf *g, const struct quant_params *params, struct quant_plan *plan,
                            struct kvik_err *err);
void quant_plan_free(struct quant_plan *plan);

/* What quant_file did. */
struct quant_stats {
    int64_t n_tensors;
    int64_t n_converted;
    uint64_t bytes_in;  /* tensor data in */
    uint64_t bytes_out; /* tensor data out */
    int n_fallback;
    int64_t imatrix_used; /* tensors quantized with importance weights */
    double seconds;
};

/*
 * Converts in_path to out_path (written to out_path + ".tmp", renamed at
 * the end; a failure removes the .tmp). All metadata is kept but the split
 * keys; general.quantization_version = 2 and general.file_type = ftype are
 * set, and with an imatrix quantize.imatrix.file, .dataset (the first),
 * .entries_count and .chunks_count, as llama-quantize writes them. Rows are
 * read through the map, converted a bounded slab at a time on n_threads,
 * and streamed to the file. Errors name the tensor: a quantized input
 * tensor without allow_requantize (when the target is quantized), a target
 * type the row quantizer cannot make yet, an imatrix whose size does not
 * fit, non-finite input values; KVIK_ERR_IO for files.
 */
kvik_status quant_file(const char *in_path, const char *out_path, const struct quant_params *params,
                       struct quant_stats *stats, struct kvik_err *err);

#endif /* KVIK_TOOLS_QUANTIZE_H */
