/*
 * gguf.h — reading and writing GGUF files (versions 2 and 3).
 *
 * The reader maps a file (or takes a caller's buffer), validates all of it
 * once at open time and then answers questions without copying: metadata
 * strings and arrays (a 150k-entry vocabulary, say) are handed out as
 * pointers into the map, and tensors carry a pointer to their bytes. Keys
 * and tensor names are the only strings copied, into owned NUL-terminated
 * storage. Every length, count, offset and size in the file is checked
 * against the file size and for integer overflow before it is used;
 * gguf_open never reads outside the file and never aborts. An open gguf
 * is never modified, so any number of threads may read it at once.
 *
 * Choices this reader makes where the format leaves room:
 *  - v1 files are rejected (their counts are 32-bit); v2 and v3 read alike.
 *  - A tensor dimension must be >= 1: kvik rejects empty tensors.
 *  - Keys and tensor names are 1..GGUF_MAX_NAME bytes with no NUL byte;
 *    duplicate keys and duplicate tensor names are errors.
 *  - Arrays nest at most GGUF_MAX_DEPTH deep; bools are 0 or 1.
 *  - Tensors must lie inside the file, at aligned offsets, and may not
 *    overlap. A file without tensors needs no data section at all.
 *
 * The writer builds a GGUF v3 file in memory and writes it to a path, a
 * FILE* or a malloc'ed buffer. Setting a key that is already set replaces
 * its value (the key keeps its place). Tensor data is borrowed, not copied:
 * it must stay valid until the file is written. Or a tensor's bytes come
 * from a callback at write time (gguf_writer_add_tensor_fn), a bounded
 * chunk at a time, so files larger than memory can be written.
 */
#ifndef KVIK_GGUF_H
#define KVIK_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_DEPTH 8     /* array nesting: an array of arrays has depth 2 */
#define GGUF_MAX_NAME 1024   /* bytes in a key or a tensor name */

/* Metadata value types; the values are the ids stored in the file. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT = 13
};

/* "uint32", "string", "array", ...; "?" for an id that is not a type. */
const char *gguf_type_name(int type);

/* Bytes of one value of a fixed-size type (1, 2, 4 or 8); 0 for STRING,
 * ARRAY and unknown ids. */
size_t gguf_type_size(int type);

/* A string inside the file: NOT NUL-terminated. */
struct gguf_str {
    const char *ptr; /* [len] bytes in the map; NULL when absent */
    uint64_t len;
};

/*
 * One metadata value, pointing into the map. All bytes at p may be
 * unaligned: read them with memcpy (or the helpers below), never through a
 * cast pointer.
 */
struct gguf_value {
    enum gguf_type type;
    const uint8_t *p;           /* scalar: its bytes; STRING: first byte; ARRAY: first element */
    uint64_t n;                 /* STRING: bytes; ARRAY: elements; scalar: 1 */
    uint64_t nbytes;            /* bytes of the payload at p (ARRAY: all elements, encoded) */
    enum gguf_type elem_type;   /* ARRAY only */
    const uint8_t **strs;       /* ARRAY of STRING: [n] -> each element's u64 length field */
    struct gguf_value *elems;   /* ARRAY of ARRAY: [n] nested arrays */
};

/* A tensor as validated at open time. */
struct gguf_tensor {
    const char *name;           /* NUL-terminated, owned by the gguf */
    int type;                   /* enum tensor_type (GGUF's ggml_type id) */
    int n_dims;                 /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS];  /* elements per dimension, ne[0] fastest; unused dims are 1 */
    int64_t n_elems;            /* ne[0] * ne[1] * ne[2] * ne[3] */
    uint64_t n_bytes;           /* bytes of data */
    uint64_t offset;            /* relative to the data section, as stored in the file */
    uint64_t file_offset;       /* absolute: data_offset + offset */
    const void *data;           /* [n_bytes] in the map (aligned to the file's alignment) */
};

