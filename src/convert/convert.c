/*
 * convert.c — Hugging Face directories to GGUF (convert.h): read
 * config.json and tokenizer.json with the strict JSON parser, map each
 * safetensors tensor to its llama.cpp name with its shape checked, and
 * stream the rows through a conversion callback into the GGUF writer.
 */
#include "convert/convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert/json.h"
#include "convert/safetensors.h"
#include "gguf/gguf.h"
#include "tensor/tensor.h"
#include "tools/quantize.h"

enum { MAX_SHARDS = 256, MAX_LAYERS = 1024, PATH_MAX_LEN = 4096 };

/* GGUF token types (llama.cpp's): normal, control, user-defined, unused. */
enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

enum family { FAM_BERT, FAM_LLAMA, FAM_QWEN2 };

/* One output tensor: its source and how its rows are made. */
struct out_tensor {
    char name[96];
    const struct safetensors_tensor *src;
    int type;         /* output tensor type */
    int n_dims;       /* 1 or 2 */
    int64_t ne[2];    /* GGUF order: ne[0] the row length */
    int permute;      /* > 0: rows are llama's Q/K of this many heads, reordered */
};

struct conv {
    const struct convert_params *p;
    struct kvik_err *err;
    enum family fam;
    const char *arch;
    struct json_value cfg, tok, tokcfg;
    bool has_tokcfg;
    struct safetensors *shards[MAX_SHARDS];
    int n_shards;
    bool *used[MAX_SHARDS];     /* per shard, per tensor: mapped */
    struct out_tensor *outs;
    int n_outs, cap_outs;
    int mat_type;               /* type of the matrices written */
    int64_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx, n_vocab, head_dim;
    bool classifier;            /* BertForSequenceClassification: a cross-encoder */
    int64_t n_labels;           /* its classifier's outputs */
    const char **labels;        /* [n_labels] id2label's names, into cfg (NULL: none given) */
    /* the vocabulary */
    char **tokens;              /* [n_tokens] owned */
    int32_t *types;             /* [n_tokens] */
    int64_t n_tokens;
    char **merges;              /* [n_merges] owned (BPE) */
    int64_t n_merges;
};

/* ---- JSON helpers ------------------------------------------------------ */

static const struct json_value *jget(const struct json_value *o, const char *key) {
    if (!o || o->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < o->len; i++)
        if (strlen(o->members[i].key) == o->members[i].key_len && !strcmp(o->members[i].key, key))
            return &o->members[i].value;
    return NULL;
}

static const char *jstr(const struct json_value *v) {
    return v && v->type == JSON_STRING && strlen(v->str) == v->len ? v->str : NULL;
}

/* A special token as tokenizer_config.json writes it: "[CLS]" or {"content": "[CLS]"}. */
static const char *jtoken(const struct json_value *v) {
    return v && v->type == JSON_OBJECT ? jstr(jget(v, "content")) : jstr(v);
}

static kvik_status read_json(struct conv *c, const char *name, bool required, struct json_value *out,
                             bool *found) {
    char path[PATH_MAX_LEN];
    if (snprintf(path, sizeof path, "%s/%s", c->p->dir, name) >= (int)sizeof path)
        return err_set(c->err, KVIK_ERR_INVALID_ARG, "%s: path too long", c->p->dir);
    if (found) *found = false;
    if (!required && access(path, F_OK) != 0) return KVIK_OK;
    struct mapped_file mf;
    kvik_status st = file_map(&mf, path, c->err);
    if (st) return st;
    struct kvik_err jerr = {0};
    st = json_parse((const char *)mf.data, mf.size, out, &jerr);
    file_unmap(&mf);
    if (st) return err_set(c->err, st, "%s: %s", path, jerr.msg);
    if (out->type != JSON_OBJECT) {
        json_free(out);
        return err_set(c->err, KVIK_ERR_FORMAT, "%s: not a JSON object", path);
    }
    if (found) *found = true;
    return KVIK_OK;
}

/* config.json's integer key (any of the names, first present wins), or dflt
 * (< 0: required). Values must be in 1..2^31. */
static kvik_status cfg_int(struct conv *c, const char *key, const char *alt, int64_t dflt, int64_t *out) {
    const struct json_value *v = jget(&c->cfg, key);
    if (!v && alt) v = jget(&c->cfg, alt);
    if (!v || v->type == JSON_NULL) {
        if (dflt < 0) return err_set(c->err, KVIK_ERR_FORMAT, "config.json: no %s", key);
        *out = dflt;
        return KVIK_OK;
    }
    if (v->type != JSON_UINT || v->u < 1 || v->u > ((uint64_t)1 << 31))
        return err_set(c->err, KVIK_ERR_FORMAT, "config.json: %s is not a positive integer", key);
    *out = (int64_t)v->u;
    return KVIK_OK;
}

static kvik_status cfg_num(struct conv *c, const char *key, double dflt, double *out) {
    const struct json_value *v = jget(&c->cfg, key);
    if (!v || v->type == JSON_NULL) {
        if (isnan(dflt)) return err_set(c->err, KVIK_ERR_FORMAT, "config.json: no %s", key);
        *out = dflt;
        return KVIK_OK;
    }
    if ((v->type != JSON_UINT && v->type != JSON_NUMBER) || !isfinite(v->num) || v->num <= 0)
        return err_set(c->err, KVIK_ERR_FORMAT, "config.json: %s is not a positive number", key);
    *out = v->num;
    return KVIK_OK;
}

/* ---- weights ----------------------------------------------------------- */

