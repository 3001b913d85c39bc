/*
 * dataset.c — the prompts of a run.
 *
 *   random    prompts of common English words, input lengths uniform in
 *             [input_len (1 - r), input_len (1 + r)] and output lengths the
 *             same way around output_len. With a tokenizer (-m) each prompt
 *             is cut until it encodes to exactly its length; without one a
 *             word stands for a token (these words are one token each in the
 *             usual BPE vocabularies) and the server's usage gives the truth.
 *   sharegpt  real conversations (ShareGPT V3 JSON, see scripts/fetch-sharegpt.sh):
 *             the first human turn is the prompt, the length of the reply
 *             after it is the output length. Conversations with fewer than 4
 *             prompt or reply tokens, a prompt over 1,024 tokens or more than
 *             2,048 together are left out (the usual serving-benchmark filter).
 *   prefix    num_prefixes system prompts of prefix_len tokens each, every
 *             request one of them (chosen at random) and its own question of
 *             question_len tokens: the prefix cache's workload.
 *   file      JSONL, one {"prompt": "...", "output_len": N} per line
 *             ("system" optional; output_len defaults to --output-len).
 *
 * Every choice is drawn from the seed, so a seed names a workload.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "tools/loadgen/loadgen.h"

void lg_dataset_default_params(struct lg_dataset_params *p) {
    memset(p, 0, sizeof *p);
    p->kind = LG_DATASET_RANDOM;
    p->num_prompts = 100;
    p->seed = 0;
    p->input_len = 256;
    p->output_len = 128;
    p->range_ratio = 0;
    p->prefix_len = 512;
    p->num_prefixes = 4;
    p->question_len = 64;
    p->max_output_len = 1024;
}

void lg_dataset_free(struct lg_dataset *d) {
    for (int64_t i = 0; i < d->n; i++) {
        free(d->items[i].system);
        free(d->items[i].prompt);
    }
    free(d->items);
    memset(d, 0, sizeof *d);
}

static kvik_status push(struct lg_dataset *d, int64_t *cap, char *system, char *prompt, int32_t ptok, int32_t olen,
                        struct kvik_err *err) {
    if (d->n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 64;
        struct lg_prompt *ni = realloc(d->items, sizeof *ni * (size_t)nc);
        if (!ni) goto nomem;
        d->items = ni;
        *cap = nc;
    }
    d->items[d->n++] = (struct lg_prompt){system, prompt, ptok, olen};
    return KVIK_OK;
nomem:
    free(system);
    free(prompt);
    return err_set(err, KVIK_ERR_NOMEM, "out of memory building the dataset");
}

/* Capacity bookkeeping: items are appended to a dataset that may already hold
 * some; the capacity is the allocation's, tracked apart from n. */
static int64_t cap_of(const struct lg_dataset *d) {
    int64_t c = 64;
    while (c < d->n) c *= 2;
    return d->n ? c : 0;
}

/* ---- words --------------------------------------------------------------- */

static const char *const k_words[] = {
    "the",    "of",     "and",    "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",
    "with",   "be",     "by",     "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",
    "at",     "which",  "but",    "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",
    "all",    "we",     "can",    "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",
    "would",  "who",    "so",     "no",    "she",   "other", "its",   "may",   "these", "what",  "them",
    "than",   "some",   "him",    "time",  "into",  "only",  "do",    "new",   "such",  "any",   "very",
    "first",  "most",   "made",   "over",  "after", "also",  "did",   "many",  "two",   "then",  "should",
    "before", "must",   "through","years", "where", "much",  "your",  "way",   "well",  "down",  "own",
    "good",   "each",   "those",  "people","could", "just",  "world", "life",  "work",  "long",  "day",
    "still",  "great",  "back",   "place", "house", "water", "city",  "light", "under", "never", "name",
    "while",  "last",   "might",  "same",  "found", "part",  "year",  "small", "three", "high",  "know",
    "every",  "right",  "large",  "going", "think", "again", "until", "power", "order", "early", "state",
    "both",   "home",   "group",  "hand",  "music", "book",  "river", "table", "story", "money", "night",
    "point",  "child",  "school", "north", "south", "green", "road",  "sound", "game",  "line",  "form",
    "body",   "field",  "paper",  "fire",  "music", "open",  "tree",  "list",  "word",  "data",  "model",
};
#define N_WORDS ((int)(sizeof k_words / sizeof k_words[0]))

struct sbuf {
    char *p;
    size_t n, cap;
};

