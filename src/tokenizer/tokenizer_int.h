/*
 * tokenizer_int.h — the layout of a loaded tokenizer, shared by the
 * tokenizer module's files (tokenizer.c: loading, decoding; vocab.c:
 * lookups; bpe.c: encoding; pretok.c: pre-tokenizer scanners; spm.c:
 * SentencePiece BPE; wordpiece.c: WordPiece). Not for other modules.
 *
 * Everything lives in a few owned arrays built once by tokenizer_load and
 * read-only afterwards:
 *
 *   text[text_off[i] .. text_off[i+1]-1)   token i's vocabulary text + NUL
 *   piece[piece_off[i] .. piece_off[i+1])  the raw bytes token i decodes to
 *   vocab: open-addressing hash, text -> id (linear probing, -1 = empty)
 *   merges: open-addressing hash, (left id, right id) -> (rank, merged id)
 *           (byte-level BPE only)
 *   scores: [n_vocab] SentencePiece piece scores (llama only)
 */
#ifndef KVIK_TOKENIZER_INT_H
#define KVIK_TOKENIZER_INT_H

#include "tokenizer/tokenizer.h"

/* Pre-tokenizers: how text is cut into words before BPE (pretok*.c, where
 * each one's patterns are written out). */
enum pretok_kind {
    PRETOK_GPT2,           /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRETOK_STARCODER,      /* every \p{N} alone, then PRETOK_GPT2 on the text between */
    PRETOK_LLAMA3,         /* cl100k: (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|... */
    PRETOK_QWEN2,          /* the same with \p{N} (single digits) */
    PRETOK_QWEN35,         /* Qwen 2's with [\p{L}\p{M}]+ words (marks join letters) */
    PRETOK_GPT4O,          /* o200k: case-aware letter runs, \p{N}{1,3} */
    PRETOK_TEKKEN,         /* o200k without contractions, \p{N} */
    PRETOK_DEEPSEEK_LLM,   /* [\r\n] > cased letters > punctuation > \s+$ > CJK > digits */
    PRETOK_DEEPSEEK_CODER, /* [\r\n] > \s?\p{L}+ > \s?\p{P}+ > CJK > digits */
    PRETOK_DEEPSEEK_V3,    /* \p{N}{1,3} > CJK and kana > letters / punctuation / spaces */
    PRETOK_FALCON,         /* punctuation runs > GPT-2 > digit runs > [0-9]{3} */
    PRETOK_BLOOM,          /* " ?[^(\s|[.,!?…。，、।۔،])]+" */
    PRETOK_VIKING,         /* BLOOM's, then every \p{N} alone */
    PRETOK_COUNT
};

/* Called once per word, in order: bytes [start, end) of the text given to
 * pretok_split. Returns false to stop (out of memory). */
typedef bool (*pretok_emit_fn)(void *ctx, size_t start, size_t end);

/* Splits s[0..n) into words; false if emit stopped it. */
bool pretok_split(enum pretok_kind kind, const uint8_t *s, size_t n, pretok_emit_fn emit,
                  void *ctx);

/* Vocabulary kinds: tokenizer.ggml.model. */
enum tok_model {
    TOKMODEL_BPE, /* "gpt2": byte-level BPE, merges by rank (bpe.c) */
    TOKMODEL_SPM, /* "llama": SentencePiece BPE, merges by piece score, byte fallback (spm.c);
                     "gemma4": the same text, merges by rank (spm_ranks) */
    TOKMODEL_WPM, /* "bert": WordPiece, greedy longest match (wordpiece.c) */
};

#define TOKFLAG_EOG 1u /* ends generation */

struct merge_slot {
    uint64_t key;   /* (uint64)left << 32 | right; MERGE_EMPTY: empty slot */
    int32_t rank;   /* index in tokenizer.ggml.merges: lower merges first */
    int32_t merged; /* id of left's text + right's text */
};
#define MERGE_EMPTY UINT64_MAX

struct special_tok {
    const char *text; /* into tokenizer.text */
    uint32_t len;
    int32_t id;
    bool control;     /* CONTROL/UNKNOWN: matched only with parse_special */
};

struct tokenizer {
    int32_t n_vocab;
    char *text;              /* all token texts, each NUL-terminated */
    uint64_t *text_off;      /* [n_vocab + 1] */
    uint8_t *piece;          /* decoded bytes of every token */
    uint64_t *piece_off;     /* [n_vocab + 1] */
    uint8_t *type;           /* [n_vocab] enum token_type */
    uint8_t *flags;          /* [n_vocab] TOKFLAG_* */
    size_t max_piece;        /* longest piece */

    int32_t *vocab;          /* [vocab_mask + 1] hash slots: token id or -1 */
    uint64_t vocab_mask;
    struct merge_slot *merges; /* [merge_mask + 1] */
    uint64_t merge_mask;
    int64_t n_merges;        /* entries in the table */

