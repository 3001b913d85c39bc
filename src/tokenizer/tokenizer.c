/*
 * tokenizer.c — loading a vocabulary from GGUF metadata (byte-level BPE,
 * SentencePiece BPE or WordPiece) and decoding ids back to bytes (whole or
 * streamed). Lookups by text or id are in vocab.c.
 *
 * Byte-level BPE stores every token as text over a 256-character alphabet:
 * byte b is written as the code point GPT-2's bytes_to_unicode gives it —
 * itself for the printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF, and
 * U+0100 + k for the k-th of the other 68 bytes in ascending order (so a
 * space, 0x20, is U+0120 'Ġ'). Loading turns each token's text back into
 * the bytes it stands for, once, so decoding is a copy.
 *
 * SentencePiece ("llama") and WordPiece ("bert") vocabularies spell a space
 * as "▁" (U+2581): their pieces turn it back into a space. A WordPiece
 * vocabulary, as llama.cpp's converter writes it, marks word-initial pieces
 * with a leading "▁" and stores continuation pieces without their "##", so
 * the pieces concatenate to words separated by spaces; its special tokens
 * (and bracketed ones like "[unused0]") get a leading space too, as Hugging
 * Face's WordPiece decoder puts one before every non-"##" token.
 *
 * The GGUF keys read:
 *   tokenizer.ggml.model          "gpt2", "llama", "gemma4" or "bert" (required)
 *   tokenizer.ggml.pre            pre-tokenizer name (absent: "default" = gpt-2);
 *                                 gpt2 only, recorded but unused otherwise
 *   tokenizer.ggml.tokens         [n_vocab] strings (required)
 *   tokenizer.ggml.token_type     [n_vocab] int32 (absent: all NORMAL)
 *   tokenizer.ggml.merges         [n] "left right" strings; rank = index (gpt2;
 *                                 gemma4: required)
 *   tokenizer.ggml.scores         [n_vocab] float32 (llama: required; gemma4:
 *                                 not read)
 *   tokenizer.ggml.{bos,eos,unknown,padding,eot,eom}_token_id
 *   tokenizer.ggml.{cls,seperator}_token_id   bert: BOS / EOS when
 *                                 bos/eos_token_id are absent
 *   tokenizer.ggml.add_bos_token / add_eos_token (absent: true / false for
 *                                 llama and gemma4, true / true for bert, false
 *                                 for gpt2;
 *                                 bert also takes add_sep_token for EOS)
 *   tokenizer.ggml.add_space_prefix  llama (absent: true), gemma4 (absent: false)
 * An id key that names no token is ignored for gpt2 (such files exist) and
 * is a KVIK_ERR_FORMAT error for llama and bert, except padding/eot/eom.
 */
#include <math.h>
#include <stdlib.h>

#include "tokenizer/tokenizer_int.h"
#include "tokenizer/unicode.h"

/* ---- byte-level alphabet ------------------------------------------------ */

static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    /* k-th non-printable byte -> U+0100 + k */
    uint32_t k = 0;
    for (uint32_t c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) k++;
    return 0x100 + k;
}

/* Inverse: the byte code point cp stands for, or -1 if it is not one. */
static int cp_to_byte(uint32_t cp) {
    static const uint8_t others[68] = {
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D,
        0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1B,
        0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x7F, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
        0x88, 0x89, 0x8A, 0x8B, 0x8C, 0x8D, 0x8E, 0x8F, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95,
        0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xAD,
    };
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 68) return others[cp - 0x100];
    return -1;
}

static uint64_t table_size(uint64_t n) {
    uint64_t s = 16;
    while (s < 2 * n) s *= 2;
    return s;
}

/* ---- loading ------------------------------------------------------------ */

