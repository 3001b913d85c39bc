/*
 * imatrix_file.h — importance matrices on disk, in llama.cpp's two formats.
 *
 * An importance matrix holds, per weight matrix of a model (keyed by the
 * weight's tensor name, "blk.0.attn_q.weight"), the sum over calibration
 * tokens of x^2 for each of its input columns, and how many tokens were
 * summed. A tensor of several matrices (an expert stack) has one sum row
 * and one count per matrix. The quantizer weights each column's rounding
 * error by sum / count.
 *
 * Formats:
 *  - GGUF (what kvik writes): general.type = "imatrix"; keys
 *    imatrix.datasets (array of strings), imatrix.chunk_count and
 *    imatrix.chunk_size (uint32); per entry two F32 tensors, NAME.in_sum2
 *    [n_cols, n_mat] and NAME.counts [1, n_mat].
 *  - legacy .dat (read only): int32 n_entries; per entry int32 name
 *    length, the name, int32 ncall, int32 nval, nval floats (sums already
 *    scaled so that dividing by ncall gives the mean); then optionally
 *    int32 chunk count, int32 length and a dataset name.
 */
#ifndef KVIK_TOOLS_IMATRIX_FILE_H
#define KVIK_TOOLS_IMATRIX_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

struct imatrix_entry {
    char *name;      /* the weight tensor's name, NUL-terminated */
    int64_t n_cols;  /* input columns per matrix */
    int64_t n_mat;   /* matrices (1, or the experts) */
    float *sums;     /* [n_mat][n_cols]: sum of x^2 */
    int64_t *counts; /* [n_mat]: tokens summed (for legacy files: ncall) */
};

struct imatrix {
    struct imatrix_entry *entries; /* sorted by name */
    int64_t n_entries;
    char **datasets; /* [n_datasets], NUL-terminated */
    int64_t n_datasets;
    int32_t chunk_count;
    int32_t chunk_size;
    bool legacy;       /* read from a .dat file */
    bool has_metadata; /* GGUF with all three imatrix.* keys (llama.cpp's quantizer requires them) */
};

/*
 * Reads a GGUF or legacy imatrix file into *out (zeroed first; free with
 * imatrix_free, also after a failure). Errors: KVIK_ERR_IO, or
 * KVIK_ERR_FORMAT for a malformed file (truncated, a sum without its
 * counts, not F32, sizes that disagree), with the file and entry named.
 */
kvik_status imatrix_load(const char *path, struct imatrix *out, struct kvik_err *err);

/* The same over a file's bytes in memory (not kept after the call). */
kvik_status imatrix_load_memory(const void *data, size_t size, struct imatrix *out, struct kvik_err *err);

/* Writes m as a GGUF imatrix file (to path + ".tmp", then renamed). */
kvik_status imatrix_save(const struct imatrix *m, const char *path, struct kvik_err *err);

/* The entry of a weight tensor, or NULL. */
const struct imatrix_entry *imatrix_find(const struct imatrix *m, const char *name);

/*
 * The importance weights a quantizer takes for matrix `mat` of e, into
 * out[e->n_cols], as llama.cpp's quantizer derives them: GGUF, sums / count
 * (every weight 1 where the count is 0); legacy, sums / ncall (the sums as
 * they are where ncall is 0).
 */
void imatrix_weights(const struct imatrix_entry *e, int64_t mat, bool legacy, float *out);

void imatrix_free(struct imatrix *m);

#endif /* KVIK_TOOLS_IMATRIX_FILE_H */
