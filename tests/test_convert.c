/*
 * test_convert.c — kvik convert on decoder directories, by round trip: a
 * synthetic llama (untied) and qwen2 (tied) GGUF in F32 is written out here
 * as a Hugging Face directory (config.json, tokenizer.json with the vocab,
 * merges, added tokens and the family's pre-tokenizer, tokenizer_config.json,
 * model.safetensors with Hugging Face's names; llama's Q and K rows put
 * back into rotate-half order by this file's own inverse of the GGUF
 * interleaving), converted back, and compared: every tensor's name, type,
 * shape and bytes, the vocabulary, merges, special ids, pre-tokenizer name
 * and hyperparameters equal the original's, and the result loads.
 */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/convert.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "test.h"
#include "tools/quantize.h"

static void json_escaped(FILE *f, const char *s, uint64_t n) {
    fputc('"', f);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char QWEN2_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";

static uint32_t u32_of(const struct gguf *g, const char *key, uint32_t def) {
    uint32_t v;
    struct kvik_err err = {0};
    return gguf_get_u32(g, key, &v, &err) == KVIK_OK ? v : def;
}

static float f32_of(const struct gguf *g, const char *key) {
    float v = NAN;
    struct kvik_err err = {0};
    gguf_get_f32(g, key, &v, &err);
    return v;
}

/* The Hugging Face name of a GGUF tensor of a llama/qwen2 file. */
static bool hf_name(const char *g, char *out, size_t len) {
    static const char *const map[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},   {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},        {"ffn_down.weight", "mlp.down_proj.weight"}};
    if (!strcmp(g, "token_embd.weight")) return snprintf(out, len, "model.embed_tokens.weight"), true;
    if (!strcmp(g, "output_norm.weight")) return snprintf(out, len, "model.norm.weight"), true;
    if (!strcmp(g, "output.weight")) return snprintf(out, len, "lm_head.weight"), true;
    int layer, at = 0;
    if (sscanf(g, "blk.%d.%n", &layer, &at) != 1 || !at) return false;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(g + at, map[i][0])) return snprintf(out, len, "model.layers.%d.%s", layer, map[i][1]), true;
    return false;
}

/* Writes dir/model.safetensors from g's tensors (all F32): llama's Q/K rows
 * in Hugging Face's order, row h*hd + j*hd/2 + i being GGUF row h*hd + 2i + j. */
static void write_weights(const struct gguf *g, const char *dir, bool llama, int n_head, int n_head_kv) {
    char path[4200], name[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t cap = 1 << 20, at = 0;
    char *h = malloc(cap);
    uint64_t off = 0;
    at += (size_t)snprintf(h + at, cap - at, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        REQUIRE_MSG(t->type == TENSOR_TYPE_F32 && hf_name(t->name, name, sizeof name), "%s maps", t->name);
        if (t->n_dims == 1)
            at += (size_t)snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":"
                                   "[%llu,%llu]}", name, (long long)t->ne[0], (unsigned long long)off,
                                   (unsigned long long)(off + t->n_bytes));
        else
            at += (size_t)snprintf(h + at, cap - at, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                                   "\"data_offsets\":[%llu,%llu]}", name, (long long)t->ne[1], (long long)t->ne[0],
                                   (unsigned long long)off, (unsigned long long)(off + t->n_bytes));
        off += t->n_bytes;
    }
    at += (size_t)snprintf(h + at, cap - at, "}");
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    uint64_t hl = at;
    fwrite(&hl, 8, 1, f);
    fwrite(h, 1, at, f);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const struct gguf_tensor *t = gguf_tensor(g, i);
        bool q = strstr(t->name, "attn_q.weight") != NULL, k = strstr(t->name, "attn_k.weight") != NULL;
        if (!llama || (!q && !k)) {
            fwrite(t->data, 1, t->n_bytes, f);
            continue;
        }
        int64_t rows = t->ne[1], cols = t->ne[0], hd = rows / (q ? n_head : n_head_kv);
        const float *src = t->data;
        for (int64_t r = 0; r < rows; r++) {
            int64_t head = r / hd, w = r % hd, j = w / (hd / 2), pair = w % (hd / 2);
            fwrite(src + (head * hd + 2 * pair + j) * cols, sizeof(float), (size_t)cols, f);
        }
    }
    fclose(f);
    free(h);
}