static const struct {
    const char *name;
    enum pretok_kind kind;
} k_pretoks[] = {
    /* tokenizer.ggml.pre names as llama.cpp's converter writes them, grouped
     * by the split their models' tokenizer.json declares ("default": no
     * name, GPT-2's ByteLevel). Embedding-only names (jina-*, roberta-bpe,
     * modern-bert) are left out: their post-processing is not done here. */
    {"default", PRETOK_GPT2},        {"gpt-2", PRETOK_GPT2},          {"mpt", PRETOK_GPT2},
    {"olmo", PRETOK_GPT2},           {"jais", PRETOK_GPT2},           {"phi-2", PRETOK_GPT2},
    {"trillion", PRETOK_GPT2},       {"gigachat", PRETOK_GPT2},       {"a.x-4.0", PRETOK_GPT2},
    {"mellum", PRETOK_GPT2},         {"granite-docling", PRETOK_GPT2}, {"exaone4", PRETOK_GPT2},
    {"smollm", PRETOK_STARCODER},    {"starcoder", PRETOK_STARCODER}, {"refact", PRETOK_STARCODER},
    {"command-r", PRETOK_STARCODER}, {"codeshell", PRETOK_STARCODER}, {"exaone", PRETOK_STARCODER},
    {"minerva", PRETOK_STARCODER},   {"minerva-7b", PRETOK_STARCODER}, {"mellum2", PRETOK_STARCODER},
    {"llama3", PRETOK_LLAMA3},       {"llama-v3", PRETOK_LLAMA3},     {"llama-bpe", PRETOK_LLAMA3},
    {"smaug-bpe", PRETOK_LLAMA3},    {"dbrx", PRETOK_LLAMA3},         {"chatglm-bpe", PRETOK_LLAMA3},
    {"glm4", PRETOK_LLAMA3},         {"falcon3", PRETOK_LLAMA3},      {"falcon-h1", PRETOK_LLAMA3},
    {"pixtral", PRETOK_LLAMA3},      {"midm-2.0", PRETOK_LLAMA3},     {"lfm2", PRETOK_LLAMA3},
    {"qwen2", PRETOK_QWEN2},         {"qwen", PRETOK_QWEN2},          {"deepseek-r1-qwen", PRETOK_QWEN2},
    {"stablelm2", PRETOK_QWEN2},     {"megrez", PRETOK_QWEN2},        {"hunyuan", PRETOK_QWEN2},
    {"solar-open", PRETOK_QWEN2},    {"kormo", PRETOK_QWEN2},         {"qwen35", PRETOK_QWEN35},
    {"gpt-4o", PRETOK_GPT4O},        {"llama4", PRETOK_GPT4O},        {"minimax-m2", PRETOK_GPT4O},
    {"kanana2", PRETOK_GPT4O},       {"talkie", PRETOK_GPT4O},        {"tekken", PRETOK_TEKKEN},
    {"deepseek-llm", PRETOK_DEEPSEEK_LLM}, {"deepseek-coder", PRETOK_DEEPSEEK_CODER},
    {"deepseek-v3", PRETOK_DEEPSEEK_V3},   {"hunyuan-dense", PRETOK_DEEPSEEK_V3},
    {"joyai-llm", PRETOK_DEEPSEEK_V3},     {"hy_v4", PRETOK_DEEPSEEK_V3},
    {"falcon", PRETOK_FALCON},       {"bloom", PRETOK_BLOOM},         {"poro-chat", PRETOK_BLOOM},
    {"gpt3-finnish", PRETOK_BLOOM},  {"viking", PRETOK_VIKING},
};

/* Pre-tokenizer names whose models' tokenizer.json sets the BPE model's
 * ignore_merges (a word that is a token whole is that token, merges or
 * not): Llama 3 and the vocabularies llama.cpp's loader gives the same
 * treatment (falcon3, falcon-h1, pixtral, midm-2.0, lfm2), Mistral's
 * tekken, and GLM-4 (zai-org/GLM-4.7-Flash's tokenizer.json sets it).
 * Hugging Face's converter from tiktoken sets it, as tiktoken itself looks
 * a piece up whole before merging. Not set for dbrx, smaug-bpe,
 * chatglm-bpe, gpt-4o or llama4: llama.cpp does not, and no tokenizer.json
 * at hand says otherwise. */
static const char *const k_ignore_merges[] = {
    "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
    "midm-2.0", "lfm2", "tekken", "glm4",
};

/* Pre-tokenizer names whose models' tokenizer.json normalizes with NFC:
 * Qwen and Qwen2 (and the Qwen2.5-based deepseek-r1-qwen distills), the
 * GPT-NeoX-20B tokenizer of MPT and OLMo, and Command-R. Not llama3 or
 * glm4 (their normalizer is null), nor names whose tokenizer.json could
 * not be checked here (dbrx, chatglm-bpe, exaone, stablelm2, megrez,
 * hunyuan, ...): NFC changes ids only on text that is not NFC already.
 * Not qwen35: the sdist's ggml-vocab-qwen35.gguf.out splits decomposed
 * "e\u0301" as given (its ids differ under NFC). */
static const char *const k_nfc[] = {
    "qwen2", "qwen", "deepseek-r1-qwen", "mpt", "olmo", "command-r",
};

static bool name_in(const char *const *names, size_t n, const char *name, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return true;
    return false;
}

