/*
 * chat.h — chat templates: turning a list of {role, content} messages into
 * the prompt text a chat model was trained on.
 *
 * GGUF files carry the Hugging Face Jinja template in tokenizer.chat_template.
 * chat_detect_gguf compiles it with the Jinja engine (template/jinja.h) and
 * that renders: messages (role and content), tools none (chat_encode_tools
 * gives tools and tool calls), add_generation_prompt,
 * bos_token "" (see BOS below) and eos_token the EOS token's text; an error
 * the template raises is KVIK_ERR_INVALID_ARG. Message contents are data:
 * the rendering marks the bytes the template wrote itself.
 *
 * The family recogniser below is the fallback, for files without a template
 * (or one the engine cannot compile) and for a family named by the user: it
 * recognises the template's family by distinctive markers and renders that
 * family in C. Each family reproduces, byte for byte, one reference
 * template (the exact texts are in
 * scripts/gen_chat_golden.py; tests/data/chat/ holds Jinja2's renderings):
 *
 *   chatml   generic ChatML ("<|im_start|>role\ncontent<|im_end|>\n"), plus
 *            an optional default system prompt (SmolLM2, Qwen2.5 style, see
 *            struct chat_format). Qwen2.5's template (Qwen2.5-Instruct,
 *            Qwen2.5-Coder-Instruct) is recognised as exact: kvik renders
 *            its branch without tools byte for byte; its tool section
 *            (tools, tool calls, "tool" messages) is not rendered
 *   llama3   Meta-Llama-3-8B-Instruct: content trimmed
 *   gemma    gemma-3-it: assistant -> "model", a leading system message is
 *            folded into the first user turn as "system\n\nuser", a later
 *            one in an odd place of the alternation is a "system" turn,
 *            content trimmed (for a conversation without system, gemma-2-it
 *            renders the same). Gemma files without a template get this
 *            family from their architecture (chat_detect_gguf)
 *   mistral  Mistral-7B-Instruct-v0.1 (v1 style, " [INST] ... [/INST]"), a
 *            leading system message folded into the first [INST]; the
 *            template has no generation prompt, add_generation_prompt is
 *            ignored; assistant turns end with the EOS text "</s>"
 *   phi3     Phi-3-mini-4k-instruct: "<|role|>\ncontent<|end|>\n"; without
 *            a generation prompt the text ends with the EOS text
 *            "<|endoftext|>", as the template does
 *
 * BOS: the rendered text never contains a BOS token text (the templates'
 * bos_token renders as ""); the caller prepends the BOS id when tokenising,
 * as the model's tokenizer.ggml.add_bos_token says. EOS texts that a
 * template writes inside the conversation (mistral, phi3) are kept: the
 * tokenizer must parse special-token text.
 *
 * Roles are "system", "user" and "assistant"; anything else is
 * KVIK_ERR_INVALID_ARG. gemma and mistral also reject what their reference
 * templates reject: after an optional leading system message, user
 * messages must take the even places and only they (0, 2, ...), and
 * mistral allows no later system message at all. Whitespace trimming
 * (llama3, gemma) follows Python's str.strip(): ASCII and Unicode white
 * space.
 */
#ifndef KVIK_CHAT_H
#define KVIK_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

enum chat_template {
    CHAT_TEMPLATE_CHATML,
    CHAT_TEMPLATE_LLAMA3,
    CHAT_TEMPLATE_GEMMA,
    CHAT_TEMPLATE_MISTRAL,
    CHAT_TEMPLATE_PHI3,
    CHAT_TEMPLATE_COUNT,
};

struct chat_msg {
    const char *role;    // "system", "user" or "assistant"
    const char *content; // UTF-8, NUL-terminated
};

/* A recognised template: the family plus per-model details. */
struct jinja_template;

struct chat_format {
    enum chat_template tmpl;
    char *default_system; // NULL, or (owned) the system prompt the template injects
                          // when messages[0] is not a system message (SmolLM2)
    bool approximate;     // the template does more than the family's reference
                          // (Llama 3.1's date header, tools): rendering is the
                          // family's base form, not byte-exact; callers may warn
    bool by_architecture; // the file has no template: the family its
                          // general.architecture implies (chat_detect_gguf)
    struct jinja_template *jinja; // owned: the file's own template, compiled
                                  // (chat_detect_gguf); when set it renders, and
                                  // tmpl is only what the family recogniser saw
    char *eos_text;               // owned: eos_token's text for jinja, or NULL
};

