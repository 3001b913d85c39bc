/*
 * gguf_api.c — the public GGUF inspection API of kvik.h (kvik_gguf_*), thin
 * wrappers over the module's reader. A kvik_gguf is a struct gguf under an
 * opaque name.
 */
#include "kvik.h"

#include "gguf/gguf.h"

static struct gguf *unwrap(const kvik_gguf *file) { return (struct gguf *)(uintptr_t)file; }

KVIK_API kvik_status kvik_gguf_open(const char *path, kvik_gguf **out, char *err,
                                    size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    struct gguf *g = NULL;
    if (err && err_len) err[0] = 0;
    if (out) *out = NULL;
    if (!out || !path) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "gguf: NULL %s", out ? "path" : "out");
        err_copy_out(&e, err, err_len);
        return e.code;
    }
    kvik_status st = gguf_open(path, &g, &e);
    if (st) {
        err_copy_out(&e, err, err_len);
        return st;
    }
    *out = (kvik_gguf *)(uintptr_t)g;
    return KVIK_OK;
}

KVIK_API void kvik_gguf_close(kvik_gguf *file) { gguf_close(unwrap(file)); }

KVIK_API uint32_t kvik_gguf_version(const kvik_gguf *file) {
    return file ? gguf_version(unwrap(file)) : 0;
}

KVIK_API int64_t kvik_gguf_n_kv(const kvik_gguf *file) {
    return file ? gguf_n_kv(unwrap(file)) : 0;
}

KVIK_API int64_t kvik_gguf_n_tensors(const kvik_gguf *file) {
    return file ? gguf_n_tensors(unwrap(file)) : 0;
}

KVIK_API const char *kvik_gguf_key(const kvik_gguf *file, int64_t i) {
    return file ? gguf_key(unwrap(file), i) : NULL;
}

KVIK_API const char *kvik_gguf_tensor_name(const kvik_gguf *file, int64_t i) {
    const struct gguf_tensor *t = file ? gguf_tensor(unwrap(file), i) : NULL;
    return t ? t->name : NULL;
}