/* tokenizer.ggml.model names. "gemma4" (Gemma 4) is SentencePiece-style
 * text, "▁" for spaces and byte fallback, whose pairs merge by the rank of
 * tokenizer.ggml.merges: its scores are all -1000 and say nothing. */
static const struct {
    const char *name;
    enum tok_model model;
    bool ranks; /* merges by rank (TOKMODEL_SPM) */
} k_models[] = {
    {"gpt2", TOKMODEL_BPE, false},
    {"llama", TOKMODEL_SPM, false},
    {"gemma4", TOKMODEL_SPM, true},
    {"bert", TOKMODEL_WPM, false},
};

/* Control tokens that end a turn in common chat formats. */
static const char *const k_eog_texts[] = {
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>",
    "<|end|>",       "<EOT>",      "<|END_OF_TURN_TOKEN|>", "<|end_of_text|>",
};

static int32_t get_id(const struct gguf *g, const char *key, int32_t n_vocab) {
    uint32_t v;
    if (gguf_get_u32(g, key, &v, NULL) != KVIK_OK || v >= (uint32_t)n_vocab) return -1;
    return (int32_t)v;
}

/* The token id at key into *id (-1 if the key is absent); KVIK_ERR_FORMAT
 * if it is present but not an integer naming a token. */
static kvik_status get_id_strict(const struct gguf *g, const char *key, int32_t n_vocab,
                                 int32_t *id, struct kvik_err *err) {
    *id = -1;
    int64_t k = gguf_find_key(g, key), v;
    if (k < 0) return KVIK_OK;
    if (!gguf_value_to_i64(gguf_kv_value(g, k), &v) || v < 0 || v >= n_vocab)
        return err_set(err, KVIK_ERR_FORMAT, "%s: not a token id (n_vocab %d)", key, n_vocab);
    *id = (int32_t)v;
    return KVIK_OK;
}

static bool get_flag(const struct gguf *g, const char *key, bool dflt) {
    bool v;
    return gguf_get_bool(g, key, &v, NULL) == KVIK_OK ? v : dflt;
}

/* Tokens cut out of the text before pre-tokenization: control and unknown
 * ones ("<|endoftext|>", "<unk>") only with parse_special, as Hugging Face
 * matches its special added tokens; user-defined ones always. */
static bool is_special_type(int t) {
    return t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_UNKNOWN || t == TOKEN_TYPE_USER_DEFINED;
}

