/*
 * quant_policy.c — which type each tensor of a file gets (quantize.h's
 * list), as llama.cpp 0.3.36's llama-quantize chooses: the file types and
 * their default types, the tensors kept as they are, the tensor categories,
 * and the mix rules as one table of (category, file type, conditions) ->
 * type, searched in order, first match wins.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/quantize.h"
#include "tensor/tensor.h"
#include "tools/quantize.h"

/* ---- file types ----------------------------------------------------------- */

struct ftype_row {
    const char *name;
    int ftype;
    int type;   /* default tensor type */
    bool alias; /* another name of a mix listed under its own */
};

/* llama-quantize's names, in its order (a numeric id takes the first row). */
static const struct ftype_row k_ftypes[] = {
    {"Q4_0", QUANT_FTYPE_Q4_0, TENSOR_TYPE_Q4_0, false},
    {"Q4_1", QUANT_FTYPE_Q4_1, TENSOR_TYPE_Q4_1, false},
    {"Q5_0", QUANT_FTYPE_Q5_0, TENSOR_TYPE_Q5_0, false},
    {"Q5_1", QUANT_FTYPE_Q5_1, TENSOR_TYPE_Q5_1, false},
    {"Q2_K", QUANT_FTYPE_Q2_K, TENSOR_TYPE_Q2_K, false},
    {"Q2_K_S", QUANT_FTYPE_Q2_K_S, TENSOR_TYPE_Q2_K, false},
    {"Q3_K_S", QUANT_FTYPE_Q3_K_S, TENSOR_TYPE_Q3_K, false},
    {"Q3_K_M", QUANT_FTYPE_Q3_K_M, TENSOR_TYPE_Q3_K, false},
    {"Q3_K", QUANT_FTYPE_Q3_K_M, TENSOR_TYPE_Q3_K, true},
    {"Q3_K_L", QUANT_FTYPE_Q3_K_L, TENSOR_TYPE_Q3_K, false},
    {"Q4_K_S", QUANT_FTYPE_Q4_K_S, TENSOR_TYPE_Q4_K, false},
    {"Q4_K_M", QUANT_FTYPE_Q4_K_M, TENSOR_TYPE_Q4_K, false},
    {"Q4_K", QUANT_FTYPE_Q4_K_M, TENSOR_TYPE_Q4_K, true},
    {"Q5_K_S", QUANT_FTYPE_Q5_K_S, TENSOR_TYPE_Q5_K, false},
    {"Q5_K_M", QUANT_FTYPE_Q5_K_M, TENSOR_TYPE_Q5_K, false},
    {"Q5_K", QUANT_FTYPE_Q5_K_M, TENSOR_TYPE_Q5_K, true},
    {"Q6_K", QUANT_FTYPE_Q6_K, TENSOR_TYPE_Q6_K, false},
    {"Q8_0", QUANT_FTYPE_Q8_0, TENSOR_TYPE_Q8_0, false},
    {"F16", QUANT_FTYPE_F16, TENSOR_TYPE_F16, false},
    {"BF16", QUANT_FTYPE_BF16, TENSOR_TYPE_BF16, false},
    {"F32", QUANT_FTYPE_F32, TENSOR_TYPE_F32, false},
};
#define N_FTYPES (sizeof k_ftypes / sizeof k_ftypes[0])

int quant_ftype_parse(const char *s, const char **canonical) {
    if (!s || !*s) return -1;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (!strcasecmp(s, k_ftypes[i].name)) {
            if (canonical) *canonical = quant_ftype_name(k_ftypes[i].ftype);
            return k_ftypes[i].ftype;
        }
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s) return -1;
    for (size_t i = 0; i < N_FTYPES; i++)
        if (k_ftypes[i].ftype == v) {
            if (canonical) *canonical = quant_ftype_name(k_ftypes[i].ftype);
            return k_ftypes[i].ftype;
        }
    return -1;
}

static const struct ftype_row *ftype_row(int ftype) {
    for (size_t i = 0; i < N_FTYPES; i++)
        if (k_ftypes[i].ftype == ftype && !k_ftypes[i].alias) return &k_ftypes[i];
    return NULL;
}

