/*
 * bind.h — binding a GGUF's tensors as weights, shared by the decoder
 * (model_load.c) and the encoder (encoder.c). Every binder checks the
 * tensor's shape and type and copies nothing.
 */
#ifndef KVIK_MODEL_BIND_H
#define KVIK_MODEL_BIND_H

#include "base/base.h"
#include "gguf/gguf.h"
#include "tensor/tensor.h"

/* Rows [r0, r0 + rows) of the 2-D weight `name` of shape [cols] -> [total]
 * (a fused matrix's part; r0 = 0, rows = total: the whole). Its type must
 * be one the best kernel table multiplies. */
kvik_status model_bind_rows(const struct gguf *g, const char *name, int64_t cols, int64_t total, int64_t r0,
                            int64_t rows, struct tensor_matrix *out, struct kvik_err *err);
kvik_status model_bind_matrix(const struct gguf *g, const char *name, int64_t cols, int64_t rows,
                              struct tensor_matrix *out, struct kvik_err *err);

/* A vector of n F32 values, 4-byte aligned in the file (a norm's weights,
 * a bias); an optional one that is absent leaves *out NULL. */
kvik_status model_bind_vector(const struct gguf *g, const char *name, int64_t n, bool optional, const float **out,
                              struct kvik_err *err);

/* Where the kernel table has a layout of its own for a weight type (AMX:
 * groups of sixteen rows block by block), the n matrices are rearranged
 * into it once, into one allocation *panels (mem_free it; NULL: none
 * needed), and each mats[i]->panel points into it; the mapped file's pages
 * of those matrices are then no longer read. KVIK_REPACK=0 in the
 * environment keeps the file's layout (comparisons). */
kvik_status model_repack_matrices(struct tensor_matrix *const *mats, size_t n, void **panels, struct kvik_err *err);

#endif /* KVIK_MODEL_BIND_H */