static bool sb_add(struct sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) return false;
        b->p = np;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

static bool add_words(struct sbuf *b, struct prng *r, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const char *w = k_words[prng_next(r) % N_WORDS];
        if ((b->n && !sb_add(b, " ", 1)) || !sb_add(b, w, strlen(w))) return false;
    }
    return true;
}

static int64_t count_tokens(const struct tokenizer *tok, const char *s, size_t n) {
    return tokenizer_encode(tok, s, n, false, false, NULL, 0);
}

/*
 * Random words that make `target` tokens: with a tokenizer, encode, and either
 * add words or cut to the first target ids' text, until the count is right
 * (a few rounds at most; the last count is kept if it never is). *ntok gets
 * the count (the word count without a tokenizer).
 */
static char *random_text(struct prng *r, const struct tokenizer *tok, int32_t target, int32_t *ntok) {
    struct sbuf b = {0};
    if (target < 1) target = 1;
    if (!add_words(&b, r, target) || !b.p) goto fail;
    *ntok = target;
    if (!tok) return b.p;
    int32_t *ids = NULL;
    for (int round = 0; round < 8; round++) {
        int64_t c = count_tokens(tok, b.p, b.n);
        if (c < 0) break;
        *ntok = (int32_t)c;
        if (c == target) break;
        if (c < target) {
            if (!add_words(&b, r, target - c)) goto fail;
            continue;
        }
        int32_t *ni = realloc(ids, sizeof *ids * (size_t)c);
        if (!ni) break;
        ids = ni;
        tokenizer_encode(tok, b.p, b.n, false, false, ids, c);
        int64_t len = tokenizer_decode(tok, ids, target, NULL, 0, false);
        if (len < 0) break;
        char *t = malloc((size_t)len + 1);
        if (!t) break;
        tokenizer_decode(tok, ids, target, t, (size_t)len, false);
        t[len] = 0;
        free(b.p);
        b.p = t;
        b.n = (size_t)len;
        b.cap = (size_t)len + 1;
    }
    free(ids);
    return b.p;
fail:
    free(b.p);
    return NULL;
}

static int32_t around(struct prng *r, int32_t len, double ratio) {
    if (ratio <= 0) return len < 1 ? 1 : len;
    double lo = len * (1.0 - ratio), hi = len * (1.0 + ratio);
    int32_t v = (int32_t)(lo + (hi - lo + 1) * prng_uniform(r));
    if (v > (int32_t)hi) v = (int32_t)hi;
    return v < 1 ? 1 : v;
}

static kvik_status build_random(const struct lg_dataset_params *p, struct lg_dataset *d, struct kvik_err *err) {
    struct prng r;
    prng_seed(&r, p->seed);
    int64_t cap = cap_of(d);
    for (int64_t i = 0; i < p->num_prompts; i++) {
        int32_t in = around(&r, p->input_len, p->range_ratio), out = around(&r, p->output_len, p->range_ratio), nt;
        char *text = random_text(&r, p->tok, in, &nt);
        if (!text) return err_set(err, KVIK_ERR_NOMEM, "out of memory building prompts");
        kvik_status st = push(d, &cap, NULL, text, nt, out, err);
        if (st) return st;
    }
    return KVIK_OK;
}

static kvik_status build_prefix(const struct lg_dataset_params *p, struct lg_dataset *d, struct kvik_err *err) {
    struct prng r;
    prng_seed(&r, p->seed);
    int32_t np = p->num_prefixes > 0 ? p->num_prefixes : 1;
    char **pre = calloc((size_t)np, sizeof *pre);
    int32_t *pre_tok = calloc((size_t)np, sizeof *pre_tok);
    kvik_status st = KVIK_OK;
    if (!pre || !pre_tok) {
        st = err_set(err, KVIK_ERR_NOMEM, "out of memory building prompts");
        goto done;
    }
    for (int32_t i = 0; i < np; i++) {
        if (!(pre[i] = random_text(&r, p->tok, p->prefix_len, &pre_tok[i]))) {
            st = err_set(err, KVIK_ERR_NOMEM, "out of memory building prompts");
            goto done;
        }
    }
    int64_t cap = cap_of(d);
    for (int64_t i = 0; i < p->num_prompts; i++) {
        int32_t k = (int32_t)(prng_next(&r) % (uint64_t)np), qt;
        char *q = random_text(&r, p->tok, p->question_len, &qt);
        char *sys = strdup(pre[k]);
        if (!q || !sys) {
            free(q);
            free(sys);
            st = err_set(err, KVIK_ERR_NOMEM, "out of memory building prompts");
            goto done;
        }
        if ((st = push(d, &cap, sys, q, pre_tok[k] + qt, p->output_len, err))) goto done;
    }
done:
    for (int32_t i = 0; pre && i < np; i++) free(pre[i]);
    free(pre);
    free(pre_tok);
    return st;
}