const char *quant_ftype_name(int ftype) {
    const struct ftype_row *r = ftype_row(ftype);
    return r ? r->name : NULL;
}

int quant_ftype_default_type(int ftype) {
    const struct ftype_row *r = ftype_row(ftype);
    return r ? r->type : -1;
}

void quant_ftype_list(FILE *f) {
    for (size_t i = 0; i < N_FTYPES; i++) {
        if (k_ftypes[i].alias)
            fprintf(f, "  %2d  or  %-7s: alias of %s\n", k_ftypes[i].ftype, k_ftypes[i].name,
                    quant_ftype_name(k_ftypes[i].ftype));
        else
            fprintf(f, "  %2d  or  %s\n", k_ftypes[i].ftype, k_ftypes[i].name);
    }
}

/* ---- tensors kept as they are --------------------------------------------- */

/* A name holding one of these is never converted. */
static const char *const k_keep_substr[] = {
    "_norm.weight",            /* norms */
    "ffn_gate_inp.weight",     /* MoE routers */
    "ffn_gate_tid2eid.weight", /* token -> expert routing tables */
    "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight",
    "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
    "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
    "a.rvq.codebook", "mm.a.code_embd",
};
/* ... and these whole names (position embeddings and token types). */
static const char *const k_keep_name[] = {"position_embd.weight", "token_types.weight"};