static int cmp_special(const void *pa, const void *pb) {
    const struct special_tok *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Decoded bytes of token id (text t[0..n)) into out (>= n + 1 bytes);
 * returns their count. Normal tokens of a gpt2 vocabulary map each
 * character back to its byte (a character outside the alphabet is kept as
 * UTF-8), those of llama and bert turn "▁" into a space; byte tokens
 * "<0xAB>" give that byte; the rest give their text, which in a bert
 * vocabulary (as bracketed normal tokens do) takes a leading space. */
static size_t decode_text(enum tok_model model, int type, const char *t, size_t n, uint8_t *out) {
    if (type == TOKEN_TYPE_BYTE && n == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>') {
        char hex[3] = {t[3], t[4], 0};
        char *end;
        long v = strtol(hex, &end, 16);
        if (*end == 0) {
            out[0] = (uint8_t)v;
            return 1;
        }
    }
    bool normal = type == TOKEN_TYPE_NORMAL || type == TOKEN_TYPE_UNDEFINED;
    size_t o = 0;
    if (model == TOKMODEL_WPM && (!normal || (n >= 2 && t[0] == '[' && t[n - 1] == ']'))) {
        out[o++] = ' '; /* a word of its own */
        if (n) memcpy(out + o, t, n);
        return o + n;
    }
    if (!normal) {
        if (n) memcpy(out, t, n);
        return n;
    }
    if (model != TOKMODEL_BPE) {
        for (size_t i = 0; i < n; i++) {
            if (i + 2 < n && (uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 &&
                (uint8_t)t[i + 2] == 0x81) {
                out[o++] = ' ';
                i += 2;
            } else {
                out[o++] = (uint8_t)t[i];
            }
        }
        return o;
    }
    for (size_t i = 0; i < n;) {
        struct ucp u = utf8_decode((const uint8_t *)t + i, n - i);
        int b = (u.cp & UCP_INVALID) ? -1 : cp_to_byte(u.cp);
        if (b >= 0) out[o++] = (uint8_t)b;
        else for (uint32_t k = 0; k < u.len; k++) out[o++] = (uint8_t)t[i + k];
        i += u.len;
    }
    return o;
}

kvik_status tokenizer_load(const struct gguf *g, struct tokenizer **out, struct kvik_err *err) {
    *out = NULL;
    kvik_status st;
    struct gguf_str model, pre = {"default", 7};
    if ((st = gguf_get_str(g, "tokenizer.ggml.model", &model, err)) != KVIK_OK) return st;
    int mk = -1;
    bool ranks = false;
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++)
        if (strlen(k_models[i].name) == model.len && memcmp(k_models[i].name, model.ptr, model.len) == 0) {
            mk = (int)k_models[i].model;
            ranks = k_models[i].ranks;
        }
    if (mk < 0)
        return err_set(err, KVIK_ERR_UNSUPPORTED,
                       "tokenizer model \"%.*s\" is not supported (gpt2, llama, gemma4, bert)",
                       (int)(model.len > 64 ? 64 : model.len), model.ptr);
    if (gguf_find_key(g, "tokenizer.ggml.pre") >= 0 &&
        (st = gguf_get_str(g, "tokenizer.ggml.pre", &pre, err)) != KVIK_OK)
        return st;
    int kind = -1;
    for (size_t i = 0; i < sizeof k_pretoks / sizeof k_pretoks[0]; i++)
        if (strlen(k_pretoks[i].name) == pre.len && memcmp(k_pretoks[i].name, pre.ptr, pre.len) == 0)
            kind = (int)k_pretoks[i].kind;
    if (kind < 0 && mk == TOKMODEL_BPE)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "tokenizer pre-tokenizer \"%.*s\" is not supported",
                       (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);

    const struct gguf_value *tokens, *types = NULL, *merges = NULL, *scores = NULL;
    if (gguf_find_key(g, "tokenizer.ggml.tokens") < 0)
        return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.tokens is missing");
    if ((st = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err)) != KVIK_OK)
        return st;
    uint64_t nv = gguf_arr_len(tokens);
    if (nv == 0 || nv > INT32_MAX / 2)
        return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.tokens: bad length %llu",
                       (unsigned long long)nv);
    if (gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        if ((st = gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &types, err)) != KVIK_OK) return st;
        if (gguf_arr_len(types) != nv ||
            (gguf_arr_type(types) != GGUF_TYPE_INT32 && gguf_arr_type(types) != GGUF_TYPE_UINT32))
            return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.token_type: want %llu int32s",
                           (unsigned long long)nv);
    }
    if ((mk == TOKMODEL_BPE || ranks) && gguf_find_key(g, "tokenizer.ggml.merges") >= 0 &&
        (st = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err)) != KVIK_OK)
        return st;
    if (ranks && !merges)
        return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.merges is missing (%.*s vocabulary)",
                       (int)model.len, model.ptr);
    if (mk == TOKMODEL_SPM && !ranks) {
        if (gguf_find_key(g, "tokenizer.ggml.scores") < 0)
            return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.scores is missing (llama vocabulary)");
        if (gguf_get_arr(g, "tokenizer.ggml.scores", -1, &scores, err) != KVIK_OK ||
            gguf_arr_type(scores) != GGUF_TYPE_FLOAT32 || gguf_arr_len(scores) != nv)
            return err_set(err, KVIK_ERR_FORMAT, "tokenizer.ggml.scores: want %llu float32s",
                           (unsigned long long)nv);
    }
    uint64_t nm = merges ? gguf_arr_len(merges) : 0;

    struct tokenizer *tok = calloc(1, sizeof *tok);
    int32_t *type32 = NULL;
    if (!tok) return err_set(err, KVIK_ERR_NOMEM, "tokenizer: out of memory");
    tok->n_vocab = (int32_t)nv;
    tok->model = (enum tok_model)mk;
    tok->spm_ranks = ranks;
    tok->pretok = kind >= 0 ? (enum pretok_kind)kind : PRETOK_GPT2; /* gpt2 only */
    tok->ignore_merges = mk == TOKMODEL_BPE &&
                         name_in(k_ignore_merges, sizeof k_ignore_merges / sizeof k_ignore_merges[0],
                                 pre.ptr, pre.len);
    tok->nfc = mk == TOKMODEL_BPE && name_in(k_nfc, sizeof k_nfc / sizeof k_nfc[0], pre.ptr, pre.len);
    snprintf(tok->pre_name, sizeof tok->pre_name, "%.*s", (int)pre.len, pre.ptr);

    /* token texts and types */
    uint64_t total = 0;
    for (uint64_t i = 0; i < nv; i++) total += gguf_arr_str(tokens, i).len + 1;
    tok->text = malloc(total);
    tok->text_off = malloc((nv + 1) * sizeof *tok->text_off);
    tok->piece = malloc(total);
    tok->piece_off = malloc((nv + 1) * sizeof *tok->piece_off);
    tok->type = malloc(nv);
    tok->flags = calloc(nv, 1);
    tok->vocab_mask = table_size(nv) - 1;
    tok->vocab = malloc((tok->vocab_mask + 1) * sizeof *tok->vocab);
    type32 = malloc(nv * sizeof *type32);
    if (scores) tok->scores = malloc(nv * sizeof *tok->scores);
    if (!tok->text || !tok->text_off || !tok->piece || !tok->piece_off || !tok->type ||
        !tok->flags || !tok->vocab || !type32 || (scores && !tok->scores))
        goto nomem;
    if (scores) {
        gguf_arr_copy(scores, tok->scores, nv * sizeof *tok->scores);
        for (uint64_t i = 0; i < nv; i++)
            if (isnan(tok->scores[i])) tok->scores[i] = -INFINITY;
    }
    if (types) {
        gguf_arr_copy(types, type32, nv * sizeof *type32);
    } else {
        for (uint64_t i = 0; i < nv; i++) type32[i] = TOKEN_TYPE_NORMAL;
    }
    memset(tok->vocab, 0xff, (tok->vocab_mask + 1) * sizeof *tok->vocab);
    uint64_t off = 0, poff = 0;
    int32_t n_specials = 0;
    for (uint64_t i = 0; i < nv; i++) {
        struct gguf_str s = gguf_arr_str(tokens, i);
        int t = type32[i] >= 0 && type32[i] <= TOKEN_TYPE_BYTE ? type32[i] : TOKEN_TYPE_NORMAL;
        tok->type[i] = (uint8_t)t;
        tok->text_off[i] = off;
        if (s.len) memcpy(tok->text + off, s.ptr, s.len);
        tok->text[off + s.len] = 0;
        off += s.len + 1;
        tok->piece_off[i] = poff;
        poff += decode_text(tok->model, t, s.ptr ? s.ptr : "", s.len, tok->piece + poff);
        if (s.len > tok->max_text) tok->max_text = s.len;
        if (poff - tok->piece_off[i] > tok->max_piece) tok->max_piece = poff - tok->piece_off[i];
        if (is_special_type(t) && s.len > 0) n_specials++;
    }
    tok->text_off[nv] = off;
    tok->piece_off[nv] = poff;
    /* hash; the first of duplicate texts wins */
    for (uint64_t i = 0; i < nv; i++) vocab_insert(tok, (int32_t)i);

    /* single bytes: byte-level characters, or "<0xAB>" byte tokens */
    for (int b = 0; b < 256; b++) {
        uint8_t u[8];
        int n = tok->model == TOKMODEL_BPE ? utf8_encode(byte_to_cp((uint8_t)b), u)
                                           : snprintf((char *)u, sizeof u, "<0x%02X>", b);
        tok->byte_tok[b] = vocab_find2(tok, (const char *)u, (size_t)n, "", 0);
        if (tok->model == TOKMODEL_BPE) {
            tok->byte_char[b][0] = (uint8_t)n; /* 1 or 2: code points below U+0800 */
            memcpy(&tok->byte_char[b][1], u, (size_t)n);
        }
    }

    /* merges: "left right" -> (left id, right id) -> (rank, merged id) */
    tok->merge_mask = table_size(nm) - 1;
    tok->merges = malloc((tok->merge_mask + 1) * sizeof *tok->merges);
    if (!tok->merges) goto nomem;
    for (uint64_t i = 0; i <= tok->merge_mask; i++) tok->merges[i].key = MERGE_EMPTY;
    int64_t skipped = 0;
    for (uint64_t r = 0; r < nm && r < INT32_MAX; r++) {
        struct gguf_str s = gguf_arr_str(merges, r);
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            skipped++;
            continue;
        }
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        int32_t a = vocab_find2(tok, s.ptr, la, "", 0);
        int32_t b = vocab_find2(tok, sp + 1, lb, "", 0);
        int32_t m = vocab_find2(tok, s.ptr, la, sp + 1, lb);
        if (a < 0 || b < 0 || m < 0) {
            skipped++;
            continue;
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t h = key * 0x9E3779B97F4A7C15ull;
        uint64_t j = (h ^ (h >> 29)) & tok->merge_mask;
        while (tok->merges[j].key != MERGE_EMPTY && tok->merges[j].key != key)
            j = (j + 1) & tok->merge_mask;
        if (tok->merges[j].key == key) continue; /* a repeated pair keeps its first rank */
        tok->merges[j] = (struct merge_slot){key, (int32_t)r, m};
        tok->n_merges++;
    }
    if (skipped) log_debug("tokenizer: %lld merges name tokens not in the vocabulary", (long long)skipped);

    /* special ids and flags */
    int32_t n = tok->n_vocab;
    if (tok->model == TOKMODEL_BPE) {
        tok->bos = get_id(g, "tokenizer.ggml.bos_token_id", n);
        tok->eos = get_id(g, "tokenizer.ggml.eos_token_id", n);
        tok->unk = get_id(g, "tokenizer.ggml.unknown_token_id", n);
    } else {
        bool bert = tok->model == TOKMODEL_WPM;
        if ((st = get_id_strict(g, "tokenizer.ggml.bos_token_id", n, &tok->bos, err)) ||
            (st = get_id_strict(g, "tokenizer.ggml.eos_token_id", n, &tok->eos, err)) ||
            (st = get_id_strict(g, "tokenizer.ggml.unknown_token_id", n, &tok->unk, err)) ||
            (bert && tok->bos < 0 &&
             (st = get_id_strict(g, "tokenizer.ggml.cls_token_id", n, &tok->bos, err))) ||
            (bert && tok->eos < 0 &&
             (st = get_id_strict(g, "tokenizer.ggml.seperator_token_id", n, &tok->eos, err))))
            goto fail;
    }
    tok->pad = get_id(g, "tokenizer.ggml.padding_token_id", n);
    tok->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token", tok->model != TOKMODEL_BPE);
    bool eos_dflt = tok->model == TOKMODEL_WPM && get_flag(g, "tokenizer.ggml.add_sep_token", true);
    tok->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token", eos_dflt);
    tok->space_prefix = tok->model == TOKMODEL_SPM &&
                        get_flag(g, "tokenizer.ggml.add_space_prefix", !tok->spm_ranks);
    tok->strip_lead_space = tok->space_prefix || tok->model == TOKMODEL_WPM;
    tok->spm_words = tok->model == TOKMODEL_SPM && spm_words_split(tok);
    int32_t eot = get_id(g, "tokenizer.ggml.eot_token_id", n);
    int32_t eom = get_id(g, "tokenizer.ggml.eom_token_id", n);
    if (tok->eos >= 0) tok->flags[tok->eos] |= TOKFLAG_EOG;
    if (eot >= 0) tok->flags[eot] |= TOKFLAG_EOG;
    if (eom >= 0) tok->flags[eom] |= TOKFLAG_EOG;
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof k_eog_texts[0]; k++) {
        int32_t id = tokenizer_find(tok, k_eog_texts[k], strlen(k_eog_texts[k]));
        if (id >= 0 && (tok->type[id] == TOKEN_TYPE_CONTROL || tok->type[id] == TOKEN_TYPE_USER_DEFINED))
            tok->flags[id] |= TOKFLAG_EOG;
    }

    /* special tokens, longest first */
    tok->specials = malloc((size_t)(n_specials ? n_specials : 1) * sizeof *tok->specials);
    if (!tok->specials) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        int t = tok->type[i];
        size_t len;
        const char *txt = tok_text(tok, i, &len);
        if (!is_special_type(t) || len == 0 || len > UINT32_MAX) continue;
        tok->specials[tok->n_specials++] =
            (struct special_tok){txt, (uint32_t)len, i, t != TOKEN_TYPE_USER_DEFINED};
        uint8_t c = (uint8_t)txt[0];
        tok->special_first[c >> 3] |= (uint8_t)(1u << (c & 7));
    }
    qsort(tok->specials, (size_t)tok->n_specials, sizeof *tok->specials, cmp_special);

    free(type32);
    *out = tok;
    return KVIK_OK;