/* config.json, tokenizer.json and tokenizer_config.json of g. */
static void write_meta(const struct gguf *g, const char *dir, const char *arch, bool tied) {
    char path[4200], key[128];
    struct kvik_err err = {0};
#define AK(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    const struct gguf_tensor *emb = gguf_tensor(g, gguf_find_tensor(g, "token_embd.weight"));
    fprintf(f, "{\"model_type\":\"%s\",\"hidden_size\":%u,\"intermediate_size\":%u,\"num_hidden_layers\":%u,"
               "\"num_attention_heads\":%u,\"num_key_value_heads\":%u,\"max_position_embeddings\":%u,"
               "\"vocab_size\":%lld,\"rms_norm_eps\":%.9g,\"rope_theta\":%.9g,\"tie_word_embeddings\":%s,"
               "\"hidden_act\":\"silu\",\"rope_scaling\":null}",
            arch, u32_of(g, AK("embedding_length"), 0), u32_of(g, AK("feed_forward_length"), 0),
            u32_of(g, AK("block_count"), 0), u32_of(g, AK("attention.head_count"), 0),
            u32_of(g, AK("attention.head_count_kv"), 0), u32_of(g, AK("context_length"), 0),
            (long long)emb->ne[1], (double)f32_of(g, AK("attention.layer_norm_rms_epsilon")),
            (double)f32_of(g, AK("rope.freq_base")), tied ? "true" : "false");
    fclose(f);
#undef AK
    const struct gguf_value *toks = gguf_kv_value(g, gguf_find_key(g, "tokenizer.ggml.tokens"));
    const struct gguf_value *types = gguf_kv_value(g, gguf_find_key(g, "tokenizer.ggml.token_type"));
    const struct gguf_value *merges = gguf_kv_value(g, gguf_find_key(g, "tokenizer.ggml.merges"));
    REQUIRE(toks && types && merges);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    REQUIRE((f = fopen(path, "w")));
    fprintf(f, "{\"version\":\"1.0\",\"added_tokens\":[");
    bool first = true;
    for (uint64_t i = 0; i < gguf_arr_len(toks); i++) {
        struct gguf_value e;
        int64_t ty;
        REQUIRE(gguf_arr_elem(types, i, &e) && gguf_value_to_i64(&e, &ty));
        if (ty != 3 && ty != 4) continue;
        struct gguf_str s = gguf_arr_str(toks, i);
        fprintf(f, "%s{\"id\":%llu,\"content\":", first ? "" : ",", (unsigned long long)i);
        json_escaped(f, s.ptr, s.len);
        fprintf(f, ",\"special\":%s}", ty == 3 ? "true" : "false");
        first = false;
    }
    if (!strcmp(arch, "qwen2"))
        fprintf(f, "],\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                   "{\"Regex\":\"%s\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]},", QWEN2_SPLIT);
    else
        fprintf(f, "],\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
                   "\"individual_digits\":true},{\"type\":\"ByteLevel\",\"add_prefix_space\":false}]},");
    fprintf(f, "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (uint64_t i = 0; i < gguf_arr_len(toks); i++) {
        struct gguf_str s = gguf_arr_str(toks, i);
        if (i) fputc(',', f);
        json_escaped(f, s.ptr, s.len);
        fprintf(f, ":%llu", (unsigned long long)i);
    }
    fprintf(f, "},\"merges\":[");
    for (uint64_t i = 0; i < gguf_arr_len(merges); i++) {
        struct gguf_str s = gguf_arr_str(merges, i);
        if (i) fputc(',', f);
        if (i % 2) { /* both spellings tokenizer.json uses: "a b" and ["a", "b"] */
            const char *sp = memchr(s.ptr, ' ', s.len);
            REQUIRE(sp);
            fputc('[', f);
            json_escaped(f, s.ptr, (uint64_t)(sp - s.ptr));
            fputc(',', f);
            json_escaped(f, sp + 1, s.len - (uint64_t)(sp - s.ptr) - 1);
            fputc(']', f);
        } else {
            json_escaped(f, s.ptr, s.len);
        }
    }
    fprintf(f, "]}}");
    fclose(f);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    REQUIRE((f = fopen(path, "w")));
    fprintf(f, "{");
    static const char *const sp[][2] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                        {"eos_token", "tokenizer.ggml.eos_token_id"},
                                        {"pad_token", "tokenizer.ggml.padding_token_id"}};
    for (int k = 0; k < 3; k++) {
        uint32_t id = u32_of(g, sp[k][1], UINT32_MAX);
        if (id == UINT32_MAX) continue;
        struct gguf_str s = gguf_arr_str(toks, id);
        fprintf(f, "\"%s\":{\"content\":", sp[k][0]);
        json_escaped(f, s.ptr, s.len);
        fprintf(f, "},");
    }
    bool add_bos = false;
    if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos, &err) == KVIK_OK)
        fprintf(f, "\"add_bos_token\":%s,", add_bos ? "true" : "false");
    struct gguf_str tpl;
    if (gguf_get_str(g, "tokenizer.chat_template", &tpl, &err) == KVIK_OK) {
        fprintf(f, "\"chat_template\":");
        json_escaped(f, tpl.ptr, tpl.len);
        fprintf(f, ",");
    }
    fprintf(f, "\"model_max_length\":2048}");
    fclose(f);
}