/* Dimensions up to the last one > 1 (ggml_n_dims). */
static int tensor_rank(const struct gguf_tensor *t) {
    for (int d = GGUF_MAX_DIMS - 1; d >= 1; d--)
        if (t->ne[d] > 1) return d + 1;
    return 1;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

static bool tensor_may_convert(const struct gguf_tensor *t, bool leave_output) {
    if (tensor_rank(t) < 2 || !ends_with(t->name, "weight")) return false;
    if (leave_output && !strcmp(t->name, "output.weight")) return false;
    for (size_t i = 0; i < sizeof k_keep_substr / sizeof *k_keep_substr; i++)
        if (strstr(t->name, k_keep_substr[i])) return false;
    for (size_t i = 0; i < sizeof k_keep_name / sizeof *k_keep_name; i++)
        if (!strcmp(t->name, k_keep_name[i])) return false;
    return true;
}

/* ---- categories ----------------------------------------------------------- */

enum cat {
    CAT_OTHER,
    CAT_TOKEN_EMBD,
    CAT_OUTPUT,
    CAT_ATTN_V,   /* attn_v, and the fused attn_qkv and attn_kv_b, which llama.cpp treats alike */
    CAT_ATTN_K,
    CAT_ATTN_Q,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
};

/* First match wins (after the exact names output.weight, token_embd). */
static const struct {
    const char *substr;
    enum cat cat;
} k_cats[] = {
    {"attn_qkv.weight", CAT_ATTN_V}, {"attn_kv_b.weight", CAT_ATTN_V}, {"attn_v.weight", CAT_ATTN_V},
    {"attn_k.weight", CAT_ATTN_K},   {"attn_q.weight", CAT_ATTN_Q},    {"attn_output.weight", CAT_ATTN_OUTPUT},
    {"ffn_up", CAT_FFN_UP},          {"ffn_gate", CAT_FFN_GATE},       {"ffn_down", CAT_FFN_DOWN},
};

static enum cat tensor_cat(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    for (size_t i = 0; i < sizeof k_cats / sizeof *k_cats; i++)
        if (strstr(name, k_cats[i].substr)) return k_cats[i].cat;
    return CAT_OTHER;
}

/* ---- mix rules ------------------------------------------------------------ */

/* Conditions of a rule. i and n are the layer and layer count of the rule's
 * category: attention V counts its own tensors, FFN down the model's
 * layers. */
enum {
    P_GQA4 = 1 << 0,     /* n_head / n_head_kv >= 4 */
    P_LT2 = 1 << 1,      /* i < 2 */
    P_LT4 = 1 << 2,      /* i < 4 */
    P_LT_8TH = 1 << 3,   /* i < n / 8 */
    P_LT_16TH = 1 << 4,  /* i < n / 16 */
    P_MORE_BITS = 1 << 5, /* i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 */
    P_IMATRIX = 1 << 6,  /* an importance matrix is used */
    P_FALCON = 1 << 7,   /* general.architecture is falcon */
    P_EXPERT8 = 1 << 8,  /* exactly 8 experts */
};

#define ANY_FTYPE (-1)

struct rule {
    enum cat cat;
    int ftype;       /* or ANY_FTYPE */
    unsigned need;   /* conditions that must hold */
    unsigned absent; /* conditions that must not */
    int type;
};

#define T(x) TENSOR_TYPE_##x
#define F(x) QUANT_FTYPE_##x
static const struct rule k_rules[] = {
    /* attention V */
    {CAT_ATTN_V, F(Q2_K), P_GQA4, 0, T(Q4_K)},
    {CAT_ATTN_V, F(Q2_K), 0, 0, T(Q3_K)},
    {CAT_ATTN_V, F(Q2_K_S), P_GQA4, 0, T(Q4_K)},
    {CAT_ATTN_V, F(Q3_K_M), P_LT2, 0, T(Q5_K)},
    {CAT_ATTN_V, F(Q3_K_M), 0, 0, T(Q4_K)},
    {CAT_ATTN_V, F(Q3_K_L), 0, 0, T(Q5_K)},
    {CAT_ATTN_V, F(Q4_K_M), P_MORE_BITS, 0, T(Q6_K)},
    {CAT_ATTN_V, F(Q5_K_M), P_MORE_BITS, 0, T(Q6_K)},
    {CAT_ATTN_V, F(Q4_K_S), P_LT4, 0, T(Q5_K)},
    /* attention K */
    {CAT_ATTN_K, ANY_FTYPE, P_EXPERT8, 0, T(Q8_0)},
    /* FFN down */
    {CAT_FFN_DOWN, F(Q2_K), 0, 0, T(Q3_K)},
    {CAT_FFN_DOWN, F(Q2_K_S), P_LT_8TH, 0, T(Q4_K)},
    {CAT_FFN_DOWN, F(Q3_K_M), P_LT_16TH, 0, T(Q5_K)},
    {CAT_FFN_DOWN, F(Q3_K_M), 0, P_FALCON, T(Q4_K)},
    {CAT_FFN_DOWN, F(Q3_K_M), P_MORE_BITS, 0, T(Q4_K)},
    {CAT_FFN_DOWN, F(Q3_K_M), 0, 0, T(Q3_K)},
    {CAT_FFN_DOWN, F(Q3_K_L), P_FALCON, 0, T(Q4_K)},
    {CAT_FFN_DOWN, F(Q3_K_L), 0, 0, T(Q5_K)},
    {CAT_FFN_DOWN, F(Q4_K_M), P_FALCON | P_LT_16TH, 0, T(Q6_K)},
    {CAT_FFN_DOWN, F(Q4_K_M), P_FALCON | P_MORE_BITS, 0, T(Q5_K)},
    {CAT_FFN_DOWN, F(Q4_K_M), P_FALCON, 0, T(Q4_K)},
    {CAT_FFN_DOWN, F(Q4_K_M), P_MORE_BITS, 0, T(Q6_K)},
    {CAT_FFN_DOWN, F(Q5_K_M), P_MORE_BITS, 0, T(Q6_K)},
    {CAT_FFN_DOWN, F(Q4_K_S), P_LT_8TH, P_FALCON, T(Q5_K)},
    {CAT_FFN_DOWN, F(Q4_0), P_IMATRIX | P_LT_8TH, 0, T(Q4_1)},
    {CAT_FFN_DOWN, F(Q5_0), P_IMATRIX | P_LT_8TH, 0, T(Q5_1)},
    /* attention output */
    {CAT_ATTN_OUTPUT, F(Q2_K), P_EXPERT8, P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q3_K_S), P_EXPERT8, P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q3_K_M), P_EXPERT8, P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q4_K_S), P_EXPERT8, P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q4_K_M), P_EXPERT8, P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q2_K), 0, P_EXPERT8 | P_FALCON, T(Q3_K)},
    {CAT_ATTN_OUTPUT, F(Q3_K_M), 0, P_EXPERT8 | P_FALCON, T(Q4_K)},
    {CAT_ATTN_OUTPUT, F(Q3_K_L), 0, P_EXPERT8 | P_FALCON, T(Q5_K)},
    {CAT_ATTN_OUTPUT, F(Q3_K_L), P_FALCON, 0, T(Q4_K)},
};
#undef T
#undef F