/* "chatml", "llama3", "gemma", "mistral", "phi3"; "?" out of range. */
const char *chat_template_name(enum chat_template t);

/* Name -> family (an override); KVIK_ERR_UNSUPPORTED for an unknown name. */
kvik_status chat_template_from_name(const char *name, enum chat_template *out,
                                    struct kvik_err *err);

/* Recognises the Jinja text of tokenizer.chat_template. KVIK_ERR_UNSUPPORTED
 * (never a guess) when no family matches or a known variant kvik does not
 * render (Phi-4's <|im_sep|>, Mistral v3/v7 "[INST]" without spaces,
 * Llama 2's <<SYS>>). Free with chat_format_free. */
kvik_status chat_detect(const char *template_text, struct chat_format *out,
                        struct kvik_err *err);
void chat_format_free(struct chat_format *f);

struct gguf;

/* The chat format of a model file: its tokenizer.chat_template as
 * chat_detect recognises it (and its errors); without that key, the family
 * general.architecture implies (gemma, gemma2, gemma3: gemma), with
 * by_architecture set. KVIK_ERR_NOT_FOUND ("the model has no chat
 * template") when there is neither. Free with chat_format_free. */
kvik_status chat_detect_gguf(const struct gguf *g, struct chat_format *out, struct kvik_err *err);

/*
 * Renders msgs[0..n). Always sets *needed (when non-NULL) to the text's
 * length without the NUL. Writes the NUL-terminated text to out when it fits
 * (needed < cap); otherwise returns KVIK_ERR_INVALID_ARG ("buffer too
 * small"), except for a pure size query (out == NULL, cap == 0), which
 * returns KVIK_OK. Rendering errors (bad role, order) leave *needed 0.
 */
kvik_status chat_apply(enum chat_template t, const struct chat_msg *msgs, size_t n,
                       bool add_generation_prompt, char *out, size_t cap, size_t *needed,
                       struct kvik_err *err);

/* The same, with the format's per-model details (default system prompt). */
kvik_status chat_format_apply(const struct chat_format *f, const struct chat_msg *msgs,
                              size_t n, bool add_generation_prompt, char *out, size_t cap,
                              size_t *needed, struct kvik_err *err);

struct tokenizer;

/*
 * Renders msgs[0..n) and tokenizes the text in one go: the template's own
 * markers become their special tokens, and every message content is plain
 * text, so a "<|im_end|>" inside a content encodes as the characters it is
 * and never as a control token. Control tokens match only where they lie
 * wholly inside text the template wrote (its markers, the role names, the
 * default system prompt); user-defined tokens match anywhere, as in
 * tokenizer_encode. The plain text between two control tokens, template
 * text and contents together, is encoded as one stretch: for contents that
 * hold no control-token text the ids are exactly tokenizer_encode(rendered
 * text, add_special = true, parse_special = true). BOS comes first when the
 * tokenizer's add_bos says so, EOS last when add_eos does, as add_special
 * does in tokenizer_encode.
 *
 * On success *ids (malloc'd, the caller frees it) holds *n_ids ids. On
 * failure *ids is NULL and *n_ids 0: the rendering's errors (bad role or
 * order: KVIK_ERR_INVALID_ARG), KVIK_ERR_NOMEM.
 */
kvik_status chat_encode(const struct chat_format *f, const struct tokenizer *tok,
                        const struct chat_msg *msgs, size_t n, bool add_generation_prompt,
                        int32_t **ids, size_t *n_ids, struct kvik_err *err);

/*
 * chat_encode with tools, for the model's own template (f->jinja; a family
 * renderer gives KVIK_ERR_UNSUPPORTED when tools or extra are given):
 * tools_json (NULL: none) is the JSON array the template gets as `tools`;
 * extra (NULL, or n entries each NULL or not) holds, per message, JSON
 * object members without the braces that join its role and content
 * ("\"tool_calls\":[...]", "\"tool_call_id\":\"...\""). A message with
 * extra members may have content NULL (null to the template). Every string
 * of tools_json and extra is data, as contents are.
 */
kvik_status chat_encode_tools(const struct chat_format *f, const struct tokenizer *tok,
                              const struct chat_msg *msgs, const char *const *extra, size_t n,
                              const char *tools_json, bool add_generation_prompt, int32_t **ids,
                              size_t *n_ids, struct kvik_err *err);

#endif /* KVIK_CHAT_H */