static bool same_value(const struct gguf *a, const struct gguf *b, const char *key) {
    const struct gguf_value *va = gguf_kv_value(a, gguf_find_key(a, key)), *vb = gguf_kv_value(b, gguf_find_key(b, key));
    if (!va || !vb) return !va && !vb;
    if (va->type != vb->type) return false;
    if (va->type == GGUF_TYPE_STRING) {
        struct gguf_str sa, sb;
        struct kvik_err err = {0};
        return gguf_get_str(a, key, &sa, &err) == KVIK_OK && gguf_get_str(b, key, &sb, &err) == KVIK_OK &&
               sa.len == sb.len && !memcmp(sa.ptr, sb.ptr, sa.len);
    }
    if (va->type == GGUF_TYPE_ARRAY) {
        uint64_t n = gguf_arr_len(va);
        if (n != gguf_arr_len(vb) || gguf_arr_type(va) != gguf_arr_type(vb)) return false;
        for (uint64_t i = 0; i < n; i++) {
            if (gguf_arr_type(va) == GGUF_TYPE_STRING) {
                struct gguf_str sa = gguf_arr_str(va, i), sb = gguf_arr_str(vb, i);
                if (sa.len != sb.len || memcmp(sa.ptr, sb.ptr, sa.len)) return false;
            } else {
                struct gguf_value ea, eb;
                int64_t ia, ib;
                if (!gguf_arr_elem(va, i, &ea) || !gguf_arr_elem(vb, i, &eb) || !gguf_value_to_i64(&ea, &ia) ||
                    !gguf_value_to_i64(&eb, &ib) || ia != ib)
                    return false;
            }
        }
        return true;
    }
    double da, db;
    return gguf_value_to_f64(va, &da) && gguf_value_to_f64(vb, &db) && da == db;
}

