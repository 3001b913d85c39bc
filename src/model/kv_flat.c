/*
 * kv_flat.c — the simplest struct kv_cache: every sequence owns n_ctx
 * contiguous positions per layer. Used by the command line and tests; the
 * serving engine pages its cache instead.
 */
#include "model/kv.h"
#include "tensor/tensor.h"

bool kv_type_fits(int type, int row_floats, int head_dim) {
    if (type != TENSOR_TYPE_F32 && type != TENSOR_TYPE_F16 && type != TENSOR_TYPE_Q8_0) return false;
    int64_t bs = tensor_type_traits(type)->block_size;
    return row_floats > 0 && head_dim > 0 && row_floats % head_dim == 0 && head_dim % bs == 0;
}

static void *flat_row(struct kv_cache *base, int layer, int seq, int pos, bool is_v) {
    struct kv_flat *kv = (struct kv_flat *)base;
    if (layer < 0 || layer >= kv->n_layer || seq < 0 || seq >= kv->n_seq || pos < 0 || pos >= kv->n_ctx)
        return NULL;
    size_t idx = (((size_t)layer * kv->n_seq + seq) * 2 + is_v) * kv->n_ctx + pos;
    return kv->data + idx * base->row_bytes;
}

static int flat_span(struct kv_cache *base, int layer, int seq, int pos, int n, const void **k, const void **v) {
    struct kv_flat *kv = (struct kv_flat *)base;
    if (!(*k = flat_row(base, layer, seq, pos, false)) || n < 1) return 0;
    *v = flat_row(base, layer, seq, pos, true);
    return kv->n_ctx - pos < n ? kv->n_ctx - pos : n;
}

kvik_status kv_flat_init(struct kv_flat *kv, int n_layer, int n_seq, int n_ctx, int row_floats, int type,
                         struct kvik_err *err) {
    *kv = (struct kv_flat){.base = {.row = flat_row, .span = flat_span, .row_floats = row_floats, .type = type},
                           .n_layer = n_layer, .n_seq = n_seq, .n_ctx = n_ctx};
    if (!kv_type_fits(type, row_floats, row_floats))
        return err_set(err, KVIK_ERR_INVALID_ARG, "kv: rows of %d values cannot be stored as %s", row_floats,
                       tensor_type_name(type));
    kv->base.row_bytes = tensor_row_size(type, row_floats);
    uint64_t n;
    if (n_layer < 1 || n_seq < 1 || n_ctx < 1 ||
        mul_overflows_u64((uint64_t)n_layer * (uint64_t)n_seq * 2, (uint64_t)n_ctx * kv->base.row_bytes, &n) ||
        n > ((uint64_t)1 << 42))
        return err_set(err, KVIK_ERR_INVALID_ARG, "kv: cache of %d layers x %d sequences x %d positions too large",
                       n_layer, n_seq, n_ctx);
    kv->data = mem_alloc_aligned((size_t)n);
    if (!kv->data)
        return err_set(err, KVIK_ERR_NOMEM, "kv: out of memory for %.1f MiB of cache", (double)n / (1 << 20));
    return KVIK_OK;
}

void kv_flat_free(struct kv_flat *kv) {
    mem_free(kv->data);
    kv->data = NULL;
}
