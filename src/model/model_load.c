/*
 * model_load.c — hyperparameters from GGUF keys and weights bound into the
 * map, with every shape and type checked before the first forward pass.
 *
 * Keys read (ARCH = general.architecture, a family of arch.h):
 *   ARCH.block_count, ARCH.embedding_length, ARCH.feed_forward_length,
 *   ARCH.attention.head_count, ARCH.attention.head_count_kv (default: heads),
 *   ARCH.attention.key_length / value_length (default n_embd / n_head),
 *   ARCH.attention.layer_norm_rms_epsilon, ARCH.rope.freq_base (10000),
 *   ARCH.rope.dimension_count (head_dim), ARCH.rope.scaling.type/factor
 *   (linear; "llama3" where the rope_freqs tensor holds the factors),
 *   ARCH.attention.sliding_window and ARCH.rope.freq_base_swa (families
 *   with sliding layers; the base defaults to the family's),
 *   ARCH.context_length, ARCH.rope.scaling.original_context_length
 *   (default: the context length) and ARCH.rope.scaling.attn_factor (1).
 * Tensors: token_embd, output_norm, output (absent: tied to token_embd),
 * rope_freqs and the pair rope_factors_long / rope_factors_short (Phi-3's
 * longrope; each optional, F32 [rope_dim / 2], finite and > 0), and per
 * layer blk.N.{attn_norm, attn_q, attn_k, attn_v (or the fused attn_qkv),
 * attn_output, ffn_norm, ffn_gate, ffn_up (or the fused gate/up ffn_up),
 * ffn_down} plus the family's own: Q/K/V biases, attn_q_norm /
 * attn_k_norm, post_attention_norm / post_ffw_norm.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model.h"
#include "model/bind.h"

static kvik_status get_u32(const struct gguf *g, const char *arch, const char *suffix, bool required,
                           uint32_t def, uint32_t *out, struct kvik_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    kvik_status st = gguf_get_u32(g, key, out, err);
    if (st == KVIK_ERR_NOT_FOUND && !required) {
        *out = def;
        return KVIK_OK;
    }
    if (st == KVIK_ERR_NOT_FOUND) return err_set(err, KVIK_ERR_FORMAT, "model: missing key '%s'", key);
    return st;
}

static kvik_status get_f32(const struct gguf *g, const char *arch, const char *suffix, bool required,
                           float def, float *out, struct kvik_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    kvik_status st = gguf_get_f32(g, key, out, err);
    if (st == KVIK_ERR_NOT_FOUND && !required) {
        *out = def;
        return KVIK_OK;
    }
    if (st == KVIK_ERR_NOT_FOUND) return err_set(err, KVIK_ERR_FORMAT, "model: missing key '%s'", key);
    return st;
}

/* Binds rows [r0, r0 + rows) of a 2-D weight [cols] -> [total] (a fused
 * matrix's part; r0 = 0, rows = total: the whole). */
kvik_status model_bind_rows(const struct gguf *g, const char *name, int64_t cols, int64_t total, int64_t r0,
                             int64_t rows, struct tensor_matrix *out, struct kvik_err *err) {
    int64_t i = gguf_find_tensor(g, name);
    if (i < 0) return err_set(err, KVIK_ERR_FORMAT, "model: missing tensor '%s'", name);
    const struct gguf_tensor *t = gguf_tensor(g, i);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != total)
        return err_set(err, KVIK_ERR_FORMAT,
                       "model: tensor '%s' has shape [%lld, %lld] (%d dims), expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)t->ne[1], t->n_dims, (long long)cols, (long long)total);
    const struct type_traits *tt = tensor_type_traits(t->type);
    if (!tt || !tensor_kernels_best()->vec_dot[t->type] || !tt->to_float)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which kvik cannot multiply",
                       name, tensor_type_name(t->type));
    size_t rb = tensor_row_size(t->type, cols);
    *out = (struct tensor_matrix){.type = t->type, .rows = rows, .cols = cols, .row_bytes = rb,
                                  .data = (const uint8_t *)t->data + (size_t)r0 * rb};
    return KVIK_OK;
}

kvik_status model_bind_matrix(const struct gguf *g, const char *name, int64_t cols, int64_t rows,
                               struct tensor_matrix *out, struct kvik_err *err) {
    return model_bind_rows(g, name, cols, rows, 0, rows, out, err);
}

/* Binds a vector of n F32 values (a norm's weights, a bias); an optional
 * one that is absent leaves *out NULL. */
