/*
 * tensor.h — tensor element types and the kernels that compute with them.
 *
 * Two tables, both indexed by enum tensor_type:
 *  - the type traits (tensor_type_traits): block size, bytes per block,
 *    the reference to_float / from_float conversions and the activation type
 *    a weight row is multiplied with;
 *  - the kernel table of one instruction set (tensor_kernels): vec_dot for
 *    each weight type and a fast activation quantizer. There is one table
 *    per ISA (scalar reference, AVX2, AVX-512/VNNI); tensor_kernels_best()
 *    picks the best this CPU runs, once.
 *
 * On top of these, tensor_matvec / tensor_matmul split a product over the
 * thread pool.
 */
#ifndef KVIK_TENSOR_H
#define KVIK_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Values are GGUF's (ggml_type) ids. */
enum tensor_type {
    TENSOR_TYPE_F32 = 0,
    TENSOR_TYPE_F16 = 1,
    TENSOR_TYPE_Q4_0 = 2,
    TENSOR_TYPE_Q4_1 = 3,
    TENSOR_TYPE_Q5_0 = 6,
    TENSOR_TYPE_Q5_1 = 7,
    TENSOR_TYPE_Q8_0 = 8,
    TENSOR_TYPE_Q8_1 = 9,
    TENSOR_TYPE_Q2_K = 10,
    TENSOR_TYPE_Q3_K = 11,
    TENSOR_TYPE_Q4_K = 12,
    TENSOR_TYPE_Q5_K = 13,
    TENSOR_TYPE_Q6_K = 14,
    TENSOR_TYPE_Q8_K = 15,
    TENSOR_TYPE_I8 = 24,
    TENSOR_TYPE_I16 = 25,
    TENSOR_TYPE_I32 = 26,
    TENSOR_TYPE_I64 = 27,
    TENSOR_TYPE_F64 = 28,
    TENSOR_TYPE_BF16 = 30,
    TENSOR_TYPE_COUNT = 31 /* one past the largest id; not every id is a type */
};

/* Reference conversions. n is a multiple of the block size. */
typedef void (*to_float_fn)(const void *restrict x, float *restrict y, int64_t n);
typedef void (*from_float_fn)(const float *restrict x, void *restrict y, int64_t n);

/* s = dot(x, y) over n weights: x is a weight row of its type, y an
 * activation row of that type's vec_dot_type. */
typedef void (*vec_dot_fn)(int64_t n, float *restrict s, const void *restrict x,
                           const void *restrict y);

struct type_traits {
    const char *name;       /* "Q4_K"; NULL for ids that are not a type */
    int64_t block_size;     /* weights per block */
    size_t type_size;       /* bytes per block */
    bool is_quantized;
    to_float_fn to_float;     /* NULL if the type cannot be read as floats */
    from_float_fn from_float; /* reference quantizer; NULL if none */
    enum tensor_type vec_dot_type; /* activation type for vec_dot */
};

/* Traits of a type id; NULL for an id that is not a known type. */
const struct type_traits *tensor_type_traits(int type);

/* Name of a type id, or "?" for an unknown one. */
const char *tensor_type_name(int type);

/* Type id from a name ("q4_k" or "Q4_K"); -1 if unknown. */
int tensor_type_from_name(const char *name);

/* Bytes of a row of n weights; 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t tensor_row_size(int type, int64_t n);

/* ---- kernels per instruction set ------------------------------------ */

enum tensor_isa { TENSOR_ISA_SCALAR, TENSOR_ISA_AVX2, TENSOR_ISA_AVX512, TENSOR_ISA_AMX, TENSOR_ISA_COUNT };

/* s[0..1] = dot of the weight rows at x and x + stride bytes with y; each
 * equal bit for bit to the single-row vec_dot of the same table. */
typedef void (*vec_dot_x2_fn)(int64_t n, float *restrict s, const void *restrict x, size_t stride,
                              const void *restrict y);

/* A tile of products: s[c * s_stride + r] = dot(weight row r, activation
 * row c) for r < tile_rows, c < tile_cols; weight rows x_stride bytes
 * apart, activation rows y_stride bytes apart. Each element equals the
 * single-row vec_dot of the same table bit for bit (batch invariance). */
typedef void (*vec_dot_tile_fn)(int64_t n, float *restrict s, size_t s_stride, const void *restrict x,
                                size_t x_stride, const void *restrict y, size_t y_stride);

struct tensor_matrix;

/* ---- attention ------------------------------------------------------ */