struct gguf; /* an open, validated file; layout below, for this module only */

/* ---- opening ------------------------------------------------------------ */

/* Maps and validates the file at path. On failure *out is NULL and err says
 * what is wrong and at which byte offset (KVIK_ERR_FORMAT), or why the file
 * could not be read (KVIK_ERR_IO) or memory ran out (KVIK_ERR_NOMEM). */
kvik_status gguf_open(const char *path, struct gguf **out, struct kvik_err *err);

/* The same over a caller's buffer, which is not copied: it must outlive the
 * gguf (the fuzzer's entry point; also handy for files built in memory). */
kvik_status gguf_open_memory(const void *data, size_t size, struct gguf **out,
                             struct kvik_err *err);

void gguf_close(struct gguf *g); /* NULL is fine */

uint32_t gguf_version(const struct gguf *g);
uint32_t gguf_alignment(const struct gguf *g);
uint64_t gguf_file_size(const struct gguf *g);
/* Start of the data section (aligned end of the tensor infos). For a file
 * without tensors it may lie at or past the end of the file. */
uint64_t gguf_data_offset(const struct gguf *g);

/* ---- metadata ----------------------------------------------------------- */

int64_t gguf_n_kv(const struct gguf *g);
int64_t gguf_find_key(const struct gguf *g, const char *key); /* index, or -1 if absent */
const char *gguf_key(const struct gguf *g, int64_t i);        /* NULL if out of range */
const struct gguf_value *gguf_kv_value(const struct gguf *g, int64_t i); /* NULL if out of range */

/*
 * Typed getters by key: KVIK_ERR_NOT_FOUND if the key is absent,
 * KVIK_ERR_FORMAT if its type does not fit. Integer getters accept any
 * integer type whose value is in range (files disagree on u32 vs i32 vs
 * u64); gguf_get_f32 accepts FLOAT32 and FLOAT64; gguf_get_bool only BOOL,
 * gguf_get_str only STRING. gguf_get_arr checks the element type unless
 * elem_type is -1.
 */
kvik_status gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out,
                         struct kvik_err *err);
kvik_status gguf_get_i64(const struct gguf *g, const char *key, int64_t *out,
                         struct kvik_err *err);
kvik_status gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out,
                         struct kvik_err *err);
kvik_status gguf_get_f32(const struct gguf *g, const char *key, float *out,
                         struct kvik_err *err);
kvik_status gguf_get_bool(const struct gguf *g, const char *key, bool *out,
                          struct kvik_err *err);
kvik_status gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out,
                         struct kvik_err *err);
kvik_status gguf_get_arr(const struct gguf *g, const char *key, int elem_type,
                         const struct gguf_value **out, struct kvik_err *err);

/* Scalar conversions of one value (a kv's, or an array element's). They
 * return false when the value's type does not convert without loss:
 * to_i64 / to_u64 take the integer types (and BOOL) in range; to_f64 takes
 * FLOAT32, FLOAT64 and the integer types. */
bool gguf_value_to_i64(const struct gguf_value *v, int64_t *out);
bool gguf_value_to_u64(const struct gguf_value *v, uint64_t *out);
bool gguf_value_to_f64(const struct gguf_value *v, double *out);

/* ---- arrays ------------------------------------------------------------- */

/* Element count / element type of an array value; 0 / -1 if v is not one. */
uint64_t gguf_arr_len(const struct gguf_value *v);
int gguf_arr_type(const struct gguf_value *v);

/* Element i as a value of its own (works for every element type, at any
 * nesting); false if v is not an array or i is out of range. */
bool gguf_arr_elem(const struct gguf_value *v, uint64_t i, struct gguf_value *out);

/* Element i of an array of strings; {NULL, 0} if v is not one or i is out
 * of range. O(1). */
struct gguf_str gguf_arr_str(const struct gguf_value *v, uint64_t i);