kvik_status model_bind_vector(const struct gguf *g, const char *name, int64_t n, bool optional, const float **out,
                               struct kvik_err *err) {
    *out = NULL;
    int64_t i = gguf_find_tensor(g, name);
    if (i < 0 && optional) return KVIK_OK;
    if (i < 0) return err_set(err, KVIK_ERR_FORMAT, "model: missing tensor '%s'", name);
    const struct gguf_tensor *t = gguf_tensor(g, i);
    if (t->type != TENSOR_TYPE_F32 || t->n_elems != n)
        return err_set(err, KVIK_ERR_FORMAT, "model: vector '%s' must be F32 of %lld values (is %s, %lld)", name,
                       (long long)n, tensor_type_name(t->type), (long long)t->n_elems);
    if ((uintptr_t)t->data % sizeof(float))
        return err_set(err, KVIK_ERR_FORMAT, "model: vector '%s' is not 4-byte aligned in the file", name);
    *out = t->data;
    return KVIK_OK;
}

/* Binds an optional vector of n RoPE frequency factors: each finite and
 * > 0 (an angle is divided by it). */
static kvik_status bind_factors(const struct gguf *g, const char *name, int64_t n, const float **out,
                                struct kvik_err *err) {
    kvik_status st = model_bind_vector(g, name, n, true, out, err);
    for (int64_t i = 0; !st && *out && i < n; i++) {
        float v = (*out)[i];
        if (!(isfinite(v) && v > 0.0f)) {
            *out = NULL;
            return err_set(err, KVIK_ERR_FORMAT, "model: '%s' value %lld is %g (factors must be finite and > 0)",
                           name, (long long)i, (double)v);
        }
    }
    return st;
}

static kvik_status bind_norm(const struct gguf *g, const char *name, int64_t n, const float **out,
                             struct kvik_err *err) {
    return model_bind_vector(g, name, n, false, out, err);
}