/*
 * Attention reads a sequence's cached K/V rows tile by tile: a tile is the
 * TENSOR_ATTN_TILE positions [i * TILE, (i + 1) * TILE), boundaries at
 * absolute positions. Each query row keeps a running maximum, a running sum
 * of weights and a rescaled output (online softmax), updated once per tile,
 * positions in order within a tile. That order depends only on the row's own
 * last position, never on the other rows of a call, so a query's result is
 * the same bit for bit whatever else shares its batch.
 */
enum { TENSOR_ATTN_TILE = 16 };

/* A run of cached positions of one K/V head: n positions whose K rows start
 * at k and V rows at v, consecutive positions kv->row_bytes apart. */
struct attn_span {
    const void *k, *v;
    int n;
};

/* One K/V head of one sequence as it is cached: positions start, start + 1,
 * ... run by run, each row head_dim values stored as type (F32, F16 or
 * Q8_0). start is at most every row's first visible position (a sliding
 * layer's cache need not hold what no row sees). */
struct attn_kv {
    int type;
    size_t row_bytes;              /* from one position's row to the next within a span */
    const struct attn_span *spans; /* [n_spans] in position order, the first at position start */
    int n_spans;
    int32_t start;
};

/* Query rows sharing one K/V head (the heads of a group, for one or more
 * tokens of the sequence): row r sees positions first(r)..last[r] (causal
 * mask), first(r) = 0, or with a sliding window w > 0 the last w positions,
 * max(0, last[r] - w + 1). */
struct attn_rows {
    int n;
    const float *const *q; /* [n] query rows of head_dim floats */
    float *const *out;     /* [n] output rows of head_dim floats */
    const int32_t *last;   /* [n] each row's own position; the spans cover 0..max(last) */
    int32_t window;        /* 0: every earlier position; else the positions a row sees */
};

/* out[r] = sum_{first(r) <= j <= last[r]} softmax_j(scale * q[r].k_j) v_j for
 * every row, every K and V row read once per call whatever the number of
 * rows; tiles before every row's first position are not read. With a
 * Q8_0 cache q[r] is first quantized to Q8_0 blocks (as the products
 * quantize activations) and q.k is exact integer block sums times the
 * blocks' scales (attn_scalar.c gives the order of the float steps).
 * scratch: tensor_attn_scratch_floats(hd, rows->n) floats, 64-byte aligned. */
typedef void (*attn_fn)(int hd, float scale, const struct attn_kv *kv, const struct attn_rows *rows,
                        float *restrict scratch);

/* Floats of scratch an attention call of n_rows rows of head size hd needs. */
size_t tensor_attn_scratch_floats(int hd, int n_rows);

