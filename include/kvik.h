/*
 * kvik.h — the public C API of libkvik.
 *
 * Everything a program linking libkvik may rely on is in this file: opaque
 * handles, status codes and fixed-width types. Layouts live in internal
 * headers under src/ and may change between releases without notice.
 *
 * Functions that can fail return a kvik_status and, where they take an
 * `err`/`err_len` pair, write one human-readable line into it. No function
 * aborts or exits on bad input.
 */
#ifndef KVIK_H
#define KVIK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KVIK_BUILDING_LIBRARY) && defined(__GNUC__)
#define KVIK_API __attribute__((visibility("default")))
#else
#define KVIK_API
#endif

#define KVIK_VERSION_MAJOR 0
#define KVIK_VERSION_MINOR 1
#define KVIK_VERSION_PATCH 0

typedef enum kvik_status {
    KVIK_OK = 0,
    KVIK_ERR_IO = -1,          /* open/read/mmap/write failed */
    KVIK_ERR_FORMAT = -2,      /* malformed or inconsistent file or input */
    KVIK_ERR_NOMEM = -3,       /* allocation failed */
    KVIK_ERR_INVALID_ARG = -4, /* a caller passed a bad argument */
    KVIK_ERR_UNSUPPORTED = -5, /* well-formed, but not something kvik handles */
    KVIK_ERR_NOT_FOUND = -6,   /* a named key, tensor or file does not exist */
    KVIK_ERR_BUSY = -7,        /* full for now (a queue limit); try again later */
} kvik_status;

/* "0.1.0" */
KVIK_API const char *kvik_version(void);

/* Short English name of a status ("format error", ...). Never NULL. */
KVIK_API const char *kvik_status_string(kvik_status status);

/* The SIMD path kernels use on this machine: "avx512-vnni", "avx2", "scalar". */
KVIK_API const char *kvik_cpu_isa(void);

/*
 * GGUF inspection. A kvik_gguf is a validated, memory-mapped GGUF file.
 */
typedef struct kvik_gguf kvik_gguf;

KVIK_API kvik_status kvik_gguf_open(const char *path, kvik_gguf **out,
                                    char *err, size_t err_len);
KVIK_API void kvik_gguf_close(kvik_gguf *file);
KVIK_API uint32_t kvik_gguf_version(const kvik_gguf *file);
KVIK_API int64_t kvik_gguf_n_kv(const kvik_gguf *file);
KVIK_API int64_t kvik_gguf_n_tensors(const kvik_gguf *file);
/* Name of the i-th metadata key / tensor, NUL-terminated; NULL if out of range. */
KVIK_API const char *kvik_gguf_key(const kvik_gguf *file, int64_t i);
KVIK_API const char *kvik_gguf_tensor_name(const kvik_gguf *file, int64_t i);

#ifdef __cplusplus
}
#endif

#endif /* KVIK_H */