/* 256-weight types and the 32-weight type each falls back to. */
static const struct {
    int from, to;
} k_fallback[] = {
    {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q4_0},
    {TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_0},
    {TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_0},
    {TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q5_1},
    {TENSOR_TYPE_Q6_K, TENSOR_TYPE_Q8_0},
};

/* What the rules read about the model. */
struct model_info {
    int n_layer;
    int n_gqa;     /* n_head / n_head_kv of layer 0; 0 when n_head_kv is 0 */
    int n_expert;
    bool falcon;
    bool is_70b;   /* llama with 80 layers and grouped-query attention */
};

/* The state of one pass over the tensors. */
struct policy {
    const struct quant_params *p;
    struct model_info m;
    int default_type;
    bool has_imatrix;
    bool tied;       /* no output.weight: token_embd is the output too */
    int n_attn_v, i_attn_v;
    int i_ffn_down, i_ffn_gate, i_ffn_up;
    regex_t *res;    /* [p->n_overrides] compiled patterns */
};

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static unsigned conditions(const struct policy *s, int i, int n) {
    unsigned c = 0;
    if (s->m.n_gqa >= 4) c |= P_GQA4;
    if (i < 2) c |= P_LT2;
    if (i < 4) c |= P_LT4;
    if (i < n / 8) c |= P_LT_8TH;
    if (i < n / 16) c |= P_LT_16TH;
    if (more_bits(i, n)) c |= P_MORE_BITS;
    if (s->has_imatrix) c |= P_IMATRIX;
    if (s->m.falcon) c |= P_FALCON;
    if (s->m.n_expert == 8) c |= P_EXPERT8;
    return c;
}

static int rule_type(const struct policy *s, enum cat cat, int i, int n, int type) {
    unsigned c = conditions(s, i, n);
    for (size_t r = 0; r < sizeof k_rules / sizeof *k_rules; r++) {
        const struct rule *ru = &k_rules[r];
        if (ru->cat != cat || (ru->ftype != ANY_FTYPE && ru->ftype != s->p->ftype)) continue;
        if ((c & ru->need) != ru->need || (c & ru->absent)) continue;
        return ru->type;
    }
    return type;
}

/* The layer a per-layer rule reads: the visit counter, or with experts the
 * N of "blk.N." (their tensors need not come in layer order). */
static kvik_status layer_of(const struct policy *s, const char *name, int counter, int *out, struct kvik_err *err) {
    *out = counter;
    if (s->m.n_expert <= 1) return KVIK_OK;
    int il;
    if (sscanf(name, "blk.%d.", &il) != 1)
        return err_set(err, KVIK_ERR_FORMAT, "cannot tell the layer of tensor %s", name);
    if (il < 0 || il >= s->m.n_layer)
        return err_set(err, KVIK_ERR_FORMAT, "tensor %s: layer %d outside [0, %d)", name, il, s->m.n_layer);
    *out = il;
    return KVIK_OK;
}