struct tensor_kernels {
    const char *name; /* "scalar", "avx2", "avx512-vnni" */
    enum tensor_isa isa;
    vec_dot_fn vec_dot[TENSOR_TYPE_COUNT];       /* NULL: no kernel for that weight type */
    vec_dot_x2_fn vec_dot_x2[TENSOR_TYPE_COUNT]; /* optional two-row form (mat-vec) */
    vec_dot_tile_fn vec_dot_tile[TENSOR_TYPE_COUNT]; /* optional tile form (mat-mat) */
    int tile_rows, tile_cols;                    /* the tile's shape (same for every type) */
    attn_fn attn;                                /* attention of the query rows of one K/V head */
    bool attn_bf16; /* attn rounds Q, K, V (a Q8_0 cache's d times quant) and the weights to
                       bf16 for its two products, F32 sums (head sizes multiple of 32; the
                       query is not quantized for a Q8_0 cache then) */
    /* gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + e^-x); each value
     * computed on its own, whatever the run it falls in */
    void (*silu_mul)(float *gate, const float *up, int64_t n);
    /* gate[i] = gelu(gate[i]) * up[i], the tanh form, computed as
     * x * sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3) (the same
     * function: (1 + tanh(z/2)) / 2 = sigmoid(z)); each value on its own */
    void (*gelu_mul)(float *gate, const float *up, int64_t n);
    /* x[i] = x[i] (1 + erf(x[i] / sqrt 2)) / 2, BERT's GELU (the vector
     * tables' erf within 1.5e-7 of the true one) */
    void (*gelu_erf)(float *x, int64_t n);
    /* The first index of the largest of x[0..n) (n >= 1); a NaN is never
     * larger than anything (x[0] NaN counts as -inf), -0 equals +0. */
    int64_t (*argmax)(const float *x, int64_t n);
    /* Rotary embedding of n values (n even): each pair (x[i], x[i+1])
     * by the angle whose cosine and sine are cs[i], cs[i+1], giving
     * x0 c - x1 s and x0 s + x1 c, each product rounded before the sum
     * (no fused multiply-add): the same bits in every table. */
    void (*rope)(float *x, const float *cs, int64_t n);
    /* Optional whole products (AMX): weight rows [r0, r1), r0 a multiple
     * of rows_group (any number of groups), against all n_tok activation
     * rows: n_tok == 1, the quantized row xq and what pack[activation
     * type] made of it (the per-block sums every row group of a mat-vec
     * needs); n_tok > 1, only the packed tiles of rows_group tokens (xq is
     * not written then where the table has quantize_tile). Every element
     * equals this table's vec_dot bit for bit. False if its per-thread
     * buffers could not be allocated. pack prepares blocks [b0, b1) of one
     * token tile per call (units that threads share without writing to the
     * same cache lines); for types with quantize_tile its tile form is the
     * reference that one is tested against, and what a product would use
     * without it. */
    bool (*rows_product[TENSOR_TYPE_COUNT])(const struct tensor_matrix *w, int64_t r0, int64_t r1, const void *xq,
                                            size_t xq_row, const void *packed, int64_t n_tok, float *y, int64_t ys);
    void (*pack[TENSOR_TYPE_COUNT])(const void *xq, size_t xq_row, int64_t cols, int64_t tile, int64_t b0,
                                    int64_t b1, int64_t n_tok, void *packed);
    size_t (*packed_size[TENSOR_TYPE_COUNT])(int64_t cols, int64_t n_tok);
    /* Optional, more than one token: token tok's row x quantized straight
     * into packed, what quantize[type] then pack make of it (x NULL: the
     * zeros of a tile's tokens past the last). Threads quantizing tokens
     * split at multiples of 8 write no cache line in common. */
    void (*quantize_tile[TENSOR_TYPE_COUNT])(const float *x, int64_t cols, int64_t tok, void *packed);
    /* Optional weight repacking (tensor_matrix.panel), done once at load. */
    size_t (*repack_size[TENSOR_TYPE_COUNT])(int64_t rows, int64_t cols);
    void (*repack[TENSOR_TYPE_COUNT])(const struct tensor_matrix *w, void *dst);
    int rows_group;
    from_float_fn quantize[TENSOR_TYPE_COUNT];   /* activation quantizers (Q8_0, Q8_1, Q8_K) and the
                                                    KV cache's row converter (F16); each equals the
                                                    type's reference bit for bit */
};

/* The table of one ISA, or NULL if this CPU (or this build) cannot run it. */
const struct tensor_kernels *tensor_kernels_get(enum tensor_isa isa);

/* The best table for this CPU, chosen once. The environment variable
 * KVIK_ISA=scalar|avx2|avx512 caps the choice (for tests and benchmarks). */
const struct tensor_kernels *tensor_kernels_best(void);

/* ---- products over the thread pool ---------------------------------- */

/* A 2-D weight matrix: rows x cols, row-major, rows `row_bytes` apart. */
struct tensor_matrix {
    int type;
    int64_t rows, cols;
    size_t row_bytes;
    const void *data;
    /* Optional: the same weights rearranged once by the kernel table's
     * repack[type] (groups of rows_group rows, block by block), which its
     * rows_product then reads instead of data; NULL: none. Other tables
     * ignore it. */
    const void *panel;
};

/* Bytes the best table's repack of w takes (0: that table reads w in place,
 * leave w->panel NULL). */
size_t tensor_repack_size(const struct tensor_matrix *w);
/* Rearranges w into dst (tensor_repack_size bytes, 64-byte aligned) for the
 * best table; then set w->panel = dst. */
void tensor_repack(const struct tensor_matrix *w, void *dst);

/* Bytes of scratch tensor_matmul needs to quantize n_tok activation rows of
 * width cols for weights of `type`. */
size_t tensor_matmul_scratch_size(int type, int64_t cols, int64_t n_tok);

/*
 * Y[t][r] = sum_c W[r][c] * X[t][c] for t < n_tok, r < rows.
 * X is n_tok rows of W->cols floats (stride x_stride floats); Y is n_tok rows
 * (stride y_stride floats). scratch holds tensor_matmul_scratch_size bytes,
 * 64-byte aligned. n_tok == 1 is a mat-vec. Returns KVIK_ERR_UNSUPPORTED if
 * the kernel table has no vec_dot for W's type.
 */