static kvik_status open_shard(struct conv *c, const char *file) {
    if (!*file || strchr(file, '/') || !strcmp(file, "..") || !strcmp(file, "."))
        return err_set(c->err, KVIK_ERR_FORMAT, "model.safetensors.index.json: bad file name \"%.64s\"", file);
    if (c->n_shards == MAX_SHARDS)
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "more than %d safetensors shards", MAX_SHARDS);
    char path[PATH_MAX_LEN];
    if (snprintf(path, sizeof path, "%s/%s", c->p->dir, file) >= (int)sizeof path)
        return err_set(c->err, KVIK_ERR_INVALID_ARG, "%s: path too long", c->p->dir);
    struct kvik_err serr = {0};
    kvik_status st = safetensors_open(path, &c->shards[c->n_shards], &serr);
    if (st) return err_set(c->err, st, "%s: %s", path, serr.msg);
    int64_t n = safetensors_n_tensors(c->shards[c->n_shards]);
    c->used[c->n_shards] = calloc((size_t)(n > 0 ? n : 1), sizeof(bool));
    c->n_shards++;
    if (!c->used[c->n_shards - 1]) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

static kvik_status open_weights(struct conv *c) {
    struct json_value idx;
    bool found;
    kvik_status st = read_json(c, "model.safetensors.index.json", false, &idx, &found);
    if (st) return st;
    if (!found) return open_shard(c, "model.safetensors");
    const struct json_value *map = jget(&idx, "weight_map");
    if (!map || map->type != JSON_OBJECT || map->len == 0) {
        json_free(&idx);
        return err_set(c->err, KVIK_ERR_FORMAT, "model.safetensors.index.json: no weight_map");
    }
    for (size_t i = 0; i < map->len && !st; i++) {
        const char *file = jstr(&map->members[i].value);
        if (!file) {
            st = err_set(c->err, KVIK_ERR_FORMAT, "model.safetensors.index.json: %s: not a file name",
                         map->members[i].key);
            break;
        }
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = jstr(&map->members[j].value) &&
                                                        !strcmp(jstr(&map->members[j].value), file);
        if (!seen) st = open_shard(c, file);
    }
    json_free(&idx);
    return st;
}

static const struct safetensors_tensor *find_src(struct conv *c, const char *name, int *shard, int64_t *index) {
    for (int s = 0; s < c->n_shards; s++) {
        int64_t i = safetensors_find_tensor(c->shards[s], name);
        if (i >= 0) {
            *shard = s;
            *index = i;
            return safetensors_tensor(c->shards[s], i);
        }
    }
    return NULL;
}

/* Adds output tensor gname from the first of the source names present
 * (NULL-terminated list), which must be rows x cols (cols 0: a vector of
 * rows). type < 0: the matrices' type. */
static kvik_status want(struct conv *c, const char *gname, const char *const *src, int64_t rows, int64_t cols,
                        int type, int permute) {
    const struct safetensors_tensor *t = NULL;
    int shard = 0;
    int64_t index = 0;
    for (int k = 0; src[k] && !t; k++) t = find_src(c, src[k], &shard, &index);
    if (!t) return err_set(c->err, KVIK_ERR_FORMAT, "no tensor %s (for %s)", src[0], gname);
    if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_F16 && t->dtype != SAFETENSORS_BF16)
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "%s: dtype %s (F32, F16 or BF16 expected)", t->name,
                       safetensors_dtype_name(t->dtype));
    bool ok = cols ? t->n_dims == 2 && t->shape[0] == (uint64_t)rows && t->shape[1] == (uint64_t)cols
                   : t->n_dims == 1 && t->shape[0] == (uint64_t)rows;
    if (!ok)
        return err_set(c->err, KVIK_ERR_FORMAT, "%s: shape [%llu%s%llu] where config.json gives [%lld%s%lld]",
                       t->name, (unsigned long long)t->shape[0], t->n_dims > 1 ? ", " : "",
                       t->n_dims > 1 ? (unsigned long long)t->shape[1] : 0ull, (long long)rows, cols ? ", " : "",
                       (long long)cols);
    if (c->used[shard][index]) return err_set(c->err, KVIK_ERR_FORMAT, "%s: mapped twice", t->name);
    c->used[shard][index] = true;
    if (c->n_outs == c->cap_outs) {
        int cap = c->cap_outs ? 2 * c->cap_outs : 64;
        struct out_tensor *o = realloc(c->outs, (size_t)cap * sizeof *o);
        if (!o) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
        c->outs = o;
        c->cap_outs = cap;
    }
    struct out_tensor *o = &c->outs[c->n_outs++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", gname);
    o->src = t;
    o->n_dims = cols ? 2 : 1;
    o->ne[0] = cols ? cols : rows;
    o->ne[1] = cols ? rows : 1;
    o->type = !cols ? TENSOR_TYPE_F32 : type >= 0 ? type : c->mat_type;
    o->permute = permute;
    return KVIK_OK;
}

/* Source tensors no output uses, but for the ones known to be unneeded. */
static kvik_status check_unused(struct conv *c) {
    static const char *const skip[] = {"embeddings.position_ids", "pooler.", "cls.", "bert.pooler.",
                                       "bert.embeddings.position_ids", "rotary_emb.inv_freq"};
    for (int s = 0; s < c->n_shards; s++)
        for (int64_t i = 0; i < safetensors_n_tensors(c->shards[s]); i++) {
            if (c->used[s][i]) continue;
            const char *name = safetensors_tensor(c->shards[s], i)->name;
            bool known = false;
            for (size_t k = 0; k < sizeof skip / sizeof skip[0] && !known; k++)
                known = !strncmp(name, skip[k], strlen(skip[k])) || strstr(name, "rotary_emb.inv_freq");
            if (!known) return err_set(c->err, KVIK_ERR_UNSUPPORTED, "tensor %s has no GGUF counterpart", name);
        }
    return KVIK_OK;
}