/* The mix's choice for a tensor of a quantized default type. */
static kvik_status mix_type(struct policy *s, const struct gguf_tensor *t, enum cat cat, int *type,
                            struct kvik_err *err) {
    int il;
    kvik_status st;
    if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        if (s->p->output_type >= 0) {
            *type = s->p->output_type;
        } else {
            const struct type_traits *tt = tensor_type_traits(*type);
            if (s->m.falcon || t->ne[0] % tt->block_size != 0) *type = TENSOR_TYPE_Q8_0;
            else if (*type != TENSOR_TYPE_Q8_0) *type = TENSOR_TYPE_Q6_K;
        }
        return KVIK_OK;
    }
    switch (cat) {
    case CAT_TOKEN_EMBD:
        if (s->p->token_embd_type >= 0) *type = s->p->token_embd_type;
        return KVIK_OK;
    case CAT_ATTN_V:
        *type = rule_type(s, cat, s->i_attn_v, s->n_attn_v, *type);
        if (s->m.is_70b && (*type == TENSOR_TYPE_Q3_K || *type == TENSOR_TYPE_Q4_K)) *type = TENSOR_TYPE_Q5_K;
        if (s->m.n_expert == 8) *type = TENSOR_TYPE_Q8_0;
        s->i_attn_v++;
        return KVIK_OK;
    case CAT_FFN_DOWN:
        if ((st = layer_of(s, t->name, s->i_ffn_down, &il, err))) return st;
        *type = rule_type(s, cat, il, s->m.n_layer, *type);
        s->i_ffn_down++;
        return KVIK_OK;
    case CAT_FFN_GATE:
        if ((st = layer_of(s, t->name, s->i_ffn_gate, &il, err))) return st;
        s->i_ffn_gate++;
        return KVIK_OK;
    case CAT_FFN_UP:
        if ((st = layer_of(s, t->name, s->i_ffn_up, &il, err))) return st;
        s->i_ffn_up++;
        return KVIK_OK;
    default:
        *type = rule_type(s, cat, 0, s->m.n_layer, *type);
        return KVIK_OK;
    }
}

/* A 256-weight type whose blocks do not divide the rows -> its 32-weight
 * fallback, or F16 where that does not fit either. */
static int fallback_type(const struct gguf_tensor *t, int type, bool *fell) {
    const struct type_traits *tt = tensor_type_traits(type);
    *fell = false;
    if (t->ne[0] % tt->block_size == 0) return type;
    *fell = true;
    int to = type; /* a 32-weight type has nothing smaller: it goes to F16 below */
    for (size_t i = 0; i < sizeof k_fallback / sizeof *k_fallback; i++)
        if (k_fallback[i].from == type) to = k_fallback[i].to;
    if (t->ne[0] % tensor_type_traits(to)->block_size != 0) to = TENSOR_TYPE_F16;
    return to;
}

/* The first override whose pattern matches part of the name, or -1. */
static int override_type(const struct policy *s, const char *name) {
    for (int i = 0; i < s->p->n_overrides; i++)
        if (regexec(&s->res[i], name, 0, NULL, 0) == 0) return i;
    return -1;
}

static kvik_status tensor_type(struct policy *s, const struct gguf_tensor *t, bool *fell, int *out,
                               struct kvik_err *err) {
    *fell = false;
    if (!tensor_may_convert(t, s->p->leave_output)) {
        *out = t->type;
        return KVIK_OK;
    }
    enum cat cat = tensor_cat(t->name);
    if (s->p->token_embd_type >= 0 && cat == CAT_TOKEN_EMBD) {
        /* per_layer_token_embd follows it unless a pattern names it */
        if (strcmp(t->name, "per_layer_token_embd.weight") || override_type(s, t->name) < 0) {
            *out = s->p->token_embd_type;
            return KVIK_OK;
        }
    }
    if (s->p->output_type >= 0 && cat == CAT_OUTPUT) {
        *out = s->p->output_type;
        return KVIK_OK;
    }
    int type = s->default_type;
    if (tensor_type_traits(type)->is_quantized) {
        int o = override_type(s, t->name);
        if (o >= 0) {
            type = s->p->overrides[o].type;
        } else if (!s->p->pure) {
            kvik_status st = mix_type(s, t, cat, &type, err);
            if (st) return st;
        }
        type = fallback_type(t, type, fell);
    }
    *out = type;
    return KVIK_OK;
}

/* ---- the model's numbers -------------------------------------------------- */