    int32_t byte_tok[256];   /* token of each single byte (gpt2: byte-level char;
                                llama, bert: "<0xAB>" byte token), or -1 */
    uint8_t byte_char[256][3]; /* gpt2: byte b's byte-level character, [0] = its UTF-8
                                length (1 or 2), then the bytes */
    bool ignore_merges;      /* gpt2: a word that is a token's text whole is that token,
                                before any merge (Hugging Face BPE ignore_merges) */
    bool nfc;                /* gpt2: text between special tokens is normalized to NFC
                                before pre-tokenization (tokenizer.json normalizer NFC) */
    enum tok_model model;
    float *scores;           /* [n_vocab] llama piece scores (NaN read as -inf); else NULL */
    bool space_prefix;       /* llama: "▁" before each stretch of text (add_space_prefix) */
    bool spm_words;          /* llama: no token has a "▁" after another character, so
                                words merge apart (spm_words_split) */
    bool spm_ranks;          /* llama: pairs merge by their rank in tokenizer.ggml.merges
                                (the merges table), not by the merged piece's score */
    bool strip_lead_space;   /* decoding drops one leading space of the text (llama with
                                space_prefix; bert, whose word pieces carry a leading space) */
    size_t max_text;         /* longest token text, bytes */

    struct special_tok *specials; /* [n_specials], longest first */
    int32_t n_specials;
    uint8_t special_first[32];    /* bitmap of the specials' first bytes */

    enum pretok_kind pretok;
    char pre_name[64];
    int32_t bos, eos, unk, pad;
    bool add_bos, add_eos;
    uint64_t cache_uid;      /* identity in the per-thread word caches (bpe.c): 0 until the
                                first encode gives it one; loaders must leave it zero */
};

/* Token id's vocabulary text (NUL-terminated) and its length in *len. */
static inline const char *tok_text(const struct tokenizer *tok, int32_t id, size_t *len) {
    *len = (size_t)(tok->text_off[id + 1] - tok->text_off[id] - 1);
    return tok->text + tok->text_off[id];
}

/* The vocabulary hash (vocab.c). vocab_find2: id of the token whose text is
 * a[0..na) followed by b[0..nb); -1 if none. vocab_insert: adds token id
 * under its text unless a token with that text is there already (the first
 * of duplicate texts wins); the table has a free slot. */
int32_t vocab_find2(const struct tokenizer *tok, const char *a, size_t na, const char *b,
                    size_t nb);
void vocab_insert(struct tokenizer *tok, int32_t id);

/* Appends id to out[0..max) at *count (counting past max, like snprintf). */
static inline void tok_put(int32_t *out, int64_t max, int64_t *count, int32_t id) {
    if (*count < max) out[*count] = id;
    (*count)++;
}

/* Encoders of a stretch of text between special tokens, s[0..n) with n >
 * 0: ids are appended with tok_put. false: out of memory (or a stretch too
 * long to index, over 256 MiB). */
bool spm_encode(const struct tokenizer *tok, const uint8_t *s, size_t n, int32_t *out,
                int64_t max, int64_t *count);
bool wpm_encode(const struct tokenizer *tok, const uint8_t *s, size_t n, int32_t *out,
                int64_t max, int64_t *count);
/* True if every token's "▁"s lead its text (spm.c; run once by the loader). */
bool spm_words_split(const struct tokenizer *tok);

/* WordPiece's normalizer and punctuation test (wordpiece.c), for the
 * tests: the normalized text of s[0..n) as UTF-8, snprintf-style into
 * out[0..cap); negative KVIK_ERR_NOMEM. */
int64_t wpm_normalize(const uint8_t *s, size_t n, char *out, size_t cap);
bool wpm_is_punct(uint32_t cp);

/* A byte range text[off .. off + len) of a text being encoded. */
struct tok_span {
    size_t off, len;
};

/*
 * tokenizer_encode with control tokens recognised only where they lie
 * wholly inside one of spans[0..n_spans) (sorted by offset, not
 * overlapping): everywhere else their text is plain text, as with
 * parse_special false. User-defined tokens match anywhere, as always. The
 * text between matches is encoded as one stretch, whatever spans it
 * crosses, so with spans covering all of the text the ids are those of
 * tokenizer_encode with parse_special true. KVIK_ERR_INVALID_ARG
 * (negative) for spans out of order or past len.
 */
int64_t tokenizer_encode_spans(const struct tokenizer *tok, const char *text, size_t len,
                               bool add_special, const struct tok_span *spans, size_t n_spans,
                               int32_t *out, int64_t max);

/* A conversation rendered by its chat template (chat.c): the text, and
 * the spans of it the template wrote itself (everything else is message
 * content), in order, adjacent spans joined. */
struct chat_rendering {
    char *text;             // [len + 1], NUL-terminated
    size_t len;
    struct tok_span *spans; // [n_spans]
    size_t n_spans;
};

struct chat_format;
struct chat_msg;

/* Renders msgs[0..n) as chat_format_apply does, into out (malloc'd; free
 * with chat_rendering_free); extra and tools_json as chat_encode_tools
 * takes them (NULL: none). On failure out is empty. */
kvik_status chat_render_spans(const struct chat_format *f, const struct chat_msg *msgs,
                              const char *const *extra, size_t n, const char *tools_json,
                              bool add_generation_prompt, struct chat_rendering *out,
                              struct kvik_err *err);
void chat_rendering_free(struct chat_rendering *r); /* leaves it empty; NULL is fine */

/* Merge of (left, right), or NULL if the pair never merges. */
static inline const struct merge_slot *merge_find(const struct tokenizer *tok, int32_t left,
                                                  int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint64_t i = (h ^ (h >> 29)) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        const struct merge_slot *s = &tok->merges[i];
        if (s->key == key) return s;
        if (s->key == MERGE_EMPTY) return NULL;
    }
}

#endif /* KVIK_TOKENIZER_INT_H */