/* ---- tensor maps of the families --------------------------------------- */

#define SRC(...) ((const char *const[]){__VA_ARGS__, NULL})

/* BERT's weight and bias pair gbase.{weight,bias} from hbase.{weight,bias}
 * (also under "bert." and, for LayerNorm, as gamma and beta): a linear map
 * of rows x cols (cols 0: a norm of rows values). */
static kvik_status bert_pair(struct conv *c, const char *gbase, const char *hbase, int64_t rows, int64_t cols) {
    static const char *const part[2][2] = {{"weight", "gamma"}, {"bias", "beta"}};
    for (int k = 0; k < 2; k++) {
        char g[128], h[4][192];
        snprintf(g, sizeof g, "%s.%s", gbase, part[k][0]);
        snprintf(h[0], sizeof h[0], "%s.%s", hbase, part[k][0]);
        snprintf(h[1], sizeof h[1], "bert.%s.%s", hbase, part[k][0]);
        snprintf(h[2], sizeof h[2], "%s.%s", hbase, part[k][1]);
        snprintf(h[3], sizeof h[3], "bert.%s.%s", hbase, part[k][1]);
        kvik_status st = want(c, g, SRC(h[0], h[1], h[2], h[3]), rows, k == 0 ? cols : 0, -1, 0);
        if (st) return st;
    }
    return KVIK_OK;
}

static kvik_status map_bert(struct conv *c) {
    kvik_status st;
    int64_t types, d = c->n_embd;
    if ((st = cfg_int(c, "type_vocab_size", NULL, 2, &types))) return st;
    if ((st = want(c, "token_embd.weight",
                   SRC("embeddings.word_embeddings.weight", "bert.embeddings.word_embeddings.weight"), c->n_vocab,
                   d, -1, 0)) ||
        (st = want(c, "token_types.weight",
                   SRC("embeddings.token_type_embeddings.weight", "bert.embeddings.token_type_embeddings.weight"),
                   types, d, TENSOR_TYPE_F32, 0)) ||
        (st = want(c, "position_embd.weight",
                   SRC("embeddings.position_embeddings.weight", "bert.embeddings.position_embeddings.weight"),
                   c->n_ctx, d, -1, 0)) ||
        (st = bert_pair(c, "token_embd_norm", "embeddings.LayerNorm", d, 0)))
        return st;
    static const struct {
        const char *g, *h;
        int rows, cols; /* 0: width, 1: feed-forward width, -1: none (a norm) */
    } parts[] = {
        {"attn_q", "attention.self.query", 0, 0},         {"attn_k", "attention.self.key", 0, 0},
        {"attn_v", "attention.self.value", 0, 0},         {"attn_output", "attention.output.dense", 0, 0},
        {"attn_output_norm", "attention.output.LayerNorm", 0, -1}, {"ffn_up", "intermediate.dense", 1, 0},
        {"ffn_down", "output.dense", 0, 1},               {"layer_output_norm", "output.LayerNorm", 0, -1},
    };
    for (int64_t l = 0; l < c->n_layer; l++)
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            char g[64], h[96];
            snprintf(g, sizeof g, "blk.%lld.%s", (long long)l, parts[k].g);
            snprintf(h, sizeof h, "encoder.layer.%lld.%s", (long long)l, parts[k].h);
            int64_t rows = parts[k].rows ? c->n_ff : d;
            int64_t cols = parts[k].cols < 0 ? 0 : parts[k].cols ? c->n_ff : d;
            if ((st = bert_pair(c, g, h, rows, cols))) return st;
        }
    if (!c->classifier) return KVIK_OK;
    /* the head, kept F32 (it is small): the pooler as cls, the classifier as cls.output */
    static const struct {
        const char *g, *h[2];
        int labels; /* rows: 1 the labels, 0 the width */
    } head[] = {
        {"cls.weight", {"bert.pooler.dense.weight", "pooler.dense.weight"}, 0},
        {"cls.bias", {"bert.pooler.dense.bias", "pooler.dense.bias"}, 0},
        {"cls.output.weight", {"classifier.weight", "classifier.weight"}, 1},
        {"cls.output.bias", {"classifier.bias", "classifier.bias"}, 1},
    };
    for (size_t k = 0; k < sizeof head / sizeof head[0]; k++) {
        bool matrix = strstr(head[k].g, ".weight") != NULL;
        if ((st = want(c, head[k].g, SRC(head[k].h[0], head[k].h[1]), head[k].labels ? c->n_labels : d,
                       matrix ? d : 0, TENSOR_TYPE_F32, 0)))
            return st;
    }
    return KVIK_OK;
}

