/*
 * sse.c — Server-Sent Events, as OpenAI-compatible servers stream them:
 *
 *   data: {"choices":[{"delta":{"content":"Hi"}}]}\n
 *   \n
 *   : keep-alive comment\n
 *   data: [DONE]\n
 *   \n
 *
 * sse_feed takes the bytes in whatever pieces the network delivers (a piece
 * may end in the middle of a line, or between the "\r" and "\n" of one line
 * end) and calls back once per complete event. chunk_parse reads one event's
 * data as an OpenAI chunk with jansson and keeps only what the load
 * generator needs: whether it carried text, the usage counts, [DONE], errors.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tools/loadgen/loadgen.h"

void sse_init(struct sse_parser *p) { memset(p, 0, sizeof *p); }

void sse_free(struct sse_parser *p) {
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof *p);
}

bool sse_pending(const struct sse_parser *p) { return p->line_len > 0 || p->has_data; }

/* Grows *buf to hold need bytes plus a NUL; false past SSE_MAX_EVENT or on no memory. */
static bool reserve(char **buf, size_t *cap, size_t need) {
    if (need > SSE_MAX_EVENT) return false;
    if (need + 1 <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need + 1) c *= 2;
    if (c > SSE_MAX_EVENT + 1) c = SSE_MAX_EVENT + 1;
    char *nb = realloc(*buf, c);
    if (!nb) return false;
    *buf = nb;
    *cap = c;
    return true;
}

/* One complete line (without its end). */
static bool line_done(struct sse_parser *p, sse_event_fn fn, void *ctx) {
    const char *l = p->line ? p->line : "";
    size_t n = p->line_len;
    p->line_len = 0;
    if (n == 0) { /* blank line: dispatch */
        bool had = p->data_len > 0;
        p->has_data = false;
        if (!had) return true;
        size_t dn = p->data_len;
        p->data_len = 0;
        p->data[dn] = 0;
        p->n_events++;
        return fn ? fn(ctx, p->data, dn) : true;
    }
    if (l[0] == ':') {
        p->n_comments++;
        return true;
    }
    const char *colon = memchr(l, ':', n);
    size_t name_len = colon ? (size_t)(colon - l) : n;
    if (name_len != 4 || memcmp(l, "data", 4) != 0) return true; /* event:, id:, retry:, unknown */
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ') v++;
    size_t vn = (size_t)(l + n - v);
    size_t sep = p->has_data ? 1 : 0;
    if (!reserve(&p->data, &p->data_cap, p->data_len + sep + vn)) return false;
    if (sep) p->data[p->data_len++] = '\n';
    memcpy(p->data + p->data_len, v, vn);
    p->data_len += vn;
    p->has_data = true;
    return true;
}

bool sse_feed(struct sse_parser *p, const char *buf, size_t n, sse_event_fn fn, void *ctx) {
    if (p->failed) return false;
    size_t i = 0;
    while (i < n) {
        if (p->after_cr) {
            p->after_cr = false;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        /* the span up to the next line end */
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r') j++;
        if (j > i) {
            if (!reserve(&p->line, &p->line_cap, p->line_len + (j - i))) goto fail;
            memcpy(p->line + p->line_len, buf + i, j - i);
            p->line_len += j - i;
        }
        if (j == n) break;
        if (buf[j] == '\r') p->after_cr = true;
        i = j + 1;
        if (!line_done(p, fn, ctx)) goto fail;
    }
    return true;
fail:
    p->failed = true;
    return false;
}

/* ---- OpenAI chunks --------------------------------------------------- */

static void set_msg(struct chunk_info *o, const char *m) { snprintf(o->message, sizeof o->message, "%s", m); }

/* The integer member name of usage, -1 if absent or not a non-negative integer. */
static int64_t usage_int(json_t *usage, const char *name) {
    json_t *v = json_object_get(usage, name);
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    return (int64_t)json_integer_value(v);
}

/* Adds a text member's length; false if it is there but neither a string nor null. */
static bool text_len(json_t *obj, const char *name, int32_t *acc) {
    json_t *v = json_object_get(obj, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v)) return false;
    size_t n = json_string_length(v);
    *acc += n > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)n;
    return true;
}

void chunk_parse(const char *data, size_t len, struct chunk_info *o) {
    memset(o, 0, sizeof *o);
    o->prompt_tokens = o->completion_tokens = -1;
    size_t a = 0, b = len;
    while (a < b && (data[a] == ' ' || data[a] == '\t' || data[a] == '\n')) a++;
    while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t' || data[b - 1] == '\n')) b--;
    if (b - a == 6 && !memcmp(data + a, "[DONE]", 6)) {
        o->kind = CHUNK_DONE;
        return;
    }
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    if (!root || !json_is_object(root)) {
        o->kind = CHUNK_MALFORMED;
        if (root) set_msg(o, "chunk is not a JSON object");
        else snprintf(o->message, sizeof o->message, "chunk is not JSON: %.120s", jerr.text);
        json_decref(root);
        return;
    }
    json_t *e = json_object_get(root, "error");
    if (e && !json_is_null(e)) {
        o->kind = CHUNK_ERROR;
        json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
        set_msg(o, json_is_string(m) ? json_string_value(m) : "error object in the stream");
        json_decref(root);
        return;
    }
    o->kind = CHUNK_DATA;
    json_t *choices = json_object_get(root, "choices");
    if (choices && !json_is_null(choices)) {
        if (!json_is_array(choices)) goto malformed;
        json_t *c0 = json_array_get(choices, 0);
        if (c0) {
            if (!json_is_object(c0)) goto malformed;
            json_t *delta = json_object_get(c0, "delta");
            if (delta && !json_is_null(delta)) {
                if (!json_is_object(delta)) goto malformed;
                if (!text_len(delta, "content", &o->content_bytes) ||
                    !text_len(delta, "reasoning_content", &o->content_bytes))
                    goto malformed;
            }
            if (!text_len(c0, "text", &o->content_bytes)) goto malformed;
            json_t *fr = json_object_get(c0, "finish_reason");
            if (json_is_string(fr)) snprintf(o->finish_reason, sizeof o->finish_reason, "%s", json_string_value(fr));
        }
    }
    json_t *usage = json_object_get(root, "usage");
    if (usage && !json_is_null(usage)) {
        if (!json_is_object(usage)) goto malformed;
        o->has_usage = true;
        o->prompt_tokens = usage_int(usage, "prompt_tokens");
        o->completion_tokens = usage_int(usage, "completion_tokens");
    }
    json_decref(root);
    return;
malformed:
    o->kind = CHUNK_MALFORMED;
    set_msg(o, "chunk members have the wrong types");
    json_decref(root);
}