/* ---- JSONL ----------------------------------------------------------------- */

kvik_status lg_dataset_parse_jsonl(const char *buf, size_t len, int32_t default_output_len, struct lg_dataset *d,
                                   struct kvik_err *err) {
    int64_t cap = cap_of(d), line = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line++;
        const char *s = p;
        p = nl ? nl + 1 : end;
        while (s < e && (*s == ' ' || *s == '\t' || *s == '\r')) s++;
        if (s == e) continue;
        json_error_t jerr;
        json_t *o = json_loadb(s, (size_t)(e - s), 0, &jerr);
        if (!o || !json_is_object(o)) {
            json_decref(o);
            return err_set(err, KVIK_ERR_FORMAT, "line %lld: not a JSON object%s%s", (long long)line,
                           o ? "" : ": ", o ? "" : jerr.text);
        }
        json_t *pr = json_object_get(o, "prompt"), *ol = json_object_get(o, "output_len"),
               *sy = json_object_get(o, "system");
        const char *why = !json_is_string(pr)                                  ? "\"prompt\" must be a string"
                          : ol && !json_is_integer(ol)                         ? "\"output_len\" must be an integer"
                          : ol && (json_integer_value(ol) < 1 || json_integer_value(ol) > 1000000)
                              ? "\"output_len\" must be 1..1000000"
                          : sy && !json_is_null(sy) && !json_is_string(sy) ? "\"system\" must be a string"
                                                                               : NULL;
        if (why) {
            json_decref(o);
            return err_set(err, KVIK_ERR_FORMAT, "line %lld: %s", (long long)line, why);
        }
        char *prompt = strndup(json_string_value(pr), json_string_length(pr));
        bool has_sys = json_is_string(sy);
        char *sys = has_sys ? strndup(json_string_value(sy), json_string_length(sy)) : NULL;
        int32_t out = ol ? (int32_t)json_integer_value(ol) : default_output_len;
        json_decref(o); /* pr, ol and sy die with it */
        if (!prompt || (has_sys && !sys)) {
            free(prompt);
            free(sys);
            return err_set(err, KVIK_ERR_NOMEM, "out of memory reading the dataset");
        }
        kvik_status st = push(d, &cap, sys, prompt, -1, out, err);
        if (st) return st;
    }
    return KVIK_OK;
}

/* ---- ShareGPT ----------------------------------------------------------------- */

static int64_t estimate_tokens(const struct tokenizer *tok, const char *s, size_t n) {
    if (tok) return count_tokens(tok, s, n);
    return (int64_t)(n + 3) / 4; /* about four bytes a token in English */
}