nomem:
    free(type32);
    tokenizer_free(tok);
    return err_set(err, KVIK_ERR_NOMEM, "tokenizer: out of memory (%llu tokens)",
                   (unsigned long long)nv);
fail:
    free(type32);
    tokenizer_free(tok);
    return st;
}

void tokenizer_free(struct tokenizer *tok) {
    if (!tok) return;
    free(tok->text);
    free(tok->text_off);
    free(tok->piece);
    free(tok->piece_off);
    free(tok->type);
    free(tok->flags);
    free(tok->vocab);
    free(tok->merges);
    free(tok->specials);
    free(tok->scores);
    free(tok);
}

/* ---- accessors ---------------------------------------------------------- */

int32_t tokenizer_n_vocab(const struct tokenizer *tok) { return tok->n_vocab; }
int32_t tokenizer_bos(const struct tokenizer *tok) { return tok->bos; }
int32_t tokenizer_eos(const struct tokenizer *tok) { return tok->eos; }
int32_t tokenizer_unk(const struct tokenizer *tok) { return tok->unk; }
int32_t tokenizer_pad(const struct tokenizer *tok) { return tok->pad; }
bool tokenizer_add_bos(const struct tokenizer *tok) { return tok->add_bos; }
bool tokenizer_add_eos(const struct tokenizer *tok) { return tok->add_eos; }
const char *tokenizer_pre_name(const struct tokenizer *tok) { return tok->pre_name; }
size_t tokenizer_max_piece_len(const struct tokenizer *tok) { return tok->max_piece; }