static void round_trip(const char *shape_name, bool tied) {
    char vocab[4096];
    if (!test_default_model(vocab, sizeof vocab)) return;
    struct synth_shape shape = *synth_shape_find(shape_name);
    shape.tied_output = tied;
    char dir[64], src[200], out[200];
    snprintf(dir, sizeof dir, "/tmp/kvik-test-convert-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/src.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    struct synth_params sp = {.shape = &shape, .type = TENSOR_TYPE_F32, .seed = 11, .vocab_path = vocab,
                              .n_threads = 2};
    struct kvik_err err = {0};
    REQUIRE_MSG(synth_write(src, &sp, NULL, &err) == KVIK_OK, "synth: %s", err.msg);
    struct gguf *a = NULL, *b = NULL;
    REQUIRE(gguf_open(src, &a, &err) == KVIK_OK);
    const char *arch = synth_family_name(shape.family);
    bool llama = !strcmp(arch, "llama");
    write_meta(a, dir, arch, tied);
    write_weights(a, dir, llama, shape.n_head, shape.n_head_kv);
    struct convert_params p;
    convert_params_default(&p);
    p.dir = dir;
    p.out_path = out;
    p.ftype = QUANT_FTYPE_F32;
    REQUIRE_MSG(convert_hf(&p, &err) == KVIK_OK, "%s: convert: %s", shape_name, err.msg);
    REQUIRE(gguf_open(out, &b, &err) == KVIK_OK);
    CHECK_EQ_INT((int)gguf_n_tensors(b), (int)gguf_n_tensors(a));
    for (int64_t i = 0; i < gguf_n_tensors(a); i++) {
        const struct gguf_tensor *ta = gguf_tensor(a, i);
        int64_t j = gguf_find_tensor(b, ta->name);
        CHECK_MSG(j >= 0, "%s: %s is in the conversion", shape_name, ta->name);
        if (j < 0) continue;
        const struct gguf_tensor *tb = gguf_tensor(b, j);
        CHECK_MSG(tb->type == ta->type && tb->n_dims == ta->n_dims && tb->ne[0] == ta->ne[0] &&
                      tb->ne[1] == ta->ne[1] && tb->n_bytes == ta->n_bytes && !memcmp(tb->data, ta->data, ta->n_bytes),
                  "%s: %s has the original's type, shape and bytes", shape_name, ta->name);
    }
    char keys[16][96];
    const char *suffix[] = {"context_length", "embedding_length", "feed_forward_length", "block_count",
                            "attention.head_count", "attention.head_count_kv", "rope.freq_base",
                            "attention.layer_norm_rms_epsilon"};
    int nk = 0;
    for (size_t k = 0; k < sizeof suffix / sizeof suffix[0]; k++) snprintf(keys[nk++], 96, "%s.%s", arch, suffix[k]);
    const char *tk[] = {"general.architecture", "tokenizer.ggml.model", "tokenizer.ggml.tokens",
                        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
                        "tokenizer.ggml.eos_token_id", "tokenizer.chat_template"};
    for (size_t k = 0; k < sizeof tk / sizeof tk[0]; k++) snprintf(keys[nk++], 96, "%s", tk[k]);
    for (int k = 0; k < nk; k++) CHECK_MSG(same_value(a, b, keys[k]), "%s: %s as the original's", shape_name, keys[k]);
    struct gguf_str pre;
    REQUIRE(gguf_get_str(b, "tokenizer.ggml.pre", &pre, &err) == KVIK_OK);
    const char *want = llama ? "smollm" : "qwen2";
    CHECK_MSG(pre.len == strlen(want) && !memcmp(pre.ptr, want, pre.len), "%s: pre %.*s", shape_name, (int)pre.len,
              pre.ptr);
    struct model *m = NULL;
    CHECK_MSG(model_load(out, &m, &err) == KVIK_OK, "%s: the conversion loads: %s", shape_name, err.msg);
    model_free(m);
    gguf_close(a);
    gguf_close(b);
    const char *files[] = {"src.gguf", "out.gguf", "config.json", "tokenizer.json", "tokenizer_config.json",
                           "model.safetensors"};
    char path[300];
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        unlink(path);
    }
    rmdir(dir);
}

TEST(convert_llama_round_trip) { round_trip("tiny-llama", false); }
TEST(convert_qwen2_round_trip) { round_trip("tiny-qwen2", true); }
