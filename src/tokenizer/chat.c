/*
 * chat.c — recognising a chat template's family from its Jinja text and
 * rendering conversations in that family's format (see chat.h for the
 * reference template each renderer reproduces).
 */
#include "tokenizer/chat.h"
#include "gguf/gguf.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *const family_names[CHAT_TEMPLATE_COUNT] = {
    [CHAT_TEMPLATE_CHATML] = "chatml",   [CHAT_TEMPLATE_LLAMA3] = "llama3",
    [CHAT_TEMPLATE_GEMMA] = "gemma",     [CHAT_TEMPLATE_MISTRAL] = "mistral",
    [CHAT_TEMPLATE_PHI3] = "phi3",
};

const char *chat_template_name(enum chat_template t) {
    return (unsigned)t < CHAT_TEMPLATE_COUNT ? family_names[t] : "?";
}

kvik_status chat_template_from_name(const char *name, enum chat_template *out,
                                    struct kvik_err *err) {
    if (!name || !out) return err_set(err, KVIK_ERR_INVALID_ARG, "chat template: name is NULL");
    for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++) {
        if (strcmp(name, family_names[t]) == 0) {
            *out = (enum chat_template)t;
            return KVIK_OK;
        }
    }
    return err_set(err, KVIK_ERR_UNSUPPORTED,
                   "chat template '%.64s' is not supported (known: chatml, llama3, gemma, "
                   "mistral, phi3)",
                   name);
}

/* ---- detection -------------------------------------------------------- */

/* Finds the default system prompt a ChatML template injects when the first
 * message is not a system message: a string literal that starts with
 * "<|im_start|>system" + newline and runs, inside the same literal, up to
 * "<|im_end|>". Returns a malloc'ed unescaped copy, NULL if none. */
static char *find_default_system(const char *text, bool *nomem) {
    static const char marker[] = "<|im_start|>system";
    if (!strstr(text, "messages[0]")) return NULL; /* no guard on the first message */
    for (const char *m = strstr(text, marker); m; m = strstr(m + 1, marker)) {
        /* the literal must start with the marker: a quote right before it */
        if (m == text || (m[-1] != '\'' && m[-1] != '"')) continue;
        char quote = m[-1];
        const char *p = m + sizeof marker - 1;
        if (*p == '\n') p++;
        else if (p[0] == '\\' && p[1] == 'n') p += 2;
        else continue;
        const char *end = strstr(p, "<|im_end|>");
        if (!end) continue;
        bool closed = false; /* does the literal end before <|im_end|>? */
        for (const char *s = p; s < end; s++) {
            if (*s == '\\' && s + 1 < end) s++;
            else if (*s == quote) closed = true;
        }
        if (closed) continue;
        char *out = malloc((size_t)(end - p) + 1);
        if (!out) {
            *nomem = true;
            return NULL;
        }
        size_t k = 0;
        for (const char *s = p; s < end; s++) {
            if (*s == '\\' && s + 1 < end) {
                s++;
                switch (*s) {
                case 'n': out[k++] = '\n'; break;
                case 't': out[k++] = '\t'; break;
                case 'r': out[k++] = '\r'; break;
                default: out[k++] = *s; break; /* \\ \' \" */
                }
            } else {
                out[k++] = *s;
            }
        }
        out[k] = 0;
        return out;
    }
    return NULL;
}

/* Qwen2.5's template (Qwen2.5-Instruct, Qwen2.5-Coder-Instruct): without
 * tools its system preamble is the first message or the default system
 * prompt, and every system (after the first), user and assistant message
 * renders as ChatML; its tool section renders only with tools, tool calls
 * or tool messages, which kvik's messages cannot hold. */
static bool is_qwen25(const char *text) {
    static const char *const parts[] = {
        "{%- if tools %}",
        "# Tools\\n\\nYou may call one or more functions",
        "'<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n'",
        ("(message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
         "(message.role == \"assistant\" and not message.tool_calls)"),
        "'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n'",
        "<tool_response>",
        "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}",
    };
    if (strstr(text, "<think>")) return false;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(text, parts[i])) return false;
    return true;
}