bool tokenizer_is_eog(const struct tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->n_vocab && (tok->flags[id] & TOKFLAG_EOG);
}

/* ---- decoding ----------------------------------------------------------- */

/* The bytes token id decodes to (len 0 for a hidden special token). */
static const uint8_t *piece_of(const struct tokenizer *tok, int32_t id, bool render_special,
                               size_t *len) {
    int t = tok->type[id];
    if (!render_special && (t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_UNKNOWN)) {
        *len = 0;
        return tok->piece;
    }
    *len = (size_t)(tok->piece_off[id + 1] - tok->piece_off[id]);
    return tok->piece + tok->piece_off[id];
}

int64_t tokenizer_decode_piece(const struct tokenizer *tok, int32_t id, char *buf, size_t len,
                               bool render_special) {
    if (id < 0 || id >= tok->n_vocab) return KVIK_ERR_INVALID_ARG;
    size_t n;
    const uint8_t *p = piece_of(tok, id, render_special, &n);
    if (n) memcpy(buf, p, n < len ? n : len);
    return (int64_t)n;
}

/* Python's s.replace(from, to) in place on s[0..n) (to no longer than
 * from: left to right, matches do not overlap); returns the new length. */
static size_t replace_all(uint8_t *s, size_t n, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), o = 0;
    for (size_t i = 0; i < n;) {
        if (i + nf <= n && memcmp(s + i, from, nf) == 0) {
            memcpy(s + o, to, nt);
            o += nt;
            i += nf;
        } else {
            s[o++] = s[i++];
        }
    }
    return o;
}