static kvik_status read_hparams(const struct gguf *g, struct model_hparams *hp, const struct model_arch **arch_out,
                                struct kvik_err *err) {
    struct gguf_str a;
    kvik_status st = gguf_get_str(g, "general.architecture", &a, err);
    if (st) return st == KVIK_ERR_NOT_FOUND ? err_set(err, KVIK_ERR_FORMAT, "model: no general.architecture") : st;
    char arch[32];
    if (a.len == 0 || a.len >= sizeof arch) return err_set(err, KVIK_ERR_FORMAT, "model: bad architecture name");
    memcpy(arch, a.ptr, a.len);
    arch[a.len] = 0;
    const struct model_arch *fam = model_arch_find(arch);
    if (!fam)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "model: architecture '%s' is not supported (kvik runs %s)", arch,
                       model_arch_names());
    *arch_out = fam;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, n_ctx, rope_dim;
    if ((st = get_u32(g, arch, "block_count", true, 0, &n_layer, err)) ||
        (st = get_u32(g, arch, "embedding_length", true, 0, &n_embd, err)) ||
        (st = get_u32(g, arch, "feed_forward_length", true, 0, &n_ff, err)) ||
        (st = get_u32(g, arch, "attention.head_count", true, 0, &n_head, err)) ||
        (st = get_u32(g, arch, "attention.head_count_kv", false, n_head, &n_head_kv, err)) ||
        (st = get_u32(g, arch, "context_length", false, 2048, &n_ctx, err)) ||
        (st = get_f32(g, arch, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err)) ||
        (st = get_f32(g, arch, "rope.freq_base", false, 10000.0f, &hp->rope_base, err)))
        return st;
    /* the head size: ARCH.attention.key_length where the file has it (Gemma,
     * Qwen3, Llama 3.2), else the width split among the heads */
    uint32_t key_len = n_head >= 1 && n_head <= n_embd ? n_embd / n_head : 0, value_len;
    char kl_key[128];
    snprintf(kl_key, sizeof kl_key, "%s.attention.key_length", arch);
    bool has_key_len = gguf_find_key(g, kl_key) >= 0;
    if ((st = get_u32(g, arch, "attention.key_length", false, key_len, &key_len, err))) return st;
    if ((st = get_u32(g, arch, "attention.value_length", false, key_len, &value_len, err))) return st;
    if (n_layer < 1 || n_layer > 1024 || n_embd < 1 || n_embd > 65536 || n_ff < 1 || n_ff > 1 << 20 ||
        n_head < 1 || n_head > n_embd || n_head_kv < 1 || n_head % n_head_kv ||
        (!has_key_len && n_embd % n_head) || key_len < 2 || key_len > 1024 || key_len % 2 ||
        (uint64_t)n_head * key_len > 1 << 20)
        return err_set(err, KVIK_ERR_FORMAT,
                       "model: inconsistent hyperparameters (layers %u, width %u, ff %u, heads %u/%u, head size %u)",
                       n_layer, n_embd, n_ff, n_head, n_head_kv, key_len);
    if (value_len != key_len)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "model: value heads of %u differ from key heads of %u", value_len,
                       key_len);
    hp->n_layer = (int)n_layer;
    hp->n_embd = (int)n_embd;
    hp->n_ff = (int)n_ff;
    hp->n_head = (int)n_head;
    hp->n_head_kv = (int)n_head_kv;
    hp->head_dim = (int)key_len;
    hp->attn_scale = 1.0f / sqrtf((float)key_len);
    hp->n_ctx_train = (int)n_ctx;
    if ((st = get_u32(g, arch, "rope.dimension_count", false, (uint32_t)hp->head_dim, &rope_dim, err))) return st;
    if (rope_dim == 0 || rope_dim > (uint32_t)hp->head_dim || rope_dim % 2)
        return err_set(err, KVIK_ERR_FORMAT, "model: rope.dimension_count %u invalid for head size %d", rope_dim,
                       hp->head_dim);
    hp->rope_dim = (int)rope_dim;
    hp->rope_scale = 1.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    struct gguf_str stype;
    /* "llama3": the factors are the rope_freqs tensor's, bound with the weights */
    bool none = gguf_get_str(g, key, &stype, NULL) != KVIK_OK || (stype.len == 4 && !memcmp(stype.ptr, "none", 4)) ||
                (stype.len == 6 && !memcmp(stype.ptr, "llama3", 6));
    if (!none) {
        if (!(stype.len == 6 && !memcmp(stype.ptr, "linear", 6)))
            return err_set(err, KVIK_ERR_UNSUPPORTED, "model: rope scaling '%.*s' is not supported",
                           (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
        float factor = 1.0f;
        if ((st = get_f32(g, arch, "rope.scaling.factor", false, 1.0f, &factor, err))) return st;
        if (!(factor > 0.0f)) return err_set(err, KVIK_ERR_FORMAT, "model: rope scaling factor %g", factor);
        hp->rope_scale = 1.0f / factor;
    }
    uint32_t n_orig;
    if ((st = get_u32(g, arch, "rope.scaling.original_context_length", false, n_ctx, &n_orig, err)) ||
        (st = get_f32(g, arch, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor, err)))
        return st;
    if (n_orig < 1 || n_orig > INT32_MAX)
        return err_set(err, KVIK_ERR_FORMAT, "model: rope.scaling.original_context_length %u out of range", n_orig);
    if (!(hp->rope_attn_factor > 0.0f && hp->rope_attn_factor < 1e3f))
        return err_set(err, KVIK_ERR_FORMAT, "model: rope.scaling.attn_factor %g out of range",
                       (double)hp->rope_attn_factor);
    hp->n_ctx_orig = (int)n_orig;
    hp->n_swa = 0;
    /* older Gemma 3 files lack the key: the family's base then */
    if ((st = get_f32(g, arch, "rope.freq_base_swa", false,
                      fam->swa_rope_base > 0 ? fam->swa_rope_base : hp->rope_base, &hp->rope_base_swa, err)))
        return st;
    if (fam->swa_period) {
        uint32_t w;
        if ((st = get_u32(g, arch, "attention.sliding_window", false, 0, &w, err))) return st;
        if (w > 1 << 24) return err_set(err, KVIK_ERR_FORMAT, "model: sliding window %u out of range", w);
        hp->n_swa = (int)w;
    }
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f) || !(hp->rope_base > 0.0f) || !(hp->rope_base_swa > 0.0f))
        return err_set(err, KVIK_ERR_FORMAT, "model: rms epsilon %g or rope base %g out of range", hp->rms_eps,
                       hp->rope_base);
    return KVIK_OK;
}

