/*
 * safetensors.h — a strict reader of Hugging Face safetensors files.
 *
 * The format, byte by byte:
 *
 *   offset   size  what
 *   0        8     N: header length in bytes, unsigned little-endian
 *   8        N     header: UTF-8 JSON object, optionally padded with spaces
 *   8 + N    ...   data buffer: every tensor's bytes, back to back
 *
 * The header maps each tensor name to
 *   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * where begin and end are byte offsets into the data buffer, and may hold
 * one "__metadata__" object mapping strings to strings. Values are stored
 * little-endian and row-major.
 *
 * The reader maps a file (or takes a caller's buffer), validates all of it
 * once at open time and never reads outside the input or aborts. It holds:
 *  - N <= SAFETENSORS_MAX_HEADER and 8 + N <= the input size; the header
 *    starts with '{' and is one JSON object with nothing but whitespace
 *    after it;
 *  - every tensor entry has exactly the keys dtype, shape and data_offsets;
 *    dtype is one of enum safetensors_dtype; shape is an array of at most
 *    SAFETENSORS_MAX_DIMS non-negative integers whose product times the
 *    dtype size fits in 64 bits; data_offsets is two integers with
 *    begin <= end and end - begin == that product;
 *  - sorted by offset, the tensors tile the data buffer exactly: the first
 *    begins at 0, each begins where the one before ends (no overlap, no
 *    hole) and the last ends at the end of the input. The order of the
 *    entries in the JSON is free;
 *  - names are non-empty, contain no NUL and are unique; __metadata__ maps
 *    strings (without NUL) to strings (without NUL), keys unique.
 * Tensor data may be unaligned: copy it out before reading it as numbers.
 * An open file is never modified, so any number of threads may read it.
 */
#ifndef KVIK_CONVERT_SAFETENSORS_H
#define KVIK_CONVERT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define SAFETENSORS_MAX_HEADER 100000000u /* bytes; the reference reader's cap */
#define SAFETENSORS_MAX_DIMS 8

/* Element types, with the names the header uses. */
enum safetensors_dtype {
    SAFETENSORS_BOOL,
    SAFETENSORS_U8,
    SAFETENSORS_I8,
    SAFETENSORS_F8_E5M2,
    SAFETENSORS_F8_E4M3,
    SAFETENSORS_I16,
    SAFETENSORS_U16,
    SAFETENSORS_F16,
    SAFETENSORS_BF16,
    SAFETENSORS_I32,
    SAFETENSORS_U32,
    SAFETENSORS_F32,
    SAFETENSORS_I64,
    SAFETENSORS_U64,
    SAFETENSORS_F64,
    SAFETENSORS_DTYPE_COUNT
};

/* "F32", "BF16", ...; "?" for a value that is not a dtype. */
const char *safetensors_dtype_name(int dtype);
/* Bytes of one element (1, 2, 4 or 8); 0 for a value that is not a dtype. */
size_t safetensors_dtype_size(int dtype);

/* One tensor as validated at open time. */
struct safetensors_tensor {
    const char *name;                       /* NUL-terminated, owned by the file */
    enum safetensors_dtype dtype;
    int n_dims;                             /* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
    uint64_t shape[SAFETENSORS_MAX_DIMS];   /* [n_dims], slowest first; unused dims 0 */
    uint64_t n_elems;                       /* product of shape (1 for a scalar) */
    uint64_t n_bytes;                       /* n_elems * dtype size */
    uint64_t offset;                        /* begin, relative to the data buffer */
    const void *data;                       /* [n_bytes] in the input, maybe unaligned */
};

struct safetensors; /* an open, validated file */

/* Maps and validates the file at path. On failure *out is NULL and err says
 * what is wrong (KVIK_ERR_FORMAT), or why the file could not be read
 * (KVIK_ERR_IO) or memory ran out (KVIK_ERR_NOMEM). */
kvik_status safetensors_open(const char *path, struct safetensors **out, struct kvik_err *err);

/* The same over a caller's buffer, which is not copied: it must outlive the
 * result (the fuzzer's entry point). */
kvik_status safetensors_open_memory(const void *data, size_t size, struct safetensors **out,
                                    struct kvik_err *err);

void safetensors_close(struct safetensors *st); /* NULL is fine */

uint64_t safetensors_header_size(const struct safetensors *st); /* N */
uint64_t safetensors_data_size(const struct safetensors *st);   /* bytes after the header */

/* Tensors are indexed in order of their data offsets. */
int64_t safetensors_n_tensors(const struct safetensors *st);
const struct safetensors_tensor *safetensors_tensor(const struct safetensors *st, int64_t i); /* NULL if out of range */
int64_t safetensors_find_tensor(const struct safetensors *st, const char *name); /* index, or -1 */

/* __metadata__ entries, in header order. */
int64_t safetensors_n_metadata(const struct safetensors *st);
const char *safetensors_metadata_key(const struct safetensors *st, int64_t i);   /* NULL if out of range */
const char *safetensors_metadata_value(const struct safetensors *st, int64_t i); /* NULL if out of range */
const char *safetensors_find_metadata(const struct safetensors *st, const char *key); /* NULL if absent */

#endif