kvik_status chat_detect(const char *text, struct chat_format *out, struct kvik_err *err) {
    if (!text || !out) return err_set(err, KVIK_ERR_INVALID_ARG, "chat template: text is NULL");
    *out = (struct chat_format){0};
    if (!text[0]) return err_set(err, KVIK_ERR_UNSUPPORTED, "chat template: the template is empty");
    if (strstr(text, "<|im_sep|>"))
        return err_set(err, KVIK_ERR_UNSUPPORTED,
                       "chat template: ChatML with <|im_sep|> (Phi-4 style) is not supported");
    if (strstr(text, "<|im_start|>")) {
        bool nomem = false;
        out->tmpl = CHAT_TEMPLATE_CHATML;
        out->default_system = find_default_system(text, &nomem);
        if (nomem) return err_set(err, KVIK_ERR_NOMEM, "chat template: out of memory");
        bool qwen25 = out->default_system && is_qwen25(text);
        out->approximate = !qwen25 && (strstr(text, "<think>") || strstr(text, "tool_call"));
        return KVIK_OK;
    }
    if (strstr(text, "<|start_header_id|>")) {
        out->tmpl = CHAT_TEMPLATE_LLAMA3;
        out->approximate = strstr(text, "Cutting Knowledge") || strstr(text, "tools");
        return KVIK_OK;
    }
    if (strstr(text, "<start_of_turn>")) {
        out->tmpl = CHAT_TEMPLATE_GEMMA;
        return KVIK_OK;
    }
    if (strstr(text, "<|user|>") && strstr(text, "<|end|>")) {
        out->tmpl = CHAT_TEMPLATE_PHI3;
        return KVIK_OK;
    }
    if (strstr(text, "[INST]")) {
        if (strstr(text, "<<SYS>>"))
            return err_set(err, KVIK_ERR_UNSUPPORTED,
                           "chat template: Llama 2 style [INST] with <<SYS>> is not supported");
        if (strstr(text, "[SYSTEM_PROMPT]") || strstr(text, "[AVAILABLE_TOOLS]"))
            return err_set(err, KVIK_ERR_UNSUPPORTED,
                           "chat template: Mistral v3/v7 style [INST] templates are not "
                           "supported (only v1 \" [INST] \"); override with a template name");
        if (strstr(text, " [INST] ")) {
            out->tmpl = CHAT_TEMPLATE_MISTRAL;
            return KVIK_OK;
        }
        return err_set(err, KVIK_ERR_UNSUPPORTED,
                       "chat template: this [INST] variant is not Mistral v1 (\" [INST] \"); "
                       "override with a template name if it is meant to be");
    }
    return err_set(err, KVIK_ERR_UNSUPPORTED,
                   "chat template: no known family (chatml, llama3, gemma, mistral, phi3) "
                   "matches the model's template; override with a template name");
}

/* Architectures whose models all use one family, for files without a
 * template: Gemma 1, 2 and 3 (their instruction-tuned templates render
 * the same for user/assistant conversations). */
static const struct {
    const char *arch;
    enum chat_template tmpl;
} arch_families[] = {
    {"gemma", CHAT_TEMPLATE_GEMMA},
    {"gemma2", CHAT_TEMPLATE_GEMMA},
    {"gemma3", CHAT_TEMPLATE_GEMMA},
};

/* The text of token id key's value in g's vocabulary (malloc'd), or NULL. */
static char *token_text(const struct gguf *g, const char *key) {
    uint32_t id;
    const struct gguf_value *toks;
    struct gguf_value v;
    if (gguf_get_u32(g, key, &id, NULL) || gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, NULL) ||
        !gguf_arr_elem(toks, id, &v) || v.type != GGUF_TYPE_STRING)
        return NULL;
    char *s = malloc(v.n + 1);
    if (!s) return NULL;
    memcpy(s, v.p, v.n);
    s[v.n] = 0;
    return s;
}