/* Layer l's weights, as its family lays them out; which layers slide. */
static kvik_status bind_layer(struct model *m, int l, struct layer_weights *L, struct kvik_err *err) {
    const struct model_hparams *hp = &m->hp;
    const struct model_arch *a = m->arch;
    const struct gguf *g = m->file;
    int64_t d = hp->n_embd, ff = hp->n_ff, hd = hp->head_dim;
    int64_t q_dim = (int64_t)hp->n_head * hd, kv_dim = (int64_t)hp->n_head_kv * hd;
    char name[96];
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", l, s), name)
    kvik_status st;
    if ((st = bind_norm(g, NAME("attn_norm.weight"), d, &L->attn_norm, err)) ||
        (st = bind_norm(g, NAME("ffn_norm.weight"), d, &L->ffn_norm, err)) ||
        (st = model_bind_matrix(g, NAME("attn_output.weight"), q_dim, d, &L->wo, err)) ||
        (st = model_bind_matrix(g, NAME("ffn_down.weight"), ff, d, &L->w_down, err)))
        return st;
    if (a->fused_qkv) {
        int64_t total = q_dim + 2 * kv_dim;
        if ((st = model_bind_rows(g, NAME("attn_qkv.weight"), d, total, 0, q_dim, &L->wq, err)) ||
            (st = model_bind_rows(g, NAME("attn_qkv.weight"), d, total, q_dim, kv_dim, &L->wk, err)) ||
            (st = model_bind_rows(g, NAME("attn_qkv.weight"), d, total, q_dim + kv_dim, kv_dim, &L->wv, err)))
            return st;
    } else if ((st = model_bind_matrix(g, NAME("attn_q.weight"), d, q_dim, &L->wq, err)) ||
               (st = model_bind_matrix(g, NAME("attn_k.weight"), d, kv_dim, &L->wk, err)) ||
               (st = model_bind_matrix(g, NAME("attn_v.weight"), d, kv_dim, &L->wv, err))) {
        return st;
    }
    if (a->fused_gate_up) {
        if ((st = model_bind_rows(g, NAME("ffn_up.weight"), d, 2 * ff, 0, ff, &L->w_gate, err)) ||
            (st = model_bind_rows(g, NAME("ffn_up.weight"), d, 2 * ff, ff, ff, &L->w_up, err)))
            return st;
    } else if ((st = model_bind_matrix(g, NAME("ffn_gate.weight"), d, ff, &L->w_gate, err)) ||
               (st = model_bind_matrix(g, NAME("ffn_up.weight"), d, ff, &L->w_up, err))) {
        return st;
    }
    if (a->qkv_bias && ((st = model_bind_vector(g, NAME("attn_q.bias"), q_dim, true, &L->bq, err)) ||
                        (st = model_bind_vector(g, NAME("attn_k.bias"), kv_dim, true, &L->bk, err)) ||
                        (st = model_bind_vector(g, NAME("attn_v.bias"), kv_dim, true, &L->bv, err))))
        return st;
    if (a->qk_norm && ((st = bind_norm(g, NAME("attn_q_norm.weight"), hd, &L->q_norm, err)) ||
                       (st = bind_norm(g, NAME("attn_k_norm.weight"), hd, &L->k_norm, err))))
        return st;
    if (a->post_norms && ((st = bind_norm(g, NAME("post_attention_norm.weight"), d, &L->post_attn_norm, err)) ||
                          (st = bind_norm(g, NAME("post_ffw_norm.weight"), d, &L->post_ffn_norm, err))))
        return st;
#undef NAME
    bool slides = a->swa_period > 0 && hp->n_swa > 0 && (l + 1) % a->swa_period != 0;
    L->window = slides ? hp->n_swa : 0;
    L->rope_set = slides ? 1 : 0;
    return KVIK_OK;
}

/* Every matrix product reads (the projections, not the embedding rows). */
static size_t product_matrices(struct model *m, struct tensor_matrix **mats) {
    size_t n = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        struct layer_weights *L = &m->layers[l];
        struct tensor_matrix *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lm / sizeof *lm; i++) mats[n++] = lm[i];
    }
    mats[n++] = &m->output;
    return n;
}

/* The mapped file's pages wholly inside [p, p + n) leave this process's
 * memory (they stay in the page cache; a later read, such as an embedding
 * row of a tied output matrix, maps them again). */
