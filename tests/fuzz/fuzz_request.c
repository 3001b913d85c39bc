/*
 * fuzz_request.c — libFuzzer target for the server's request parser
 * (src/server/request.c). Each input is one HTTP body, read as a chat
 * completions, a completions, a /tokenize, a /detokenize and a
 * /v1/embeddings body. A body
 * that parses must satisfy every documented bound (else trap); its stop
 * strings are then run over its own text (the prompt or the messages) in
 * pieces through stop_scan, and the result must equal the one found by
 * brute force on each growing prefix.
 *
 * Build and run: make fuzz && make fuzz-run FUZZ_SECONDS=600
 * Seeds: tests/fuzz/seeds/fuzz_request/.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "server/stop.h"

static void check_stops(const struct api_request *r, const char *text, size_t len) {
    if (r->n_stop <= 0) return;
    size_t lens[API_MAX_STOP];
    for (int k = 0; k < r->n_stop; k++) lens[k] = strlen(r->stop[k]);
    struct stop_set set = {(const char *const *)r->stop, lens, r->n_stop};
    size_t have = 0, safe = 0;
    for (size_t step = 1; have < len; step = step % 7 + 1) {
        size_t old = have;
        have = have + step > len ? len : have + step;
        struct stop_scan_result s = stop_scan(&set, text, have, old);
        /* brute force on text[0..have) */
        size_t want = have;
        bool match = false;
        for (size_t i = 0; i < have && !match; i++)
            for (int k = 0; k < r->n_stop; k++)
                if (have - i >= lens[k] && !memcmp(text + i, r->stop[k], lens[k])) {
                    want = i;
                    match = true;
                    break;
                }
        if (s.matched != match) __builtin_trap();
        if (match) {
            if (s.cut != want || safe > s.cut) __builtin_trap();
            return;
        }
        if (s.safe < safe || s.safe > have) __builtin_trap();
        safe = s.safe;
    }
}

static void check_request(const struct api_request *r) {
    if (r->n < 1 || r->n > API_MAX_N) __builtin_trap();
    if (r->n_stop < 0 || r->n_stop > API_MAX_STOP) __builtin_trap();
    for (int i = 0; i < r->n_stop; i++) {
        size_t n = strlen(r->stop[i]);
        if (n == 0 || n > API_MAX_STOP_LEN) __builtin_trap();
    }
    if (r->top_logprobs < 0 || r->top_logprobs > API_MAX_TOP_LOGPROBS) __builtin_trap();
    if (r->max_tokens < 0) __builtin_trap();
    if (sampler_params_validate(&r->sp, NULL) != KVIK_OK) __builtin_trap();
    if (r->include_usage && !r->stream) __builtin_trap();
    if (r->route == API_ROUTE_CHAT) {
        if (r->n_msgs < 1 || r->n_msgs > API_MAX_MESSAGES) __builtin_trap();
        for (size_t i = 0; i < r->n_msgs; i++) {
            const char *c = r->msgs[i].content, *x = r->msg_extra[i];
            /* content NULL: an assistant's tool calls alone */
            if (!r->msgs[i].role || (!c && (!x || strcmp(r->msgs[i].role, "assistant")))) __builtin_trap();
            if (c) check_stops(r, c, strlen(c));
            if (x) { /* the template's members: a JSON object once braced */
                size_t n = strlen(x);
                char *o = malloc(n + 3);
                if (!o) __builtin_trap();
                o[0] = '{';
                memcpy(o + 1, x, n);
                o[n + 1] = '}';
                o[n + 2] = 0;
                json_t *v = json_loads(o, 0, NULL);
                if (!json_is_object(v)) __builtin_trap();
                json_decref(v);
                free(o);
            }
        }
        if (r->tools_json) {
            json_t *v = json_loads(r->tools_json, 0, NULL);
            if (!json_is_array(v) || (int)json_array_size(v) != r->n_tools || r->n_tools > API_MAX_TOOLS)
                __builtin_trap();
            json_decref(v);
        }
        if ((r->tool_choice == API_TOOLS_NAMED) != (r->tool_name != NULL)) __builtin_trap();
    } else {
        if (!r->prompt == !r->prompt_ids) __builtin_trap();
        if (r->prompt) check_stops(r, r->prompt, r->prompt_len);
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] < 0) __builtin_trap();
        /* a batch: every further prompt of the first one's kind */
        if (r->n_more < 0 || r->n_more >= API_MAX_PROMPTS || (r->n_more && (!r->more || r->stream))) __builtin_trap();
        for (int k = 0; k < r->n_more; k++) {
            const struct api_more_prompt *m = &r->more[k];
            if (!m->prompt == !m->prompt_ids || !m->prompt != !r->prompt) __builtin_trap();
            for (int i = 0; i < m->n_prompt_ids; i++)
                if (m->prompt_ids[i] < 0) __builtin_trap();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    struct api_error e;
    for (int route = API_ROUTE_CHAT; route <= API_ROUTE_COMPLETIONS; route++) {
        struct api_request r;
        if (api_parse_request((enum api_route)route, body, size, 1 << 20, &r, &e)) check_request(&r);
        else if (e.status < 400 || e.status > 599 || !e.message[0]) __builtin_trap();
        api_request_free(&r);
    }
    struct api_tokenize t;
    if (api_parse_tokenize(body, size, 1 << 20, &t, &e) && !t.text) __builtin_trap();
    api_tokenize_free(&t);
    struct api_detokenize d;
    if (api_parse_detokenize(body, size, 1 << 20, &d, &e))
        for (int i = 0; i < d.n; i++)
            if (d.ids[i] < 0) __builtin_trap();
    api_detokenize_free(&d);
    /* an embeddings body: 1..API_MAX_EMBED_INPUTS inputs, each a text or ids >= 0 */
    struct api_embed_request er;
    if (api_parse_embeddings(body, size, 1 << 20, &er, &e)) {
        if (er.n < 1 || er.n > API_MAX_EMBED_INPUTS || er.dimensions < 0) __builtin_trap();
        for (int i = 0; i < er.n; i++) {
            if (!er.texts[i] && er.n_ids[i] < 1) __builtin_trap();
            for (int k = 0; !er.texts[i] && k < er.n_ids[i]; k++)
                if (er.ids[i][k] < 0) __builtin_trap();
        }
    } else if (e.status < 400 || e.status > 599 || !e.message[0]) {
        __builtin_trap();
    }
    api_embed_request_free(&er);
    /* the sanitizer always yields valid UTF-8 */
    size_t n;
    char *s = api_utf8_sanitize(body, size, &n);
    if (s) {
        for (size_t i = 0; i < n;) {
            size_t k = utf8_valid_seq((const uint8_t *)s + i, n - i);
            if (!k) __builtin_trap();
            i += k;
        }
        free(s);
    }
    return 0;
}