kvik_status chat_detect_gguf(const struct gguf *g, struct chat_format *out, struct kvik_err *err) {
    if (!g || !out) return err_set(err, KVIK_ERR_INVALID_ARG, "chat template: file is NULL");
    *out = (struct chat_format){0};
    struct gguf_str t;
    if (gguf_get_str(g, "tokenizer.chat_template", &t, NULL) == KVIK_OK) {
        char *text = malloc(t.len + 1);
        if (!text) return err_set(err, KVIK_ERR_NOMEM, "chat template: out of memory");
        memcpy(text, t.ptr, t.len);
        text[t.len] = 0;
        struct jinja_template *jt = NULL;
        struct kvik_err jerr = {0};
        if (jinja_compile(text, t.len, "chat template", &jt, &jerr) == KVIK_OK) {
            struct kvik_err ignored;
            if (chat_detect(text, out, &ignored) != KVIK_OK) *out = (struct chat_format){0};
            out->approximate = false;
            out->jinja = jt;
            out->eos_text = token_text(g, "tokenizer.ggml.eos_token_id");
            free(text);
            return KVIK_OK;
        }
        if (jerr.code == KVIK_ERR_NOMEM) {
            free(text);
            return err_set(err, KVIK_ERR_NOMEM, "chat template: out of memory");
        }
        kvik_status st = chat_detect(text, out, err);
        free(text);
        return st;
    }
    if (gguf_find_key(g, "tokenizer.chat_template") >= 0)
        return err_set(err, KVIK_ERR_FORMAT, "chat template: tokenizer.chat_template is not a string");
    struct gguf_str a;
    if (gguf_get_str(g, "general.architecture", &a, NULL) == KVIK_OK) {
        for (size_t i = 0; i < sizeof arch_families / sizeof arch_families[0]; i++) {
            if (a.len == strlen(arch_families[i].arch) &&
                memcmp(a.ptr, arch_families[i].arch, a.len) == 0) {
                out->tmpl = arch_families[i].tmpl;
                out->by_architecture = true;
                return KVIK_OK;
            }
        }
    }
    return err_set(err, KVIK_ERR_NOT_FOUND, "the model has no chat template");
}

void chat_format_free(struct chat_format *f) {
    if (!f) return;
    free(f->default_system);
    f->default_system = NULL;
    jinja_free(f->jinja);
    f->jinja = NULL;
    free(f->eos_text);
    f->eos_text = NULL;
}

/* ---- rendering -------------------------------------------------------- */

/* Output that counts everything and stores what fits (keeping room for
 * NUL), and the spans of it the template wrote (as opposed to message
 * contents), adjacent ones joined. */
struct sbuf {
    char *out;
    size_t cap;
    size_t len;             // bytes produced so far, stored or not
    struct tok_span *spans; // [cap_spans] or NULL
    size_t cap_spans;
    size_t n_spans;         // spans produced so far, stored or not
    size_t span_end;        // where the last span ends
};

static void put_bytes(struct sbuf *b, const char *s, size_t n) {
    if (b->out && b->len < b->cap) {
        size_t room = b->cap - 1 - b->len; /* cap >= 1 here */
        memcpy(b->out + b->len, s, n < room ? n : room);
    }
    b->len += n;
}

/* Template text. */
static void put_n(struct sbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->n_spans > 0 && b->span_end == b->len) {
        if (b->n_spans <= b->cap_spans) b->spans[b->n_spans - 1].len += n;
    } else {
        if (b->n_spans < b->cap_spans) b->spans[b->n_spans] = (struct tok_span){b->len, n};
        b->n_spans++;
    }
    put_bytes(b, s, n);
    b->span_end = b->len;
}

static void put(struct sbuf *b, const char *s) { put_n(b, s, strlen(s)); }

/* A message's content. */
static void put_content(struct sbuf *b, const char *s) { put_bytes(b, s, strlen(s)); }

/* Length of the white-space character (Python's str.isspace) that starts
 * at s[0..n), or 0. */
static size_t space_fwd(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (n >= 2 && c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3) {
        if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;              /* U+1680 */
        if (c == 0xe2 && s[1] == 0x80 &&
            ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
            return 3; /* U+2000-200A, U+2028, U+2029, U+202F */
        if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;              /* U+205F */
        if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;              /* U+3000 */
    }
    return 0;
}

/* Length of the white-space character that ends at s[n-1], or 0. */
static size_t space_back(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (space_fwd(s + n - k, k) == k) return k;
    return 0;
}

/* A content with leading and trailing white space removed (Jinja's trim). */
static void put_trimmed(struct sbuf *b, const char *content) {
    const unsigned char *s = (const unsigned char *)content;
    size_t n = strlen(content), k;
    while ((k = space_fwd(s, n)) > 0) {
        s += k;
        n -= k;
    }
    while ((k = space_back(s, n)) > 0) n -= k;
    put_bytes(b, (const char *)s, n);
}

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static kvik_status check_roles(const struct chat_msg *msgs, size_t n, enum role *roles,
                               struct kvik_err *err) {
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return err_set(err, KVIK_ERR_INVALID_ARG, "chat: message %zu has a NULL %s", i,
                           msgs[i].role ? "content" : "role");
        if (strcmp(msgs[i].role, "system") == 0) roles[i] = ROLE_SYSTEM;
        else if (strcmp(msgs[i].role, "user") == 0) roles[i] = ROLE_USER;
        else if (strcmp(msgs[i].role, "assistant") == 0) roles[i] = ROLE_ASSISTANT;
        else
            return err_set(err, KVIK_ERR_INVALID_ARG,
                           "chat: message %zu has unknown role '%.32s' (system, user, "
                           "assistant)",
                           i, msgs[i].role);
    }
    return KVIK_OK;
}

