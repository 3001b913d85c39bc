/*
 * toolcall.h — tool calls in a model's reply: the style a chat template
 * asks the model to write them in, and a reply split into its text and its
 * calls, as OpenAI's message.tool_calls holds them. Pure: no sockets, no
 * engine; JSON through jansson.
 *
 * Styles:
 *   TOOLCALL_HERMES  <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
 *                    one block a call (Qwen2.5, Hermes 2 and 3); the closing
 *                    tag may be missing at the end of the reply
 *   TOOLCALL_LLAMA3  the whole reply one JSON object {"name": ..., "parameters":
 *                    {...}} (or "arguments"), or several separated by ";"
 *                    (Llama 3.1-3.3's JSON tool calling)
 */
#ifndef KVIK_SERVER_TOOLCALL_H
#define KVIK_SERVER_TOOLCALL_H

#include <stddef.h>

enum toolcall_style { TOOLCALL_NONE, TOOLCALL_HERMES, TOOLCALL_LLAMA3 };

/* The style a chat template's text (tokenizer.chat_template) asks for:
 * NONE when it names neither. */
enum toolcall_style toolcall_style_of(const char *template_text);

struct toolcall {
    char *name;      /* malloc'd, NUL-terminated */
    char *arguments; /* malloc'd: the arguments as compact JSON text (an object) */
};

/*
 * Splits reply[0..len) written in style st. Returns the number of calls
 * stored in calls[0..max) (0 when the reply holds none, or when a call is
 * malformed: then the whole reply is text), -1 when out of memory. After
 * it *content_len is the length of the text before the first call, white
 * space at its end left out (len when there are no calls).
 */
int toolcall_parse(enum toolcall_style st, const char *reply, size_t len, struct toolcall *calls, int max,
                   size_t *content_len);
void toolcall_free(struct toolcall *calls, int n);

/*
 * A reply that is nothing but one call written without the style's
 * markers, as small models often write it: one JSON object {"name",
 * "arguments" (or "parameters"): {...}}, alone or in a Markdown code fence
 * (``` or ```json), whose name is a function of tools_json (the request's
 * tools array). 1 with *call set, 0 otherwise, -1 when out of memory.
 */
int toolcall_parse_bare(const char *reply, size_t len, const char *tools_json, struct toolcall *call);

#endif