/* Hugging Face's clean_up_tokenization (WordPiece decoding), in its order. */
static size_t cleanup_spaces(uint8_t *s, size_t n) {
    static const char *const k_rules[][2] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},     {" ,", ","},       {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"},   {" 's", "'s"},   {" 've", "'ve"},   {" 're", "'re"},
    };
    for (size_t r = 0; r < sizeof k_rules / sizeof k_rules[0]; r++)
        n = replace_all(s, n, k_rules[r][0], k_rules[r][1]);
    return n;
}

/* Concatenated pieces of ids[0..n) into buf (len bytes, or a measuring
 * run), the first piece without its leading space when the vocabulary
 * wants that; returns the full length or KVIK_ERR_INVALID_ARG. */
static int64_t join_pieces(const struct tokenizer *tok, const int32_t *ids, int64_t n, uint8_t *buf,
                           size_t len, bool render_special) {
    size_t o = 0;
    bool strip = tok->strip_lead_space;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_vocab) return KVIK_ERR_INVALID_ARG;
        size_t pn;
        const uint8_t *p = piece_of(tok, ids[i], render_special, &pn);
        if (strip && pn > 0) {
            if (p[0] == ' ') {
                p++;
                pn--;
            }
            strip = false;
        }
        if (o < len) memcpy(buf + o, p, pn < len - o ? pn : len - o);
        o += pn;
    }
    return (int64_t)o;
}

int64_t tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, int64_t n, char *buf,
                         size_t len, bool render_special) {
    if (tok->model != TOKMODEL_WPM) return join_pieces(tok, ids, n, (uint8_t *)buf, len, render_special);
    /* WordPiece: the clean-up needs the whole text */
    int64_t full = join_pieces(tok, ids, n, NULL, 0, render_special);
    if (full <= 0) return full;
    uint8_t *tmp = malloc((size_t)full);
    if (!tmp) return KVIK_ERR_NOMEM;
    join_pieces(tok, ids, n, tmp, (size_t)full, render_special);
    size_t m = cleanup_spaces(tmp, (size_t)full);
    if (len) memcpy(buf, tmp, m < len ? m : len);
    free(tmp);
    return (int64_t)m;
}