/* The order gemma and mistral insist on: an optional system message, then
 * user and assistant alternating, starting with user. Gemma 3's template
 * checks only that user messages take the even places, so a later system
 * message in an odd place renders as a turn of its own; mistral allows a
 * system message only first. */
static kvik_status check_alternation(enum chat_template t, const enum role *roles, size_t n,
                                     struct kvik_err *err) {
    size_t start = n > 0 && roles[0] == ROLE_SYSTEM;
    for (size_t i = start; i < n; i++) {
        if (roles[i] == ROLE_SYSTEM && t == CHAT_TEMPLATE_MISTRAL)
            return err_set(err, KVIK_ERR_INVALID_ARG,
                           "chat: %s allows a system message only first (message %zu)",
                           chat_template_name(t), i);
        if ((roles[i] == ROLE_USER) != ((i - start) % 2 == 0))
            return err_set(err, KVIK_ERR_INVALID_ARG,
                           "chat: %s needs roles to alternate user/assistant after an optional "
                           "system message (message %zu)",
                           chat_template_name(t), i);
    }
    return KVIK_OK;
}

static void render_chatml(struct sbuf *b, const struct chat_msg *msgs, const enum role *roles,
                          size_t n, bool gen, const char *default_system) {
    if (default_system && n > 0 && roles[0] != ROLE_SYSTEM) {
        put(b, "<|im_start|>system\n");
        put(b, default_system);
        put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        put(b, "<|im_start|>");
        put(b, msgs[i].role);
        put(b, "\n");
        put_content(b, msgs[i].content);
        put(b, "<|im_end|>\n");
    }
    if (gen) put(b, "<|im_start|>assistant\n");
}

static void render_llama3(struct sbuf *b, const struct chat_msg *msgs, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        put(b, "<|start_header_id|>");
        put(b, msgs[i].role);
        put(b, "<|end_header_id|>\n\n");
        put_trimmed(b, msgs[i].content);
        put(b, "<|eot_id|>");
    }
    if (gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_gemma(struct sbuf *b, const struct chat_msg *msgs, const enum role *roles,
                         size_t n, bool gen) {
    size_t start = n > 0 && roles[0] == ROLE_SYSTEM;
    static const char *const turn[] = {[ROLE_SYSTEM] = "<start_of_turn>system\n",
                                       [ROLE_USER] = "<start_of_turn>user\n",
                                       [ROLE_ASSISTANT] = "<start_of_turn>model\n"};
    for (size_t i = start; i < n; i++) {
        put(b, turn[roles[i]]);
        if (i == start && start == 1) { /* the system message, untrimmed */
            put_content(b, msgs[0].content);
            put(b, "\n\n");
        }
        put_trimmed(b, msgs[i].content);
        put(b, "<end_of_turn>\n");
    }
    if (gen) put(b, "<start_of_turn>model\n");
}

static void render_mistral(struct sbuf *b, const struct chat_msg *msgs, const enum role *roles,
                           size_t n) {
    size_t start = n > 0 && roles[0] == ROLE_SYSTEM;
    for (size_t i = start; i < n; i++) {
        if (roles[i] == ROLE_USER) {
            put(b, " [INST] ");
            if (i == start && start == 1) {
                put_content(b, msgs[0].content);
                put(b, "\n\n");
            }
            put_content(b, msgs[i].content);
            put(b, " [/INST]");
        } else {
            put(b, " ");
            put_content(b, msgs[i].content);
            put(b, "</s>");
        }
    }
}

static void render_phi3(struct sbuf *b, const struct chat_msg *msgs, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        put(b, "<|");
        put(b, msgs[i].role);
        put(b, "|>\n");
        put_content(b, msgs[i].content);
        put(b, "<|end|>\n");
    }
    put(b, gen ? "<|assistant|>\n" : "<|endoftext|>");
}