static kvik_status map_decoder(struct conv *c, bool tied) {
    kvik_status st;
    int64_t d = c->n_embd, qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
    bool llama = c->fam == FAM_LLAMA, bias = c->fam == FAM_QWEN2;
    if ((st = want(c, "token_embd.weight", SRC("model.embed_tokens.weight"), c->n_vocab, d, -1, 0)) ||
        (st = want(c, "output_norm.weight", SRC("model.norm.weight"), d, 0, -1, 0)))
        return st;
    int s;
    int64_t i;
    if (!tied && (st = want(c, "output.weight", SRC("lm_head.weight"), c->n_vocab, d, -1, 0))) return st;
    if (tied && find_src(c, "lm_head.weight", &s, &i)) c->used[s][i] = true; /* a saved copy of token_embd */
    for (int64_t l = 0; l < c->n_layer; l++) {
        char g[96], h[128];
#define L(gs, hs, rows, cols, perm)                                                              \
    (snprintf(g, sizeof g, "blk.%lld.%s", (long long)l, gs),                                     \
     snprintf(h, sizeof h, "model.layers.%lld.%s", (long long)l, hs), want(c, g, SRC(h), rows, cols, -1, perm))
        if ((st = L("attn_norm.weight", "input_layernorm.weight", d, 0, 0)) ||
            (st = L("attn_q.weight", "self_attn.q_proj.weight", qd, d, llama ? (int)c->n_head : 0)) ||
            (st = L("attn_k.weight", "self_attn.k_proj.weight", kvd, d, llama ? (int)c->n_head_kv : 0)) ||
            (st = L("attn_v.weight", "self_attn.v_proj.weight", kvd, d, 0)) ||
            (st = L("attn_output.weight", "self_attn.o_proj.weight", d, qd, 0)) ||
            (st = L("ffn_norm.weight", "post_attention_layernorm.weight", d, 0, 0)) ||
            (st = L("ffn_gate.weight", "mlp.gate_proj.weight", c->n_ff, d, 0)) ||
            (st = L("ffn_up.weight", "mlp.up_proj.weight", c->n_ff, d, 0)) ||
            (st = L("ffn_down.weight", "mlp.down_proj.weight", d, c->n_ff, 0)))
            return st;
        if (bias && ((st = L("attn_q.bias", "self_attn.q_proj.bias", qd, 0, 0)) ||
                     (st = L("attn_k.bias", "self_attn.k_proj.bias", kvd, 0, 0)) ||
                     (st = L("attn_v.bias", "self_attn.v_proj.bias", kvd, 0, 0))))
            return st;
#undef L
    }
    return KVIK_OK;
}

/* ---- the vocabulary ---------------------------------------------------- */

static kvik_status vocab_alloc(struct conv *c, int64_t n) {
    c->tokens = calloc((size_t)n, sizeof *c->tokens);
    c->types = calloc((size_t)n, sizeof *c->types);
    c->n_tokens = n;
    if (!c->tokens || !c->types) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    return KVIK_OK;
}

/* llama.cpp's WordPiece spelling: "##ing" -> "ing", "word" -> "▁word",
 * bracketed specials ("[CLS]") as they are. */
static char *phantom(const char *t) {
    size_t n = strlen(t);
    if (n >= 2 && t[0] == '[' && t[n - 1] == ']') return strdup(t);
    if (n >= 2 && t[0] == '#' && t[1] == '#') return strdup(t + 2);
    char *s = malloc(n + 4);
    if (s) {
        memcpy(s, "\xe2\x96\x81", 3);
        memcpy(s + 3, t, n + 1);
    }
    return s;
}

/* The vocabulary of tokenizer.json: model.vocab (token -> id) and the added
 * tokens. n: at least this many ids (the embedding's rows); ids past the
 * vocabulary read "[PAD<id>]", unused. */
static kvik_status read_vocab(struct conv *c, const char *want_type, int64_t n) {
    const struct json_value *model = jget(&c->tok, "model"), *vocab = jget(model, "vocab");
    const char *type = jstr(jget(model, "type"));
    if (!type || strcmp(type, want_type))
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "tokenizer.json: model type %s (%s expected for %s)",
                       type ? type : "missing", want_type, c->arch);
    if (!vocab || vocab->type != JSON_OBJECT || vocab->len == 0)
        return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: no model.vocab");
    const struct json_value *added = jget(&c->tok, "added_tokens");
    if (added && added->type != JSON_ARRAY) return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: bad added_tokens");
    int64_t max_id = -1;
    for (size_t i = 0; i < vocab->len; i++) {
        const struct json_value *v = &vocab->members[i].value;
        if (v->type != JSON_UINT || v->u >= ((uint64_t)1 << 24))
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: vocab id of \"%.40s\" is not an id",
                           vocab->members[i].key);
        if ((int64_t)v->u > max_id) max_id = (int64_t)v->u;
    }
    for (size_t i = 0; added && i < added->len; i++) {
        const struct json_value *id = jget(&added->items[i], "id");
        if (!id || id->type != JSON_UINT || id->u >= ((uint64_t)1 << 24) || !jstr(jget(&added->items[i], "content")))
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: added_tokens[%zu] has no id or content", i);
        if ((int64_t)id->u > max_id) max_id = (int64_t)id->u;
    }
    if (max_id + 1 > n)
        return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: id %lld past the embedding's %lld rows",
                       (long long)max_id, (long long)n);
    kvik_status st = vocab_alloc(c, n);
    if (st) return st;
    for (size_t i = 0; i < vocab->len; i++) {
        int64_t id = (int64_t)vocab->members[i].value.u;
        if (c->tokens[id])
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: id %lld given twice", (long long)id);
        const char *k = vocab->members[i].key;
        if (strlen(k) != vocab->members[i].key_len)
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: a token holds NUL");
        c->tokens[id] = c->fam == FAM_BERT ? phantom(k) : strdup(k);
        c->types[id] = TOK_NORMAL;
        if (!c->tokens[id]) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; added && i < added->len; i++) {
        const struct json_value *a = &added->items[i];
        int64_t id = (int64_t)jget(a, "id")->u;
        const char *content = jstr(jget(a, "content"));
        const struct json_value *sp = jget(a, "special");
        bool special = sp && sp->type == JSON_TRUE;
        if (c->tokens[id] && strcmp(c->tokens[id], content) && c->fam != FAM_BERT)
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: added token %lld is \"%.40s\" in the vocab",
                           (long long)id, c->tokens[id]);
        if (!c->tokens[id] && !(c->tokens[id] = strdup(content)))
            return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
        c->types[id] = special ? TOK_CONTROL : c->fam == FAM_BERT ? TOK_NORMAL : TOK_USER;
    }
    for (int64_t id = 0; id < n; id++) {
        if (c->tokens[id]) continue;
        if (c->fam == FAM_BERT)
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: no token has id %lld", (long long)id);
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)id);
        if (!(c->tokens[id] = strdup(pad))) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
        c->types[id] = TOK_UNUSED;
    }
    return KVIK_OK;
}