/* ---- streaming ---------------------------------------------------------- */

size_t detok_min_cap(const struct tokenizer *tok) { return 3 * (tok->max_piece + 4); }

void detok_init(struct detok_stream *st, const struct tokenizer *tok, bool render_special) {
    memset(st, 0, sizeof *st);
    st->tok = tok;
    st->render_special = render_special;
}

/* How many bytes of s[0..n) (s[0] a lead byte of length need) continue a
 * valid sequence: need when complete, less when cut short by the end (then
 * *cut is set) or by a bad byte. Follows the Unicode table of well-formed
 * sequences, so overlong forms and surrogates are bad early. */
static int utf8_valid_prefix(const uint8_t *s, size_t n, int need, bool *cut) {
    *cut = false;
    for (int k = 1; k < need; k++) {
        if ((size_t)k >= n) {
            *cut = true;
            return k;
        }
        uint8_t lo = 0x80, hi = 0xBF;
        if (k == 1) {
            if (s[0] == 0xE0) lo = 0xA0;
            else if (s[0] == 0xED) hi = 0x9F;
            else if (s[0] == 0xF0) lo = 0x90;
            else if (s[0] == 0xF4) hi = 0x8F;
        }
        if (s[k] < lo || s[k] > hi) return k;
    }
    return need;
}

static size_t put_fffd(char *out, size_t o) {
    out[o] = (char)0xEF;
    out[o + 1] = (char)0xBF;
    out[o + 2] = (char)0xBD;
    return o + 3;
}

/* Emits the valid UTF-8 of s[0..n) into out, U+FFFD for bad subparts, and
 * keeps an incomplete tail in st. */
static size_t stream_bytes(struct detok_stream *st, const uint8_t *s, size_t n, char *out) {
    size_t o = 0, i = 0;
    while (i < n) {
        int need = utf8_seq_len(s[i]);
        if (need == 1) {
            out[o++] = (char)s[i++];
            continue;
        }
        if (need == 0) {
            o = put_fffd(out, o);
            i++;
            continue;
        }
        bool cut;
        int k = utf8_valid_prefix(s + i, n - i, need, &cut);
        if (k == need) {
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
        } else if (cut) {
            memcpy(st->held, s + i, (size_t)k);
            st->n_held = k;
        } else {
            o = put_fffd(out, o);
        }
        i += (size_t)k;
    }
    return o;
}

int64_t detok_push(struct detok_stream *st, int32_t id, char *out, size_t cap) {
    const struct tokenizer *tok = st->tok;
    if (id < 0 || id >= tok->n_vocab || cap < detok_min_cap(tok)) return KVIK_ERR_INVALID_ARG;
    size_t pn;
    const uint8_t *p = piece_of(tok, id, st->render_special, &pn);
    if (pn > 0 && st->strip_space) {
        if (p[0] == ' ') {
            p++;
            pn--;
        }
        st->strip_space = false;
    }
    if (pn == 0) return 0;
    size_t o = 0;
    if (st->n_held) {
        /* finish the held sequence with the piece's first bytes */
        uint8_t tmp[4];
        int nh = st->n_held, need = utf8_seq_len(st->held[0]);
        size_t take = (size_t)(need - nh) < pn ? (size_t)(need - nh) : pn;
        memcpy(tmp, st->held, (size_t)nh);
        memcpy(tmp + nh, p, take);
        st->n_held = 0;
        bool cut;
        int k = utf8_valid_prefix(tmp, (size_t)nh + take, need, &cut);
        if (k == need) {
            memcpy(out, tmp, (size_t)k);
            o = (size_t)k;
        } else if (cut) { /* still incomplete: the whole piece joined it */
            memcpy(st->held, tmp, (size_t)k);
            st->n_held = k;
            return 0;
        } else {
            o = put_fffd(out, 0);
        }
        /* the piece's bytes that joined the sequence (held bytes were a
         * valid prefix, so k >= nh) */
        size_t used = (size_t)(k - nh);
        p += used;
        pn -= used;
    }
    return (int64_t)(o + stream_bytes(st, p, pn, out + o));
}

int64_t detok_flush(struct detok_stream *st, char *out, size_t cap) {
    size_t o = 0;
    if (st->n_held) {
        if (cap < 3) return KVIK_ERR_INVALID_ARG;
        o = put_fffd(out, 0);
    }
    st->n_held = 0;
    return (int64_t)o;
}

uint32_t tokenizer_byte_char(uint8_t b) { return byte_to_cp(b); }