/* Renders into out[0..cap) and, when spans is not NULL, the template's
 * spans into spans[0..cap_spans); *n_spans (when not NULL) gets their
 * count, stored or not. */
static kvik_status render(enum chat_template t, const char *default_system,
                          const struct chat_msg *msgs, size_t n, bool gen, char *out,
                          size_t cap, size_t *needed, struct tok_span *spans, size_t cap_spans,
                          size_t *n_spans, struct kvik_err *err) {
    if (needed) *needed = 0;
    if ((unsigned)t >= CHAT_TEMPLATE_COUNT)
        return err_set(err, KVIK_ERR_INVALID_ARG, "chat: template %d out of range", (int)t);
    if (n > 0 && !msgs) return err_set(err, KVIK_ERR_INVALID_ARG, "chat: msgs is NULL");
    if (!out && cap > 0) return err_set(err, KVIK_ERR_INVALID_ARG, "chat: out is NULL");
    if (out && cap == 0) out = NULL;

    kvik_status st = KVIK_OK;
    enum role stack_roles[16];
    enum role *roles = stack_roles;
    if (n > sizeof stack_roles / sizeof stack_roles[0]) {
        roles = n > SIZE_MAX / sizeof *roles ? NULL : malloc(n * sizeof *roles);
        if (!roles) return err_set(err, KVIK_ERR_NOMEM, "chat: out of memory");
    }
    st = check_roles(msgs, n, roles, err);
    if (st == KVIK_OK && (t == CHAT_TEMPLATE_GEMMA || t == CHAT_TEMPLATE_MISTRAL))
        st = check_alternation(t, roles, n, err);
    if (st != KVIK_OK) goto done;

    struct sbuf b = {.out = out, .cap = cap, .spans = spans, .cap_spans = spans ? cap_spans : 0};
    switch (t) {
    case CHAT_TEMPLATE_CHATML: render_chatml(&b, msgs, roles, n, gen, default_system); break;
    case CHAT_TEMPLATE_LLAMA3: render_llama3(&b, msgs, n, gen); break;
    case CHAT_TEMPLATE_GEMMA: render_gemma(&b, msgs, roles, n, gen); break;
    case CHAT_TEMPLATE_MISTRAL: render_mistral(&b, msgs, roles, n); break;
    case CHAT_TEMPLATE_PHI3: render_phi3(&b, msgs, n, gen); break;
    default: break;
    }
    if (needed) *needed = b.len;
    if (n_spans) *n_spans = b.n_spans;
    if (out) out[b.len < cap ? b.len : cap - 1] = 0;
    if (out && b.len >= cap)
        st = err_set(err, KVIK_ERR_INVALID_ARG,
                     "chat: buffer too small (%zu bytes for %zu bytes of text)", cap, b.len);
done:
    if (roles != stack_roles) free(roles);
    return st;
}

kvik_status chat_apply(enum chat_template t, const struct chat_msg *msgs, size_t n,
                       bool add_generation_prompt, char *out, size_t cap, size_t *needed,
                       struct kvik_err *err) {
    return render(t, NULL, msgs, n, add_generation_prompt, out, cap, needed, NULL, 0, NULL, err);
}

/* ---- the model's own template (Jinja) ------------------------------------ */

/* Renders with f->jinja into out: the text and the spans the template
 * wrote (the complement of the rendering's data). */