kvik_status tensor_matmul(struct pool *pool, const struct tensor_kernels *k,
                          const struct tensor_matrix *w, const float *x, int64_t x_stride,
                          float *y, int64_t y_stride, int64_t n_tok, void *scratch);

/* tensor_matmul, then ACC[t][r] += Y[t][r] for every element (stride
 * acc_stride floats): a residual connection, each sum done by the thread
 * that computed the product, while it is in its cache. The same bits as
 * adding afterwards. */
kvik_status tensor_matmul_add(struct pool *pool, const struct tensor_kernels *k, const struct tensor_matrix *w,
                              const float *x, int64_t x_stride, float *y, int64_t y_stride, int64_t n_tok,
                              void *scratch, float *acc, int64_t acc_stride);

/* The widest rows tensor_matmul_opt normalises or gates itself. */
enum { TENSOR_NORM_MAX_COLS = 16384 };

/* What a product call does besides Y_i = W_i X (tensor_matmul_opt); zero
 * fields do nothing.
 *   - norm_w: each row of X is first normalised, rmsnorm(X[t]) * norm_w
 *     (tensor_rmsnorm with norm_eps), as it is quantized;
 *   - glu_up: each row of X is first gated, silu(X[t]) * UP[t] (the kernel
 *     table's silu_mul; UP's rows up_stride floats apart), as it is
 *     quantized; X itself is not written. Not with norm_w;
 *   - acc: then ACC[t][r] += Y_0[t][r] for every element of the first
 *     matrix's result (rows acc_stride floats apart): a residual
 *     connection, each sum done by the thread that computed the product,
 *     while it is in its cache.
 *   - argmax (int64_t[n_tok]): then argmax[t] = the row of the first
 *     largest element of Y_0[t], what the kernel table's argmax gives for
 *     the whole row, found by each thread in the part it computed (no
 *     second pass over the results); -1 may be reported instead for a
 *     row holding a NaN (the caller then looks itself).
 *   - epilogue: called by the thread that computed them, for each region
 *     of results as it is done: rows [r0, r1) of matrix `mat` for tokens
 *     [t0, t1). Regions do not overlap and together cover every result; r0
 *     is a multiple of 16, r1 one too or the matrix's last row. For work
 *     on results while they are in the computing core's cache (the
 *     forward pass's rope and K/V store).
 * Every result is the same bits as doing the step separately. The row
 * steps need a quantized activation type and at most TENSOR_NORM_MAX_COLS
 * columns, else KVIK_ERR_INVALID_ARG (the caller does them itself);
 * KVIK_ERR_UNSUPPORTED where the kernel table has no silu_mul (glu_up) or
 * argmax, or for an argmax over more than INT32_MAX rows. */
struct tensor_matmul_opts {
    const float *norm_w;
    float norm_eps;
    const float *glu_up;
    int64_t up_stride;
    bool glu_gelu; /* gate with gelu_mul instead of silu_mul */
    float *acc;
    int64_t acc_stride;
    int64_t *argmax;
    void (*epilogue)(void *arg, int mat, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
    void *epilogue_arg;
};

/* tensor_matmul_n with the steps of opts (NULL: none). */
kvik_status tensor_matmul_opt(struct pool *pool, const struct tensor_kernels *k, int n_mats,
                              const struct tensor_matrix *const *w, const float *x, int64_t x_stride,
                              float *const *y, const int64_t *y_stride, int64_t n_tok, void *scratch,
                              const struct tensor_matmul_opts *opts);

/* y = x / sqrt(mean(x^2) + eps) * w over n values (the sum of squares in
 * double). The forward pass's normalisation; tensor_matmul_opt applies it
 * to each activation row as it quantizes it (tensor_matmul_opts.norm_w). */
void tensor_rmsnorm(float *restrict y, const float *restrict x, const float *restrict w, int64_t n, float eps);

/*
 * Several products with one input: Y_i = W_i X for i < n_mats (at most 4),
 * where every W_i has X's width and the same activation type (vec_dot_type).
 * X is quantized once and all tiles share one pass over the pool; each Y_i
 * equals what tensor_matmul gives, bit for bit. KVIK_ERR_INVALID_ARG if
 * widths or activation types differ.
 */
kvik_status tensor_matmul_n(struct pool *pool, const struct tensor_kernels *k, int n_mats,
                            const struct tensor_matrix *const *w, const float *x, int64_t x_stride,
                            float *const *y, const int64_t *y_stride, int64_t n_tok, void *scratch);


#endif /* KVIK_TENSOR_H */