static kvik_status arch_u32(const struct gguf *g, const char *arch, const char *suffix, bool required,
                            int64_t *out, struct kvik_err *err) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t i = gguf_find_key(g, key);
    if (i < 0) {
        if (required) return err_set(err, KVIK_ERR_FORMAT, "the file has no %s", key);
        return KVIK_ERR_NOT_FOUND;
    }
    const struct gguf_value *v = gguf_kv_value(g, i);
    struct gguf_value first;
    if (v->type == GGUF_TYPE_ARRAY) { /* per-layer values: layer 0's, as llama.cpp's n_head() */
        if (!gguf_arr_elem(v, 0, &first)) return err_set(err, KVIK_ERR_FORMAT, "%s is an empty array", key);
        v = &first;
    }
    if (!gguf_value_to_i64(v, out) || *out < 0 || *out > INT32_MAX)
        return err_set(err, KVIK_ERR_FORMAT, "%s is not a count", key);
    return KVIK_OK;
}

static kvik_status model_info_read(const struct gguf *g, struct model_info *m, struct kvik_err *err) {
    memset(m, 0, sizeof *m);
    struct gguf_str a;
    if (gguf_get_str(g, "general.architecture", &a, NULL) || a.len == 0 || a.len > 64)
        return err_set(err, KVIK_ERR_FORMAT, "the file has no general.architecture");
    char arch[65];
    memcpy(arch, a.ptr, a.len);
    arch[a.len] = 0;
    int64_t n_layer, n_head = 0, n_head_kv = -1, n_expert = 0;
    kvik_status st = arch_u32(g, arch, "block_count", true, &n_layer, err);
    if (st) return st;
    if (n_layer < 1) return err_set(err, KVIK_ERR_FORMAT, "%s.block_count is 0", arch);
    if ((st = arch_u32(g, arch, "attention.head_count", false, &n_head, err)) && st != KVIK_ERR_NOT_FOUND) return st;
    if ((st = arch_u32(g, arch, "attention.head_count_kv", false, &n_head_kv, err)) && st != KVIK_ERR_NOT_FOUND)
        return st;
    if (n_head_kv < 0) n_head_kv = n_head;
    if ((st = arch_u32(g, arch, "expert_count", false, &n_expert, err)) && st != KVIK_ERR_NOT_FOUND) return st;
    m->n_layer = (int)n_layer;
    m->n_gqa = n_head_kv > 0 ? (int)(n_head / n_head_kv) : 0;
    m->n_expert = (int)n_expert;
    m->falcon = !strcmp(arch, "falcon");
    m->is_70b = !strcmp(arch, "llama") && n_layer == 80 && n_head != n_head_kv;
    return KVIK_OK;
}

/* ---- the plan ------------------------------------------------------------- */

/* llama.cpp's tensor order: the layer of "blk.N." (-1 without), then name. */
static int name_layer(const char *name) {
    int il = -1;
    if (sscanf(name, "blk.%d.", &il) != 1) il = -1;
    return il;
}

static int order_cmp(const struct gguf *g, const struct quant_plan_tensor *a, const struct quant_plan_tensor *b) {
    const struct gguf_tensor *x = gguf_tensor(g, a->index), *y = gguf_tensor(g, b->index);
    int lx = name_layer(x->name), ly = name_layer(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Sorts v[n] into that order (a stable merge sort through tmp[n]). */
static void plan_sort(const struct gguf *g, struct quant_plan_tensor *v, struct quant_plan_tensor *tmp, int64_t n) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = order_cmp(g, &v[j], &v[i]) < 0 ? v[j++] : v[i++];
            while (i < mid) tmp[k++] = v[i++];
            while (j < hi) tmp[k++] = v[j++];
        }
        memcpy(v, tmp, (size_t)n * sizeof *v);
    }
}

void quant_plan_free(struct quant_plan *plan) {
    if (!plan) return;
    free(plan->tensors);
    memset(plan, 0, sizeof *plan);
}

static bool type_is_weight_type(int type) {
    return type >= 0 && tensor_type_traits(type) && tensor_quantize_supported(type);
}