kvik_status lg_dataset_parse_sharegpt(const char *buf, size_t len, const struct tokenizer *tok,
                                      int32_t max_output_len, int64_t limit, struct lg_dataset *d,
                                      struct kvik_err *err) {
    int64_t cap = cap_of(d), taken = 0;
    size_t i = 0;
    while (i < len && buf[i] != '[') {
        if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '\t' &&
            !(i + 3 <= len && !memcmp(buf + i, "\xEF\xBB\xBF", 3)))
            return err_set(err, KVIK_ERR_FORMAT, "a ShareGPT file is a JSON array of conversations");
        i += buf[i] == '\xEF' ? 3 : 1;
    }
    if (i == len) return err_set(err, KVIK_ERR_FORMAT, "a ShareGPT file is a JSON array of conversations");
    i++;
    while (i < len && (limit <= 0 || taken < limit)) {
        while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t' || buf[i] == ','))
            i++;
        if (i == len || buf[i] == ']') break;
        json_error_t jerr;
        json_t *conv = json_loadb(buf + i, len - i, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!conv) break; /* cut short: keep what was read */
        if (jerr.position <= 0) {
            json_decref(conv);
            break;
        }
        i += (size_t)jerr.position;
        json_t *turns = json_is_object(conv) ? json_object_get(conv, "conversations") : NULL;
        const char *prompt = NULL, *reply = NULL;
        size_t prompt_len = 0, reply_len = 0;
        for (size_t t = 0; json_is_array(turns) && t < json_array_size(turns); t++) {
            json_t *turn = json_array_get(turns, t);
            json_t *from = json_object_get(turn, "from"), *value = json_object_get(turn, "value");
            if (!json_is_string(from) || !json_is_string(value)) break;
            const char *f = json_string_value(from);
            if (!prompt) {
                if (strcmp(f, "human") != 0 && strcmp(f, "user") != 0) break;
                prompt = json_string_value(value);
                prompt_len = json_string_length(value);
            } else {
                if (strcmp(f, "gpt") != 0 && strcmp(f, "assistant") != 0) break;
                reply = json_string_value(value);
                reply_len = json_string_length(value);
                break;
            }
        }
        if (prompt && reply) {
            int64_t pt = estimate_tokens(tok, prompt, prompt_len), ot = estimate_tokens(tok, reply, reply_len);
            if (pt >= 4 && ot >= 4 && pt <= 1024 && pt + ot <= 2048) {
                if (max_output_len > 0 && ot > max_output_len) ot = max_output_len;
                char *pc = strndup(prompt, prompt_len);
                kvik_status st = pc ? push(d, &cap, NULL, pc, tok ? (int32_t)pt : -1, (int32_t)ot, err)
                                    : err_set(err, KVIK_ERR_NOMEM, "out of memory reading the dataset");
                if (st) {
                    json_decref(conv);
                    return st;
                }
                taken++;
            }
        }
        json_decref(conv);
    }
    return KVIK_OK;
}

/* ---- build ---------------------------------------------------------------------- */

static void shuffle(struct lg_dataset *d, uint64_t seed) {
    struct prng r;
    prng_seed(&r, seed ^ 0x5EEDull);
    for (int64_t i = d->n - 1; i > 0; i--) {
        int64_t j = (int64_t)(prng_next(&r) % (uint64_t)(i + 1));
        struct lg_prompt t = d->items[i];
        d->items[i] = d->items[j];
        d->items[j] = t;
    }
}

/* Keeps the first n items (frees the rest). */
static void truncate_to(struct lg_dataset *d, int64_t n) {
    for (int64_t i = n; i < d->n; i++) {
        free(d->items[i].system);
        free(d->items[i].prompt);
    }
    if (n < d->n) d->n = n;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

kvik_status lg_dataset_build(const struct lg_dataset_params *p, struct lg_dataset *out, struct kvik_err *err) {
    memset(out, 0, sizeof *out);
    kvik_status st = KVIK_OK;
    out->exact_tokens = p->tok != NULL;
    switch (p->kind) {
    case LG_DATASET_RANDOM:
        st = build_random(p, out, err);
        break;
    case LG_DATASET_PREFIX:
        st = build_prefix(p, out, err);
        break;
    case LG_DATASET_SHAREGPT:
    case LG_DATASET_FILE: {
        if (!p->path) return err_set(err, KVIK_ERR_INVALID_ARG, "this dataset needs --dataset-path");
        size_t len = 0;
        char *buf = slurp(p->path, &len);
        if (!buf) return err_set(err, KVIK_ERR_IO, "cannot read %s", p->path);
        if (p->kind == LG_DATASET_FILE) {
            st = lg_dataset_parse_jsonl(buf, len, p->output_len, out, err);
            for (int64_t i = 0; !st && p->tok && i < out->n; i++) {
                int64_t c = count_tokens(p->tok, out->items[i].prompt, strlen(out->items[i].prompt));
                out->items[i].prompt_tokens = c > INT32_MAX ? INT32_MAX : (int32_t)c;
            }
        } else {
            /* read enough conversations to choose from, then draw num_prompts of them */
            int64_t limit = p->num_prompts > 0 ? p->num_prompts * 8 : 0;
            if (limit > 0 && limit < 2000) limit = 2000;
            st = lg_dataset_parse_sharegpt(buf, len, p->tok, p->max_output_len, limit, out, err);
            if (!st) shuffle(out, p->seed);
        }
        free(buf);
        if (!st && out->n == 0) st = err_set(err, KVIK_ERR_FORMAT, "%s holds no usable prompts", p->path);
        if (!st && p->num_prompts > 0 && out->n > p->num_prompts) truncate_to(out, p->num_prompts);
        break;
    }
    default:
        st = err_set(err, KVIK_ERR_INVALID_ARG, "unknown dataset");
    }
    if (st) lg_dataset_free(out);
    return st;
}