static kvik_status render_jinja(const struct chat_format *f, const struct chat_msg *msgs,
                                const char *const *extra, size_t n, const char *tools_json, bool gen,
                                struct chat_rendering *out, struct kvik_err *err) {
    struct strbuf b = {0};
    strbuf_puts(&b, "{\"messages\":[");
    for (size_t i = 0; i < n; i++) {
        const char *x = extra ? extra[i] : NULL;
        if (!msgs[i].role || (!msgs[i].content && !x)) {
            free(b.p);
            return err_set(err, KVIK_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
        }
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") && strcmp(msgs[i].role, "assistant") &&
            strcmp(msgs[i].role, "tool")) {
            free(b.p);
            return err_set(err, KVIK_ERR_INVALID_ARG, "chat: message %zu: unknown role '%.40s'", i, msgs[i].role);
        }
        strbuf_puts(&b, i ? ",{\"role\":" : "{\"role\":");
        strbuf_json(&b, msgs[i].role);
        strbuf_puts(&b, ",\"content\":");
        if (msgs[i].content) strbuf_json(&b, msgs[i].content);
        else strbuf_puts(&b, "null");
        if (x && *x) {
            strbuf_puts(&b, ",");
            strbuf_puts(&b, x);
        }
        strbuf_puts(&b, "}");
    }
    strbuf_puts(&b, "],\"tools\":");
    strbuf_puts(&b, tools_json ? tools_json : "null");
    strbuf_puts(&b, gen ? ",\"add_generation_prompt\":true}" : ",\"add_generation_prompt\":false}");
    if (b.oom) {
        free(b.p);
        return err_set(err, KVIK_ERR_NOMEM, "chat: out of memory");
    }
    struct jinja_input in = {b.p, b.n, "", f->eos_text, (int64_t)time(NULL)};
    struct jinja_output o;
    kvik_status st = jinja_render(f->jinja, &in, &o, err);
    free(b.p);
    if (st == KVIK_ERR_FORMAT) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return err_set(err, KVIK_ERR_INVALID_ARG, "chat: the model's template refuses the conversation: %s", msg);
    }
    if (st) return st;
    out->spans = malloc((o.n_data + 1) * sizeof *out->spans);
    if (!out->spans) {
        jinja_output_free(&o);
        return err_set(err, KVIK_ERR_NOMEM, "chat: out of memory");
    }
    size_t at = 0;
    for (size_t i = 0; i <= o.n_data; i++) {
        size_t end = i < o.n_data ? o.data[i].begin : o.len;
        if (end > at) out->spans[out->n_spans++] = (struct tok_span){at, end - at};
        if (i < o.n_data) at = o.data[i].end;
    }
    out->text = o.text;
    out->len = o.len;
    free(o.data);
    return KVIK_OK;
}

kvik_status chat_format_apply(const struct chat_format *f, const struct chat_msg *msgs,
                              size_t n, bool add_generation_prompt, char *out, size_t cap,
                              size_t *needed, struct kvik_err *err) {
    if (!f) return err_set(err, KVIK_ERR_INVALID_ARG, "chat: format is NULL");
    if (f->jinja) {
        if (needed) *needed = 0;
        struct chat_rendering r = {0};
        kvik_status st = render_jinja(f, msgs, NULL, n, NULL, add_generation_prompt, &r, err);
        if (st) return st;
        if (needed) *needed = r.len;
        if (out && r.len < cap) memcpy(out, r.text, r.len + 1);
        else if (out || cap) st = err_set(err, KVIK_ERR_INVALID_ARG, "chat: buffer too small");
        chat_rendering_free(&r);
        return st;
    }
    return render(f->tmpl, f->default_system, msgs, n, add_generation_prompt, out, cap, needed,
                  NULL, 0, NULL, err);
}

kvik_status chat_render_spans(const struct chat_format *f, const struct chat_msg *msgs,
                              const char *const *extra, size_t n, const char *tools_json,
                              bool add_generation_prompt, struct chat_rendering *out,
                              struct kvik_err *err) {
    *out = (struct chat_rendering){0};
    if (!f) return err_set(err, KVIK_ERR_INVALID_ARG, "chat: format is NULL");
    if (f->jinja) return render_jinja(f, msgs, extra, n, tools_json, add_generation_prompt, out, err);
    bool has_extra = false;
    for (size_t i = 0; extra && i < n; i++) has_extra |= extra[i] != NULL;
    if (tools_json || has_extra)
        return err_set(err, KVIK_ERR_UNSUPPORTED, "chat: tools and tool calls need the model's own chat template");
    size_t needed = 0, n_spans = 0;
    kvik_status st = render(f->tmpl, f->default_system, msgs, n, add_generation_prompt, NULL, 0,
                            &needed, NULL, 0, &n_spans, err);
    if (st) return st;
    out->text = malloc(needed + 1);
    out->spans = malloc((n_spans ? n_spans : 1) * sizeof *out->spans);
    if (!out->text || !out->spans) {
        chat_rendering_free(out);
        return err_set(err, KVIK_ERR_NOMEM, "chat: out of memory");
    }
    st = render(f->tmpl, f->default_system, msgs, n, add_generation_prompt, out->text, needed + 1,
                &out->len, out->spans, n_spans, &out->n_spans, err);
    if (st) chat_rendering_free(out);
    return st;
}

void chat_rendering_free(struct chat_rendering *r) {
    if (!r) return;
    free(r->text);
    free(r->spans);
    *r = (struct chat_rendering){0};
}