/* Element i of an array of arrays; NULL if v is not one or i is out of range. */
const struct gguf_value *gguf_arr_arr(const struct gguf_value *v, uint64_t i);

/* Raw elements of an array of a fixed-size type (n * gguf_type_size bytes,
 * little-endian), UNALIGNED: copy them out (gguf_arr_copy) before reading
 * them as numbers, or read single elements with gguf_arr_elem.
 * NULL for arrays of strings or arrays. */
const void *gguf_arr_data(const struct gguf_value *v);

/* Copies the elements of a fixed-size array into dst (dst_size bytes, which
 * must be exactly n * gguf_type_size(elem_type)). KVIK_ERR_INVALID_ARG otherwise. */
kvik_status gguf_arr_copy(const struct gguf_value *v, void *dst, size_t dst_size);

/* ---- tensors ------------------------------------------------------------ */

int64_t gguf_n_tensors(const struct gguf *g);
int64_t gguf_find_tensor(const struct gguf *g, const char *name); /* index, or -1 */
const struct gguf_tensor *gguf_tensor(const struct gguf *g, int64_t i); /* NULL if out of range */

/* ---- writer ------------------------------------------------------------- */

struct gguf_writer;
struct gguf_warr; /* an array value under construction (for nested arrays) */

struct gguf_writer *gguf_writer_new(void); /* NULL if out of memory */
void gguf_writer_free(struct gguf_writer *w); /* NULL is fine */

/* Alignment of the data section: a power of two (default 32). A value
 * other than 32 is also stored as the key general.alignment (uint32). */
kvik_status gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment);

/* Scalar and string setters. Keys are 1..GGUF_MAX_NAME bytes without NUL
 * (KVIK_ERR_INVALID_ARG otherwise). Setting a key again replaces its value. */
kvik_status gguf_writer_set_u8(struct gguf_writer *w, const char *key, uint8_t v);
kvik_status gguf_writer_set_i8(struct gguf_writer *w, const char *key, int8_t v);
kvik_status gguf_writer_set_u16(struct gguf_writer *w, const char *key, uint16_t v);
kvik_status gguf_writer_set_i16(struct gguf_writer *w, const char *key, int16_t v);
kvik_status gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
kvik_status gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
kvik_status gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
kvik_status gguf_writer_set_i64(struct gguf_writer *w, const char *key, int64_t v);
kvik_status gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
kvik_status gguf_writer_set_f64(struct gguf_writer *w, const char *key, double v);
kvik_status gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
/* s is NUL-terminated for _str; _strn takes len bytes (NULs allowed). */
kvik_status gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s);
kvik_status gguf_writer_set_strn(struct gguf_writer *w, const char *key, const char *s,
                                 uint64_t len);

/* Arrays: n elements of a fixed-size type (host byte order, little-endian
 * machines only), n NUL-terminated strings, or a built (nested) array. */
kvik_status gguf_writer_set_arr_data(struct gguf_writer *w, const char *key, enum gguf_type type,
                                     const void *data, uint64_t n);
kvik_status gguf_writer_set_arr_str(struct gguf_writer *w, const char *key,
                                    const char *const *strs, uint64_t n);
kvik_status gguf_writer_set_arr(struct gguf_writer *w, const char *key, const struct gguf_warr *a);

/* Copies a value read from another file (the quantizer keeps all metadata). */
kvik_status gguf_writer_set_value(struct gguf_writer *w, const char *key,
                                  const struct gguf_value *v);

/* Array builder: gguf_warr_new(elem_type), then add elements of that type. */
struct gguf_warr *gguf_warr_new(enum gguf_type elem_type); /* NULL if out of memory */
void gguf_warr_free(struct gguf_warr *a);
kvik_status gguf_warr_add_data(struct gguf_warr *a, const void *data, uint64_t n);
kvik_status gguf_warr_add_str(struct gguf_warr *a, const char *s, uint64_t len);
kvik_status gguf_warr_add_arr(struct gguf_warr *a, const struct gguf_warr *sub); /* copies sub */