kvik_status quant_plan_make(const struct gguf *g, const struct quant_params *p, struct quant_plan *plan,
                            struct kvik_err *err) {
    memset(plan, 0, sizeof *plan);
    struct policy s = {.p = p};
    s.default_type = quant_ftype_default_type(p->ftype);
    if (s.default_type < 0) return err_set(err, KVIK_ERR_INVALID_ARG, "unknown file type %d", p->ftype);
    if (p->output_type >= 0 && !type_is_weight_type(p->output_type))
        return err_set(err, KVIK_ERR_INVALID_ARG, "output type %s is not a weight type kvik makes",
                       tensor_type_name(p->output_type));
    if (p->token_embd_type >= 0 && !type_is_weight_type(p->token_embd_type))
        return err_set(err, KVIK_ERR_INVALID_ARG, "token embedding type %s is not a weight type kvik makes",
                       tensor_type_name(p->token_embd_type));
    s.has_imatrix = p->imatrix_path != NULL;
    kvik_status st = model_info_read(g, &s.m, err);
    if (st) return st;

    int64_t n = gguf_n_tensors(g);
    plan->tensors = calloc(n ? (size_t)n : 1, sizeof *plan->tensors);
    if (p->n_overrides > 0) s.res = calloc((size_t)p->n_overrides, sizeof *s.res);
    if (!plan->tensors || (p->n_overrides > 0 && !s.res)) {
        free(s.res);
        quant_plan_free(plan);
        return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    }
    int n_re = 0;
    for (; n_re < p->n_overrides; n_re++) {
        const struct quant_override *o = &p->overrides[n_re];
        if (!type_is_weight_type(o->type)) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "--tensor-type %s: %s is not a weight type kvik makes",
                         o->pattern, tensor_type_name(o->type));
            goto done;
        }
        int rc = regcomp(&s.res[n_re], o->pattern, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[128];
            regerror(rc, &s.res[n_re], msg, sizeof msg);
            st = err_set(err, KVIK_ERR_INVALID_ARG, "--tensor-type pattern '%s': %s", o->pattern, msg);
            goto done;
        }
    }

    plan->n_tensors = n;
    s.tied = true;
    for (int64_t i = 0; i < n; i++) {
        plan->tensors[i].index = i;
        const char *name = gguf_tensor(g, i)->name;
        enum cat cat = tensor_cat(name);
        if (cat == CAT_ATTN_V) s.n_attn_v++;
        if (cat == CAT_OUTPUT) s.tied = false;
    }
    struct quant_plan_tensor *tmp = malloc((n ? (size_t)n : 1) * sizeof *tmp);
    if (!tmp) {
        st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
        goto done;
    }
    plan_sort(g, plan->tensors, tmp, n);
    free(tmp);

    for (int64_t k = 0; k < n; k++) {
        struct quant_plan_tensor *pt = &plan->tensors[k];
        const struct gguf_tensor *t = gguf_tensor(g, pt->index);
        bool fell;
        if ((st = tensor_type(&s, t, &fell, &pt->type, err))) goto done;
        pt->convert = pt->type != t->type;
        pt->fallback = fell;
        plan->n_fallback += fell;
        if (pt->convert && pt->type == TENSOR_TYPE_Q2_K && p->ftype == QUANT_FTYPE_Q2_K_S &&
            tensor_cat(t->name) != CAT_TOKEN_EMBD && tensor_cat(t->name) != CAT_OUTPUT)
            plan->requires_imatrix = true;
        if (pt->convert && tensor_row_size(pt->type, t->ne[0]) == 0) {
            st = err_set(err, KVIK_ERR_INVALID_ARG, "tensor %s: rows of %lld do not fit %s blocks of %lld", t->name,
                         (long long)t->ne[0], tensor_type_name(pt->type),
                         (long long)tensor_type_traits(pt->type)->block_size);
            goto done;
        }
    }
    st = KVIK_OK;
done:
    for (int i = 0; i < n_re; i++) regfree(&s.res[i]);
    free(s.res);
    if (st) quant_plan_free(plan);
    return st;
}