/* The id of a token by its spelling in tokenizer.json (-1: none). */
static int64_t token_id(struct conv *c, const char *text) {
    if (!text) return -1;
    const struct json_value *vocab = jget(jget(&c->tok, "model"), "vocab");
    for (size_t i = 0; vocab && i < vocab->len; i++)
        if (!strcmp(vocab->members[i].key, text) && vocab->members[i].value.type == JSON_UINT)
            return (int64_t)vocab->members[i].value.u;
    const struct json_value *added = jget(&c->tok, "added_tokens");
    for (size_t i = 0; added && added->type == JSON_ARRAY && i < added->len; i++) {
        const char *s = jstr(jget(&added->items[i], "content"));
        if (s && !strcmp(s, text)) return (int64_t)jget(&added->items[i], "id")->u;
    }
    return -1;
}

static kvik_status set_special(struct conv *c, struct gguf_writer *w, const char *cfg_key, const char *gguf_key) {
    int64_t id = c->has_tokcfg ? token_id(c, jtoken(jget(&c->tokcfg, cfg_key))) : -1;
    if (id < 0 || id >= c->n_tokens) return KVIK_OK;
    return gguf_writer_set_u32(w, gguf_key, (uint32_t)id);
}

static kvik_status read_merges(struct conv *c) {
    const struct json_value *m = jget(jget(&c->tok, "model"), "merges");
    if (!m || m->type != JSON_ARRAY) return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: no model.merges");
    c->merges = calloc(m->len ? m->len : 1, sizeof *c->merges);
    if (!c->merges) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->len; i++) {
        const struct json_value *v = &m->items[i];
        const char *s = jstr(v);
        if (s && strchr(s, ' ')) {
            c->merges[i] = strdup(s);
        } else if (v->type == JSON_ARRAY && v->len == 2 && jstr(&v->items[0]) && jstr(&v->items[1])) {
            size_t a = v->items[0].len, b = v->items[1].len;
            if ((c->merges[i] = malloc(a + b + 2))) {
                memcpy(c->merges[i], v->items[0].str, a);
                c->merges[i][a] = ' ';
                memcpy(c->merges[i] + a + 1, v->items[1].str, b + 1);
            }
        } else {
            return err_set(c->err, KVIK_ERR_FORMAT, "tokenizer.json: merges[%zu] is not a pair", i);
        }
        if (!c->merges[i]) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
        c->n_merges = (int64_t)i + 1;
    }
    return KVIK_OK;
}

/* The pre-tokenizer's name as llama.cpp writes it, told by the split
 * pattern of tokenizer.json's pre_tokenizer; NULL: not recognised. */
static const char *detect_pre(struct conv *c) {
    static const struct {
        const char *name, *pattern;
    } known[] = {
        {"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
        {"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                      "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    };
    const struct json_value *pt = jget(&c->tok, "pre_tokenizer");
    const struct json_value *list = jget(pt, "pretokenizers");
    size_t n = list && list->type == JSON_ARRAY ? list->len : 1;
    bool digits = false, byte_level = false;
    for (size_t i = 0; i < n; i++) {
        const struct json_value *one = list && list->type == JSON_ARRAY ? &list->items[i] : pt;
        const char *type = jstr(jget(one, "type"));
        if (!type) continue;
        if (!strcmp(type, "Split")) {
            const char *re = jstr(jget(jget(one, "pattern"), "Regex"));
            for (size_t k = 0; re && k < sizeof known / sizeof known[0]; k++)
                if (!strcmp(re, known[k].pattern)) return known[k].name;
            return NULL;
        }
        if (!strcmp(type, "Digits")) digits = jget(one, "individual_digits") &&
                                              jget(one, "individual_digits")->type == JSON_TRUE;
        if (!strcmp(type, "ByteLevel")) byte_level = true;
    }
    if (byte_level) return digits ? "smollm" : "gpt-2";
    return NULL;
}

/* ---- metadata ---------------------------------------------------------- */

#define KEY(buf, suffix) (snprintf(buf, sizeof buf, "%s.%s", c->arch, suffix), buf)

/* config.json's id2label into c->labels: every id in 0..n_labels once. */
static kvik_status read_labels(struct conv *c) {
    const struct json_value *m = jget(&c->cfg, "id2label");
    if (!m || m->type != JSON_OBJECT) return KVIK_OK;
    if (!(c->labels = calloc((size_t)c->n_labels, sizeof *c->labels)))
        return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->len; i++) {
        char *end;
        long id = strtol(m->members[i].key, &end, 10);
        const char *name = jstr(&m->members[i].value);
        if (*end || end == m->members[i].key || id < 0 || id >= c->n_labels || !name || c->labels[id])
            return err_set(c->err, KVIK_ERR_FORMAT, "config.json: id2label has a bad entry \"%.40s\"",
                           m->members[i].key);
        c->labels[id] = name;
    }
    return KVIK_OK;
}

static kvik_status write_bert_meta(struct conv *c, struct gguf_writer *w) {
    kvik_status st;
    char k[96];
    double eps;
    int64_t types;
    if ((st = cfg_num(c, "layer_norm_eps", 1e-12, &eps)) || (st = cfg_int(c, "type_vocab_size", NULL, 2, &types)))
        return st;
    const char *act = jstr(jget(&c->cfg, "hidden_act"));
    if (act && strcmp(act, "gelu"))
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: hidden_act %s (gelu expected)", act);
    const char *pos = jstr(jget(&c->cfg, "position_embedding_type"));
    if (pos && strcmp(pos, "absolute"))
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: position_embedding_type %s", pos);
    /* sentence-transformers keeps the pooling in 1_Pooling/config.json;
     * a classifier ranks (llama.cpp's pooling type 4) */
    uint32_t pooling = c->classifier ? 4 : 1;
    struct json_value pool;
    bool found = false;
    const char *path = "1_Pooling/config.json";
    if (!c->classifier && (st = read_json(c, path, false, &pool, &found))) return st;
    if (found) {
        const struct json_value *cls = jget(&pool, "pooling_mode_cls_token"),
                                *mean = jget(&pool, "pooling_mode_mean_tokens"),
                                *last = jget(&pool, "pooling_mode_lasttoken");
        if (cls && cls->type == JSON_TRUE) pooling = 2;
        else if (last && last->type == JSON_TRUE) pooling = 3;
        else if (!mean || mean->type != JSON_TRUE) {
            json_free(&pool);
            return err_set(c->err, KVIK_ERR_UNSUPPORTED, "1_Pooling/config.json: a pooling other than mean, CLS or last token");
        }
        json_free(&pool);
    }
    if ((st = gguf_writer_set_u32(w, KEY(k, "context_length"), (uint32_t)c->n_ctx)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "embedding_length"), (uint32_t)c->n_embd)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "feed_forward_length"), (uint32_t)c->n_ff)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "block_count"), (uint32_t)c->n_layer)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "attention.head_count"), (uint32_t)c->n_head)) ||
        (st = gguf_writer_set_f32(w, KEY(k, "attention.layer_norm_epsilon"), (float)eps)) ||
        (st = gguf_writer_set_bool(w, KEY(k, "attention.causal"), false)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "pooling_type"), pooling)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.token_type_count", (uint32_t)types)) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.model", "bert")) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.pre", "default")))
        return st;
    if (c->labels && (st = gguf_writer_set_arr_str(w, "bert.classifier.output_labels", c->labels,
                                                    (uint64_t)c->n_labels)))
        return st;
    if ((st = set_special(c, w, "unk_token", "tokenizer.ggml.unknown_token_id")) ||
        (st = set_special(c, w, "sep_token", "tokenizer.ggml.seperator_token_id")) ||
        (st = set_special(c, w, "pad_token", "tokenizer.ggml.padding_token_id")) ||
        (st = set_special(c, w, "cls_token", "tokenizer.ggml.cls_token_id")) ||
        (st = set_special(c, w, "mask_token", "tokenizer.ggml.mask_token_id")))
        return st;
    return KVIK_OK;
}