/* Adds a tensor: type must be known to tensor_type_traits, ne[0] a multiple
 * of its block size, every ne >= 1, names unique. data (n_bytes of it) is
 * borrowed until the file is written; NULL writes zeros. */
kvik_status gguf_writer_add_tensor(struct gguf_writer *w, const char *name, int type, int n_dims,
                                   const int64_t *ne, const void *data);

/* Bytes a fill callback is asked for at once: as many whole rows as fit
 * (at least one row). */
#define GGUF_FILL_CHUNK ((size_t)8 << 20)

/* Writes rows [row0, row0 + n_rows) of a tensor's data to dst. A row is
 * ne[0] elements (tensor_row_size bytes); rows run over ne[1] * ne[2] *
 * ne[3]. Called at write time, in row order, in chunks of at most
 * GGUF_FILL_CHUNK bytes unless one row is larger; dst is 64-byte aligned.
 * A status other than KVIK_OK (with err filled) ends the write with it. */
typedef kvik_status (*gguf_tensor_fill_fn)(void *user, void *dst, int64_t row0, int64_t n_rows,
                                           struct kvik_err *err);

/* Like gguf_writer_add_tensor, but the bytes are produced by fill(user, ...)
 * when the file is written (user must stay valid until then). */
kvik_status gguf_writer_add_tensor_fn(struct gguf_writer *w, const char *name, int type, int n_dims,
                                      const int64_t *ne, gguf_tensor_fill_fn fill, void *user);

/* Writes the whole file. A failed write leaves a partial file at path. */
kvik_status gguf_writer_write_file(struct gguf_writer *w, const char *path, struct kvik_err *err);
kvik_status gguf_writer_write_stream(struct gguf_writer *w, FILE *f, struct kvik_err *err);
/* Into a malloc'ed buffer the caller frees with free(). */
kvik_status gguf_writer_write_memory(struct gguf_writer *w, void **out, size_t *out_size,
                                     struct kvik_err *err);

/* ---- layout (for the gguf module's own files) -------------------------- */

struct gguf_kv {
    const char *key;            /* NUL-terminated, owned */
    uint64_t key_len;
    struct gguf_value value;
};

struct gguf_chunk; /* bump-allocator chunk; everything below lives in chunks */

/* An open-addressing hash set of names (keys or tensor names), for O(1)
 * lookup and duplicate detection. */
struct gguf_slot {
    const char *name;           /* NULL: empty slot */
    uint64_t len;
    int64_t index;              /* into kvs[] or tensors[] */
};
struct gguf_names {
    uint64_t mask;              /* slots - 1; slots are a power of two >= 2 * count */
    struct gguf_slot *slots;    /* [mask + 1] */
};

struct gguf {
    struct mapped_file map;     /* when opened by path; data NULL for gguf_open_memory */
    const uint8_t *data;        /* [size] the whole file */
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;       /* aligned end of the tensor infos */
    int64_t n_kv;
    struct gguf_kv *kvs;        /* [n_kv] */
    int64_t n_tensors;
    struct gguf_tensor *tensors; /* [n_tensors] */
    struct gguf_names keys;     /* hash set of kvs[].key */
    struct gguf_names tensor_names; /* hash set of tensors[].name */
    struct gguf_chunk *chunks;  /* all allocations above, freed together */
};

/* Index of name in a hash set; -1 if absent. */
int64_t gguf_names_find(const struct gguf_names *set, const char *name, uint64_t len);
/* Inserts name (borrowed: it must outlive the set) under index into a set
 * with a free slot; returns the index already there for a duplicate, else
 * -1. */
int64_t gguf_names_insert(struct gguf_names *set, const char *name, uint64_t len, int64_t index);

#endif /* KVIK_GGUF_H */