static void drop_pages(const void *p, size_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

kvik_status model_repack_matrices(struct tensor_matrix *const *mats, size_t n, void **panels, struct kvik_err *err) {
    *panels = NULL;
    const char *env = getenv("KVIK_REPACK");
    if (env && !strcmp(env, "0")) return KVIK_OK;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += (tensor_repack_size(mats[i]) + 63) & ~(size_t)63;
    if (!total) return KVIK_OK;
    *panels = mem_alloc_aligned(total);
    if (!*panels) return err_set(err, KVIK_ERR_NOMEM, "model: out of memory for %zu bytes of repacked weights", total);
    uint8_t *p = *panels;
    for (size_t i = 0; i < n; i++) {
        size_t sz = tensor_repack_size(mats[i]);
        if (!sz) continue;
        tensor_repack(mats[i], p);
        mats[i]->panel = p;
        p += (sz + 63) & ~(size_t)63;
        drop_pages(mats[i]->data, (size_t)mats[i]->rows * mats[i]->row_bytes);
    }
    return KVIK_OK;
}

static kvik_status repack_weights(struct model *m, struct kvik_err *err) {
    size_t cap = (size_t)m->hp.n_layer * 7 + 1;
    struct tensor_matrix **mats = malloc(cap * sizeof *mats);
    if (!mats) return err_set(err, KVIK_ERR_NOMEM, "model: out of memory");
    size_t n = product_matrices(m, mats);
    kvik_status st = model_repack_matrices(mats, n, &m->panels, err);
    free(mats);
    return st;
}

/* struct model.identity: cheap, touches a few pages beyond the header. */
static uint64_t file_identity(const struct gguf *g) {
    uint64_t size = gguf_file_size(g), off = gguf_data_offset(g);
    if (off > size) off = size;
    uint64_t h = hash64(g->data, (size_t)off, size), rest = size - off, n = rest < 4096 ? rest : 4096;
    h = hash64(g->data + off, (size_t)n, h);
    return hash64(g->data + size - n, (size_t)n, h);
}

kvik_status model_load(const char *path, struct model **out, struct kvik_err *err) {
    *out = NULL;
    struct model *m = calloc(1, sizeof *m);
    if (!m) return err_set(err, KVIK_ERR_NOMEM, "model: out of memory");
    kvik_status st = gguf_open(path, &m->file, err);
    if (st) goto fail;
    struct model_hparams *hp = &m->hp;
    if ((st = read_hparams(m->file, hp, &m->arch, err))) goto fail;
    m->identity = file_identity(m->file);
    int64_t emb = gguf_find_tensor(m->file, "token_embd.weight");
    if (emb < 0) {
        st = err_set(err, KVIK_ERR_FORMAT, "model: missing tensor 'token_embd.weight'");
        goto fail;
    }
    hp->n_vocab = (int)gguf_tensor(m->file, emb)->ne[1];
    if ((st = model_bind_matrix(m->file, "token_embd.weight", hp->n_embd, hp->n_vocab, &m->token_embd, err)) ||
        (st = bind_norm(m->file, "output_norm.weight", hp->n_embd, &m->output_norm, err)))
        goto fail;
    hp->tied_output = gguf_find_tensor(m->file, "output.weight") < 0;
    if (hp->tied_output) m->output = m->token_embd;
    else if ((st = model_bind_matrix(m->file, "output.weight", hp->n_embd, hp->n_vocab, &m->output, err)))
        goto fail;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = err_set(err, KVIK_ERR_NOMEM, "model: out of memory");
        goto fail;
    }
    int64_t n_fac = hp->rope_dim / 2;
    if ((st = bind_factors(m->file, "rope_freqs.weight", n_fac, &m->rope_freqs, err)) ||
        (st = bind_factors(m->file, "rope_factors_long.weight", n_fac, &m->rope_long, err)) ||
        (st = bind_factors(m->file, "rope_factors_short.weight", n_fac, &m->rope_short, err)))
        goto fail;
    if (!m->rope_long != !m->rope_short) {
        st = err_set(err, KVIK_ERR_FORMAT, "model: '%s' without '%s' (longrope needs both)",
                     m->rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                     m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
        goto fail;
    }
    for (int l = 0; l < hp->n_layer; l++) {
        struct layer_weights *L = &m->layers[l];
        if ((st = bind_layer(m, l, L, err))) goto fail;
        const struct tensor_matrix *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
            m->weight_bytes += mats[i]->row_bytes * (uint64_t)mats[i]->rows;
        m->weight_bytes += 2 * sizeof(float) * (uint64_t)hp->n_embd;
    }
    m->weight_bytes += m->output.row_bytes * (uint64_t)m->output.rows + sizeof(float) * (uint64_t)hp->n_embd;
    if ((st = repack_weights(m, err))) goto fail;
    *out = m;
    return KVIK_OK;
fail:
    model_free(m);
    return st;
}

void model_free(struct model *m) {
    if (!m) return;
    free(m->layers);
    mem_free(m->panels);
    gguf_close(m->file);
    free(m);
}

/* llama.cpp compares its context per sequence, rounded up to a multiple of
 * 256, with the original length; kvik compares the longest sequence as
 * configured. The two agree where the original length is a multiple of 256
 * (Phi-3: 4096). */
const float *model_rope_factors(const struct model *m, int n_ctx) {
    if (m->rope_freqs) return m->rope_freqs;
    return n_ctx > m->hp.n_ctx_orig ? m->rope_long : m->rope_short;
}

uint64_t model_decode_bytes(const struct model *m) {
    return m->weight_bytes + m->token_embd.row_bytes; /* plus one embedding row */
}