static kvik_status write_decoder_meta(struct conv *c, struct gguf_writer *w) {
    kvik_status st;
    char k[96];
    double eps, theta;
    if ((st = cfg_num(c, "rms_norm_eps", 1e-6, &eps)) || (st = cfg_num(c, "rope_theta", 10000.0, &theta)))
        return st;
    const struct json_value *rs = jget(&c->cfg, "rope_scaling");
    if (rs && rs->type != JSON_NULL)
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: rope_scaling is not supported by the converter");
    const char *act = jstr(jget(&c->cfg, "hidden_act"));
    if (act && strcmp(act, "silu"))
        return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: hidden_act %s (silu expected)", act);
    const char *pre = c->p->pre ? c->p->pre : detect_pre(c);
    if (!pre)
        return err_set(c->err, KVIK_ERR_UNSUPPORTED,
                       "tokenizer.json: the pre-tokenizer is not one the converter knows; name it with --pre");
    if ((st = gguf_writer_set_u32(w, KEY(k, "context_length"), (uint32_t)c->n_ctx)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "embedding_length"), (uint32_t)c->n_embd)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "feed_forward_length"), (uint32_t)c->n_ff)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "block_count"), (uint32_t)c->n_layer)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "attention.head_count"), (uint32_t)c->n_head)) ||
        (st = gguf_writer_set_u32(w, KEY(k, "attention.head_count_kv"), (uint32_t)c->n_head_kv)) ||
        (st = gguf_writer_set_f32(w, KEY(k, "rope.freq_base"), (float)theta)) ||
        (st = gguf_writer_set_f32(w, KEY(k, "attention.layer_norm_rms_epsilon"), (float)eps)) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2")) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.pre", pre)))
        return st;
    if (c->head_dim != c->n_embd / c->n_head &&
        ((st = gguf_writer_set_u32(w, KEY(k, "attention.key_length"), (uint32_t)c->head_dim)) ||
         (st = gguf_writer_set_u32(w, KEY(k, "attention.value_length"), (uint32_t)c->head_dim))))
        return st;
    if (c->fam == FAM_LLAMA &&
        ((st = gguf_writer_set_u32(w, KEY(k, "rope.dimension_count"), (uint32_t)c->head_dim)) ||
         (st = gguf_writer_set_u32(w, KEY(k, "vocab_size"), (uint32_t)c->n_vocab))))
        return st;
    if ((st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)c->merges,
                                      (uint64_t)c->n_merges)) ||
        (st = set_special(c, w, "bos_token", "tokenizer.ggml.bos_token_id")) ||
        (st = set_special(c, w, "eos_token", "tokenizer.ggml.eos_token_id")) ||
        (st = set_special(c, w, "pad_token", "tokenizer.ggml.padding_token_id")) ||
        (st = set_special(c, w, "unk_token", "tokenizer.ggml.unknown_token_id")))
        return st;
    if (c->has_tokcfg) {
        const struct json_value *ab = jget(&c->tokcfg, "add_bos_token"), *ae = jget(&c->tokcfg, "add_eos_token");
        if (ab && (ab->type == JSON_TRUE || ab->type == JSON_FALSE) &&
            (st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", ab->type == JSON_TRUE)))
            return st;
        if (ae && (ae->type == JSON_TRUE || ae->type == JSON_FALSE) &&
            (st = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", ae->type == JSON_TRUE)))
            return st;
        const struct json_value *tpl = jget(&c->tokcfg, "chat_template");
        const char *t = jstr(tpl);
        for (size_t i = 0; !t && tpl && tpl->type == JSON_ARRAY && i < tpl->len; i++) {
            const char *nm = jstr(jget(&tpl->items[i], "name"));
            if (nm && !strcmp(nm, "default")) t = jstr(jget(&tpl->items[i], "template"));
        }
        if (t && (st = gguf_writer_set_str(w, "tokenizer.chat_template", t))) return st;
    }
    return KVIK_OK;
}

/* ---- rows -------------------------------------------------------------- */

static float src_value(const struct safetensors_tensor *t, uint64_t i) {
    const uint8_t *p = (const uint8_t *)t->data;
    if (t->dtype == SAFETENSORS_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return t->dtype == SAFETENSORS_F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

/* The source row of output row r: llama's Q/K rows of head h come in
 * halves (rotate-half) in Hugging Face's order; GGUF interleaves them:
 * output row h*hd + 2i + j is source row h*hd + j*hd/2 + i. */
static int64_t src_row(const struct out_tensor *o, int64_t r) {
    if (o->permute <= 0) return r;
    int64_t hd = o->ne[1] / o->permute, h = r / hd, w = r % hd;
    return h * hd + (w % 2) * (hd / 2) + w / 2;
}

static kvik_status fill_rows(void *user, void *dst, int64_t row0, int64_t n_rows, struct kvik_err *err) {
    const struct out_tensor *o = user;
    int64_t cols = o->ne[0];
    for (int64_t r = row0; r < row0 + n_rows; r++) {
        uint64_t base = (uint64_t)src_row(o, r) * (uint64_t)cols;
        uint8_t *row = (uint8_t *)dst + (size_t)(r - row0) * tensor_row_size(o->type, cols);
        for (int64_t i = 0; i < cols; i++) {
            float f = src_value(o->src, base + (uint64_t)i);
            if (o->type == TENSOR_TYPE_F32) memcpy(row + 4 * i, &f, 4);
            else {
                uint16_t h = o->type == TENSOR_TYPE_F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
                memcpy(row + 2 * i, &h, 2);
            }
        }
    }
    (void)err;
    return KVIK_OK;
}

/* ---- the whole file ---------------------------------------------------- */

static kvik_status read_config(struct conv *c) {
    kvik_status st;
    const char *mt = jstr(jget(&c->cfg, "model_type"));
    if (!mt) return err_set(c->err, KVIK_ERR_FORMAT, "config.json: no model_type");
    if (!strcmp(mt, "bert")) c->fam = FAM_BERT, c->arch = "bert";
    else if (!strcmp(mt, "llama")) c->fam = FAM_LLAMA, c->arch = "llama";
    else if (!strcmp(mt, "qwen2")) c->fam = FAM_QWEN2, c->arch = "qwen2";
    else return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: model_type %.40s (bert, llama or qwen2)", mt);
    if ((st = cfg_int(c, "hidden_size", NULL, -1, &c->n_embd)) ||
        (st = cfg_int(c, "intermediate_size", NULL, -1, &c->n_ff)) ||
        (st = cfg_int(c, "num_hidden_layers", NULL, -1, &c->n_layer)) ||
        (st = cfg_int(c, "num_attention_heads", NULL, -1, &c->n_head)) ||
        (st = cfg_int(c, "num_key_value_heads", NULL, c->n_head, &c->n_head_kv)) ||
        (st = cfg_int(c, "max_position_embeddings", NULL, -1, &c->n_ctx)) ||
        (st = cfg_int(c, "vocab_size", NULL, -1, &c->n_vocab)))
        return st;
    if ((st = cfg_int(c, "head_dim", NULL, c->n_embd / c->n_head, &c->head_dim))) return st;
    const struct json_value *archs = jget(&c->cfg, "architectures");
    for (size_t i = 0; archs && archs->type == JSON_ARRAY && i < archs->len; i++) {
        const char *a = jstr(&archs->items[i]);
        if (a && strstr(a, "ForSequenceClassification")) {
            if (c->fam != FAM_BERT)
                return err_set(c->err, KVIK_ERR_UNSUPPORTED, "config.json: %.60s (classifiers are converted for bert)", a);
            c->classifier = true;
        }
    }
    if (c->classifier) {
        const struct json_value *m = jget(&c->cfg, "id2label");
        int64_t dflt = m && m->type == JSON_OBJECT ? (int64_t)m->len : 2;
        if ((st = cfg_int(c, "num_labels", NULL, dflt, &c->n_labels))) return st;
        if (c->n_labels < 1 || c->n_labels > 1024 || (m && m->type == JSON_OBJECT && (int64_t)m->len != c->n_labels))
            return err_set(c->err, KVIK_ERR_FORMAT, "config.json: %lld labels (1..1024, as many as id2label has)",
                           (long long)c->n_labels);
        if ((st = read_labels(c))) return st;
    }
    if (c->n_layer > MAX_LAYERS || c->n_embd % c->n_head || c->n_head % c->n_head_kv || c->head_dim % 2)
        return err_set(c->err, KVIK_ERR_FORMAT, "config.json: inconsistent sizes (layers %lld, width %lld, "
                       "heads %lld/%lld, head size %lld)", (long long)c->n_layer, (long long)c->n_embd,
                       (long long)c->n_head, (long long)c->n_head_kv, (long long)c->head_dim);
    return KVIK_OK;
}

static kvik_status write_file(struct conv *c, const char *path, int ftype) {
    kvik_status st;
    struct gguf_writer *w = gguf_writer_new();
    if (!w) return err_set(c->err, KVIK_ERR_NOMEM, "out of memory");
    const char *name = c->p->name;
    char dirname[256];
    if (!name) {
        const char *s = c->p->dir + strlen(c->p->dir);
        while (s > c->p->dir && s[-1] == '/') s--;
        const char *e = s;
        while (s > c->p->dir && s[-1] != '/') s--;
        snprintf(dirname, sizeof dirname, "%.*s", (int)(e - s), s);
        name = dirname;
    }
    if ((st = gguf_writer_set_str(w, "general.architecture", c->arch)) ||
        (st = gguf_writer_set_str(w, "general.name", name)) ||
        (st = gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype)) ||
        (st = gguf_writer_set_str(w, "convert.tool", "kvik convert")))
        goto out;
    if ((st = c->fam == FAM_BERT ? write_bert_meta(c, w) : write_decoder_meta(c, w))) goto out;
    if ((st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)c->tokens,
                                      (uint64_t)c->n_tokens)) ||
        (st = gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, c->types,
                                       (uint64_t)c->n_tokens)))
        goto out;
    for (int i = 0; i < c->n_outs; i++) {
        struct out_tensor *o = &c->outs[i];
        if ((st = gguf_writer_add_tensor_fn(w, o->name, o->type, o->n_dims, o->ne, fill_rows, o))) {
            err_set(c->err, st, "%s: cannot add the tensor", o->name);
            goto out;
        }
        if (c->p->progress)
            fprintf(stderr, "[%4d/%4d] %-32s <- %-48s %s -> %s\n", i + 1, c->n_outs, o->name, o->src->name,
                    safetensors_dtype_name(o->src->dtype), tensor_type_name(o->type));
    }
    st = gguf_writer_write_file(w, path, c->err);
out:
    if (st && !c->err->msg[0]) err_set(c->err, st, "cannot write the GGUF file");
    gguf_writer_free(w);
    return st;
}

void convert_params_default(struct convert_params *p) {
    memset(p, 0, sizeof *p);
    p->ftype = QUANT_FTYPE_F16;
}

kvik_status convert_hf(const struct convert_params *p, struct kvik_err *err) {
    struct conv c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.err = err;
    const char *ftname = quant_ftype_name(p->ftype);
    if (!ftname) return err_set(err, KVIK_ERR_INVALID_ARG, "unknown output type %d", p->ftype);
    bool direct = p->ftype == QUANT_FTYPE_F32 || p->ftype == QUANT_FTYPE_F16 || p->ftype == QUANT_FTYPE_BF16;
    c.mat_type = p->ftype == QUANT_FTYPE_F16 ? TENSOR_TYPE_F16 : p->ftype == QUANT_FTYPE_BF16 ? TENSOR_TYPE_BF16
                                                                                              : TENSOR_TYPE_F32;
    char tmp[PATH_MAX_LEN], f32tmp[PATH_MAX_LEN];
    snprintf(tmp, sizeof tmp, "%s.tmp", p->out_path);
    snprintf(f32tmp, sizeof f32tmp, "%s.f32.tmp", p->out_path);
    kvik_status st;
    bool tied = false;
    if ((st = read_json(&c, "config.json", true, &c.cfg, NULL))) return st;
    if ((st = read_json(&c, "tokenizer.json", true, &c.tok, NULL))) goto out_cfg;
    if ((st = read_json(&c, "tokenizer_config.json", false, &c.tokcfg, &c.has_tokcfg))) goto out_tok;
    if ((st = read_config(&c)) || (st = open_weights(&c))) goto out;
    const struct json_value *tie = jget(&c.cfg, "tie_word_embeddings");
    if (c.fam != FAM_BERT) {
        int s;
        int64_t i;
        tied = tie ? tie->type == JSON_TRUE : !find_src(&c, "lm_head.weight", &s, &i);
    }
    if ((st = c.fam == FAM_BERT ? map_bert(&c) : map_decoder(&c, tied)) || (st = check_unused(&c))) goto out;
    if ((st = read_vocab(&c, c.fam == FAM_BERT ? "WordPiece" : "BPE", c.n_vocab))) goto out;
    if (c.fam != FAM_BERT && (st = read_merges(&c))) goto out;
    if (direct) {
        if ((st = write_file(&c, tmp, p->ftype))) goto out;
        if (rename(tmp, p->out_path) != 0) st = err_set(err, KVIK_ERR_IO, "cannot rename %s to %s", tmp, p->out_path);
    } else {
        if ((st = write_file(&c, f32tmp, QUANT_FTYPE_F32))) goto out;
        struct quant_params qp;
        quant_params_default(&qp);
        qp.ftype = p->ftype;
        qp.n_threads = p->n_threads;
        qp.progress = p->progress;
        struct quant_stats qs;
        st = quant_file(f32tmp, p->out_path, &qp, &qs, err);
    }
out:
    if (st) unlink(tmp);
    unlink(f32tmp);
    for (int s = 0; s < c.n_shards; s++) {
        safetensors_close(c.shards[s]);
        free(c.used[s]);
    }
    for (int64_t i = 0; i < c.n_tokens; i++) free(c.tokens[i]);
    free(c.tokens);
    free(c.types);
    for (int64_t i = 0; i < c.n_merges; i++) free(c.merges[i]);
    free(c.merges);
    free(c.outs);
    if (c.has_tokcfg) json_free(&c.tokcfg);
out_tok:
    json_free(&c.tok);
out_cfg:
    json_free(&c.cfg);
    free(c.labels);
    return st;
}
