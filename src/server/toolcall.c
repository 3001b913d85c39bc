/*
 * toolcall.c — tool calls in a reply (toolcall.h). Each call's JSON is
 * read with jansson, which stops at the end of the object; what follows
 * must be the style's closing text, a separator or the end.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "server/toolcall.h"

enum toolcall_style toolcall_style_of(const char *t) {
    if (!t) return TOOLCALL_NONE;
    if (strstr(t, "<tool_call>")) return TOOLCALL_HERMES;
    if (strstr(t, "<|python_tag|>") || (strstr(t, "\"parameters\"") && strstr(t, "<|eot_id|>")))
        return TOOLCALL_LLAMA3;
    return TOOLCALL_NONE;
}

static size_t skip_ws(const char *s, size_t i, size_t len) {
    while (i < len && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    return i;
}

static bool starts(const char *s, size_t i, size_t len, const char *what) {
    size_t n = strlen(what);
    return len - i >= n && !memcmp(s + i, what, n);
}

void toolcall_free(struct toolcall *calls, int n) {
    for (int i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
        calls[i].name = calls[i].arguments = NULL;
    }
}

/* One call's object at s[*i]: its name and arguments (under args_key or,
 * for llama3, "parameters" too) into c; *i moves past it. 0 if it is not a
 * call, -1 when out of memory, 1 when stored. */
static int read_call(const char *s, size_t *i, size_t len, bool llama3, struct toolcall *c) {
    if (*i >= len || s[*i] != '{') return 0;
    json_error_t je;
    json_t *o = json_loadb(s + *i, len - *i, JSON_DISABLE_EOF_CHECK, &je);
    if (!o) return 0;
    int r = 0;
    json_t *name = json_object_get(o, "name");
    json_t *args = json_object_get(o, "arguments");
    if (!args && llama3) args = json_object_get(o, "parameters");
    json_t *parsed = NULL;
    json_error_t je2;
    if (json_is_string(args)) /* arguments written as a JSON string, as OpenAI sends them */
        args = parsed = json_loads(json_string_value(args), 0, &je2);
    if (json_is_string(name) && json_string_length(name) > 0 && json_is_object(args)) {
        c->name = strdup(json_string_value(name));
        c->arguments = json_dumps(args, JSON_COMPACT);
        if (!c->name || !c->arguments) {
            free(c->name);
            free(c->arguments);
            c->name = c->arguments = NULL;
            r = -1;
        } else {
            r = 1;
            *i += je.position > 0 ? (size_t)je.position : 0;
        }
    }
    json_decref(parsed);
    json_decref(o);
    return r;
}

/* The next call, at s[*i], into calls[*n] (room for max): 1 and *n one
 * more, 0 when there is none or no room, -1 when out of memory (the calls
 * so far freed). */
static int take_call(const char *s, size_t *i, size_t len, bool llama3, struct toolcall *calls, int *n, int max) {
    if (*n >= max) return 0;
    size_t at = *i;
    int r = read_call(s, i, len, llama3, &calls[*n]);
    if (r < 0) toolcall_free(calls, *n);
    if (r <= 0) return r;
    if (*i == at) {
        toolcall_free(calls, *n + 1);
        *n = 0;
        return 0;
    }
    (*n)++;
    return 1;
}

static int parse_hermes(const char *s, size_t len, struct toolcall *calls, int max, size_t *content_len) {
    const char *open = "<tool_call>", *close = "</tool_call>";
    size_t i = 0;
    while (i < len && !starts(s, i, len, open)) i++;
    if (i >= len) return 0;
    size_t first = i;
    int n = 0;
    while (i < len) {
        if (!starts(s, i, len, open)) goto malformed;
        i = skip_ws(s, i + strlen(open), len);
        int r = take_call(s, &i, len, false, calls, &n, max);
        if (r < 0) return -1;
        if (r == 0) goto malformed;
        i = skip_ws(s, i, len);
        if (starts(s, i, len, close)) i = skip_ws(s, i + strlen(close), len);
        else if (i < len) goto malformed;
    }
    while (first > 0 && (s[first - 1] == ' ' || s[first - 1] == '\n' || s[first - 1] == '\r' || s[first - 1] == '\t'))
        first--;
    *content_len = first;
    return n;
malformed:
    toolcall_free(calls, n);
    return 0;
}

static int parse_llama3(const char *s, size_t len, struct toolcall *calls, int max, size_t *content_len) {
    size_t i = skip_ws(s, 0, len);
    if (starts(s, i, len, "<|python_tag|>")) i = skip_ws(s, i + strlen("<|python_tag|>"), len);
    int n = 0;
    while (i < len) {
        int r = take_call(s, &i, len, true, calls, &n, max);
        if (r < 0) return -1;
        if (r == 0) goto malformed;
        i = skip_ws(s, i, len);
        if (i < len && s[i] == ';') i = skip_ws(s, i + 1, len);
    }
    if (n) *content_len = 0;
    return n;
malformed:
    toolcall_free(calls, n);
    return 0;
}

int toolcall_parse_bare(const char *s, size_t len, const char *tools_json, struct toolcall *call) {
    call->name = call->arguments = NULL;
    if (!s || !tools_json) return 0;
    size_t i = skip_ws(s, 0, len), end = len;
    while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\n' || s[end - 1] == '\r' || s[end - 1] == '\t')) end--;
    if (starts(s, i, end, "```")) { /* a fence: its info string, then the closing fence */
        i += 3;
        while (i < end && s[i] != '\n') i++;
        if (end - i < 3 || memcmp(s + end - 3, "```", 3)) return 0;
        end -= 3;
        i = skip_ws(s, i, end);
        while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\n' || s[end - 1] == '\r' || s[end - 1] == '\t'))
            end--;
    }
    int r = read_call(s, &i, end, true, call);
    if (r <= 0) return r;
    bool known = false;
    json_t *tools = i == end ? json_loads(tools_json, 0, NULL) : NULL;
    for (size_t k = 0; k < json_array_size(tools) && !known; k++) {
        const char *n = json_string_value(json_object_get(json_object_get(json_array_get(tools, k), "function"), "name"));
        known = n && !strcmp(n, call->name);
    }
    json_decref(tools);
    if (!known) {
        toolcall_free(call, 1);
        return 0;
    }
    return 1;
}

int toolcall_parse(enum toolcall_style st, const char *reply, size_t len, struct toolcall *calls, int max,
                   size_t *content_len) {
    *content_len = len;
    if (!reply || max <= 0) return 0;
    for (int k = 0; k < max; k++) calls[k].name = calls[k].arguments = NULL;
    if (st == TOOLCALL_HERMES) return parse_hermes(reply, len, calls, max, content_len);
    if (st == TOOLCALL_LLAMA3) return parse_llama3(reply, len, calls, max, content_len);
    return 0;
}
