/*
 * request.c — parsing and validating OpenAI request bodies (see request.h).
 *
 * Error messages follow OpenAI's wording, e.g.
 *   Invalid type for 'temperature': expected a decimal, but got a string instead.
 *   Invalid 'n': integer above maximum value. Expected a value <= 16, but got 20 instead.
 *   Missing required parameter: 'messages'.
 * with the matching codes (invalid_type, integer_above_max_value,
 * missing_required_parameter, ...).
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/request.h"

bool api_fail(struct api_error *e, int status, const char *type, const char *code,
              const char *param, const char *fmt, ...) {
    if (!e) return false;
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    /* a message cut inside a UTF-8 sequence (a quoted value) must stay valid */
    size_t n = strlen(e->message), i = 0;
    while (i < n) {
        size_t k = utf8_valid_seq((const uint8_t *)e->message + i, n - i);
        if (!k) {
            e->message[i] = 0;
            break;
        }
        i += k;
    }
    return false;
}

char *api_error_json(const struct api_error *e) {
    json_t *err = json_object();
    json_object_set_new(err, "message", json_string(e->message));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* ---- UTF-8 --------------------------------------------------------------- */

char *api_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    /* each invalid byte becomes 3 bytes at most */
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_valid_seq((const uint8_t *)s + i, n - i);
        if (k) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    if (out_len) *out_len = o;
    return out;
}

/* ---- typed field access ------------------------------------------------- */

enum { FIELD_BAD = -1, FIELD_ABSENT = 0, FIELD_OK = 1 };

static const char *json_kind(const json_t *v) {
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a decimal";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static bool type_error(struct api_error *e, const char *param, const char *want, const json_t *v) {
    return api_fail(e, 400, "invalid_request_error", "invalid_type", param,
                    "Invalid type for '%s': expected %s, but got %s instead.", param, want,
                    json_kind(v));
}

static json_t *field(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_bool(json_t *obj, const char *key, bool *out, struct api_error *e) {
    json_t *v = field(obj, key);
    if (!v) return FIELD_ABSENT;
    if (!json_is_boolean(v)) return type_error(e, key, "a boolean", v), FIELD_BAD;
    *out = json_is_true(v);
    return FIELD_OK;
}

static int get_number(json_t *obj, const char *key, double lo, double hi, double *out,
                      struct api_error *e) {
    json_t *v = field(obj, key);
    if (!v) return FIELD_ABSENT;
    if (!json_is_number(v)) return type_error(e, key, "a decimal", v), FIELD_BAD;
    double d = json_number_value(v);
    if (!(d >= lo)) {
        api_fail(e, 400, "invalid_request_error", "decimal_below_min_value", key,
                 "Invalid '%s': decimal below minimum value. Expected a value >= %g, but got %g instead.",
                 key, lo, d);
        return FIELD_BAD;
    }
    if (!(d <= hi)) {
        api_fail(e, 400, "invalid_request_error", "decimal_above_max_value", key,
                 "Invalid '%s': decimal above maximum value. Expected a value <= %g, but got %g instead.",
                 key, hi, d);
        return FIELD_BAD;
    }
    *out = d;
    return FIELD_OK;
}

/* An integer value (an integral decimal such as 16.0 counts) in [lo, hi]. */
static int int_value(json_t *v, const char *param, long long lo, long long hi, long long *out,
                     struct api_error *e) {
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e18) {
        x = (long long)json_real_value(v);
    } else {
        type_error(e, param, "an integer", v);
        return FIELD_BAD;
    }
    if (x < lo) {
        api_fail(e, 400, "invalid_request_error", "integer_below_min_value", param,
                 "Invalid '%s': integer below minimum value. Expected a value >= %lld, but got %lld instead.",
                 param, lo, x);
        return FIELD_BAD;
    }
    if (x > hi) {
        api_fail(e, 400, "invalid_request_error", "integer_above_max_value", param,
                 "Invalid '%s': integer above maximum value. Expected a value <= %lld, but got %lld instead.",
                 param, hi, x);
        return FIELD_BAD;
    }
    *out = x;
    return FIELD_OK;
}

static int get_int(json_t *obj, const char *key, long long lo, long long hi, long long *out,
                   struct api_error *e) {
    json_t *v = field(obj, key);
    if (!v) return FIELD_ABSENT;
    return int_value(v, key, lo, hi, out, e);
}

static char *dup_string(const json_t *v, size_t *len) {
    size_t n = json_string_length(v);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, json_string_value(v), n);
    s[n] = 0;
    if (len) *len = n;
    return s;
}

static bool nomem(struct api_error *e) {
    return api_fail(e, 500, "server_error", NULL, NULL, "The server ran out of memory.");
}

static int get_string(json_t *obj, const char *key, char **out, struct api_error *e) {
    json_t *v = field(obj, key);
    if (!v) return FIELD_ABSENT;
    if (!json_is_string(v)) return type_error(e, key, "a string", v), FIELD_BAD;
    if (!(*out = dup_string(v, NULL))) return nomem(e), FIELD_BAD;
    return FIELD_OK;
}

static bool unsupported(struct api_error *e, const char *param, const char *what) {
    return api_fail(e, 400, "invalid_request_error", "unsupported_parameter", param,
                    "Unsupported parameter: '%s' %s.", param, what);
}

/* ---- the body ------------------------------------------------------------ */

static json_t *load_body(const char *body, size_t len, size_t max_body, struct api_error *e) {
    if (len > max_body) {
        api_fail(e, 413, "invalid_request_error", "request_too_large", NULL,
                 "The request body is %zu bytes; the limit is %zu bytes.", len, max_body);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body ? body : "", len, 0, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_invalid_utf8)
            api_fail(e, 400, "invalid_request_error", "invalid_utf8", NULL,
                     "The request body is not valid UTF-8 (at byte %d).", jerr.position);
        else if (json_error_code(&jerr) == json_error_out_of_memory)
            nomem(e);
        else
            api_fail(e, 400, "invalid_request_error", "invalid_json", NULL,
                     "We could not parse the JSON body of your request. (line %d, column %d: %s)",
                     jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        api_fail(e, 400, "invalid_request_error", "invalid_type", NULL,
                 "The request body must be a JSON object, but got %s.", json_kind(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* messages[i].content: a string, or an array of text parts; NULL content
 * reads as "" (an assistant turn with tool calls only). */
static bool parse_content(json_t *c, size_t i, char **out, struct api_error *e) {
    char param[64];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!c || json_is_null(c)) {
        *out = strdup("");
        return *out ? true : nomem(e);
    }
    if (json_is_string(c)) {
        *out = dup_string(c, NULL);
        return *out ? true : nomem(e);
    }
    if (!json_is_array(c)) return type_error(e, param, "a string or an array of content parts", c);
    size_t total = 0, k;
    json_t *part;
    json_array_foreach(c, k, part) {
        snprintf(param, sizeof param, "messages[%zu].content[%zu]", i, k);
        if (!json_is_object(part)) return type_error(e, param, "an object", part);
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0)
            return api_fail(e, 400, "invalid_request_error", "unsupported_content", param,
                            "Invalid '%s': only content parts of type 'text' are supported.", param);
        if (!json_is_string(text)) {
            snprintf(param, sizeof param, "messages[%zu].content[%zu].text", i, k);
            return text ? type_error(e, param, "a string", text)
                        : api_fail(e, 400, "invalid_request_error", "missing_required_parameter",
                                   param, "Missing required parameter: '%s'.", param);
        }
        total += json_string_length(text);
    }
    char *s = malloc(total + 1);
    if (!s) return nomem(e);
    size_t o = 0;
    json_array_foreach(c, k, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(s + o, json_string_value(text), json_string_length(text));
        o += json_string_length(text);
    }
    s[o] = 0;
    *out = s;
    return true;
}

/* The members of an assistant's tool calls or a tool result that the
 * template gets beside role and content, as JSON text into *extra (NULL
 * when the message has none): "tool_calls" (each {"id", "type":
 * "function", "function": {"name", "arguments"}}, arguments a JSON object
 * when the string given parses as one, as templates expect) and
 * "tool_call_id" (required of a tool message). */
static bool parse_tool_members(json_t *msg, size_t i, const char *role, char **extra, struct api_error *e) {
    char param[96];
    json_t *out = json_object();
    if (!out) return nomem(e);
    json_t *calls = json_object_get(msg, "tool_calls");
    if (calls && !json_is_null(calls)) {
        snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
        if (strcmp(role, "assistant")) {
            json_decref(out);
            return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                            "Invalid '%s': only assistant messages have tool calls.", param);
        }
        if (!json_is_array(calls) || json_array_size(calls) == 0 || json_array_size(calls) > API_MAX_TOOLS) {
            json_decref(out);
            return type_error(e, param, "a non-empty array", calls);
        }
        json_t *list = json_array();
        json_object_set_new(out, "tool_calls", list);
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *c = json_array_get(calls, k), *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
            json_t *id = json_is_object(c) ? json_object_get(c, "id") : NULL;
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            json_t *args = json_is_object(fn) ? json_object_get(fn, "arguments") : NULL;
            snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu]", i, k);
            if (!json_is_string(name) || !json_is_string(args) || (id && !json_is_string(id))) {
                json_decref(out);
                return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                                "Invalid '%s': expected {\"id\", \"type\": \"function\", \"function\": {\"name\": "
                                "string, \"arguments\": string}}.", param);
            }
            json_t *parsed = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (!json_is_object(parsed)) {
                json_decref(parsed);
                parsed = json_incref(args);
            }
            json_t *f = json_pack("{s:O,s:o}", "name", name, "arguments", parsed);
            json_t *call = json_pack("{s:s,s:o}", "type", "function", "function", f);
            if (id) json_object_set(call, "id", id);
            json_array_append_new(list, call);
        }
    }
    json_t *tid = json_object_get(msg, "tool_call_id");
    if (!strcmp(role, "tool")) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        if (!json_is_string(tid)) {
            json_decref(out);
            return api_fail(e, 400, "invalid_request_error", "missing_required_parameter", param,
                            "Missing required parameter: '%s'.", param);
        }
        json_object_set(out, "tool_call_id", tid);
        json_t *name = json_object_get(msg, "name");
        if (json_is_string(name)) json_object_set(out, "name", name);
    }
    *extra = NULL;
    if (json_object_size(out)) {
        char *s = json_dumps(out, JSON_COMPACT);
        /* the members without the braces */
        if (s && strlen(s) >= 2) {
            memmove(s, s + 1, strlen(s) - 2);
            s[strlen(s) - 2] = 0;
        }
        *extra = s;
        if (!s) {
            json_decref(out);
            return nomem(e);
        }
    }
    json_decref(out);
    return true;
}

/* response_format (text, json_object, json_schema) and grammar (GBNF). */
static bool parse_format(json_t *root, struct api_request *r, struct api_error *e) {
    json_t *g = field(root, "grammar"), *f = field(root, "response_format");
    if (g) {
        if (!json_is_string(g) || !json_string_length(g)) return type_error(e, "grammar", "a non-empty string", g);
        r->grammar_kind = API_GRAMMAR_GBNF;
        if (!(r->grammar = dup_string(g, NULL))) return nomem(e);
    }
    if (!f) return true;
    json_t *t = json_is_object(f) ? json_object_get(f, "type") : NULL;
    if (!json_is_string(t)) return type_error(e, "response_format.type", "a string", t);
    const char *type = json_string_value(t);
    if (!strcmp(type, "text")) return true;
    if (g)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "grammar",
                        "Give either 'grammar' or a 'response_format' other than text, not both.");
    if (!strcmp(type, "json_object")) {
        r->grammar_kind = API_GRAMMAR_JSON_OBJECT;
        return true;
    }
    if (strcmp(type, "json_schema"))
        return api_fail(e, 400, "invalid_request_error", "invalid_value", "response_format.type",
                        "Invalid 'response_format.type': '%.40s' is not 'text', 'json_object' or 'json_schema'.", type);
    json_t *js = json_object_get(f, "json_schema"), *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
    if (!json_is_object(js)) return type_error(e, "response_format.json_schema", "an object", js);
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return type_error(e, "response_format.json_schema.schema", "an object", schema);
    json_t *strict = json_object_get(js, "strict");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return type_error(e, "response_format.json_schema.strict", "a boolean", strict);
    r->grammar_kind = API_GRAMMAR_JSON_SCHEMA;
    if (!(r->grammar = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY))) return nomem(e);
    return true;
}

/* tools, tool_choice and parallel_tool_calls (chat). */
static bool parse_tools(json_t *root, struct api_request *r, struct api_error *e) {
    r->parallel_tool_calls = true;
    if (get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e) == FIELD_BAD) return false;
    json_t *tools = field(root, "tools");
    if (tools && !json_is_array(tools)) return type_error(e, "tools", "an array", tools);
    size_t n = json_array_size(tools);
    if (n > API_MAX_TOOLS)
        return api_fail(e, 400, "invalid_request_error", "array_above_max_length", "tools",
                        "Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %zu instead.",
                        API_MAX_TOOLS, n);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tools, i), *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
        json_t *type = json_is_object(t) ? json_object_get(t, "type") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        json_t *params = json_is_object(fn) ? json_object_get(fn, "parameters") : NULL;
        char param[64];
        snprintf(param, sizeof param, "tools[%zu]", i);
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") || !json_is_string(name) ||
            !json_string_length(name) || (params && !json_is_object(params)))
            return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                            "Invalid '%s': expected {\"type\": \"function\", \"function\": {\"name\": string, "
                            "\"description\"?: string, \"parameters\"?: object}}.", param);
    }
    json_t *tc = field(root, "tool_choice");
    if (tc && json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "auto")) r->tool_choice = API_TOOLS_AUTO;
        else if (!strcmp(v, "none")) r->tool_choice = API_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = API_TOOLS_REQUIRED;
        else
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "Invalid 'tool_choice': '%.40s' is not 'auto', 'none', 'required' or a function.", v);
    } else if (tc) {
        json_t *fn = json_is_object(tc) ? json_object_get(tc, "function") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name))
            return type_error(e, "tool_choice", "a string or {\"type\": \"function\", \"function\": {\"name\"}}", tc);
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = json_equal(json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"), name);
        if (!found)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "Invalid 'tool_choice': no tool is named '%.60s'.", json_string_value(name));
        r->tool_choice = API_TOOLS_NAMED;
        if (!(r->tool_name = dup_string(name, NULL))) return nomem(e);
    }
    if (n == 0) {
        if (r->tool_choice == API_TOOLS_REQUIRED || r->tool_choice == API_TOOLS_NAMED)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "tool_choice",
                            "Invalid 'tool_choice': it needs 'tools'.");
        return true;
    }
    r->n_tools = (int)n;
    if (!(r->tools_json = json_dumps(tools, JSON_COMPACT))) return nomem(e);
    return true;
}

static bool parse_messages(json_t *root, struct api_request *r, struct api_error *e) {
    json_t *m = field(root, "messages");
    if (!m)
        return api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "messages",
                        "Missing required parameter: 'messages'.");
    if (!json_is_array(m)) return type_error(e, "messages", "an array", m);
    size_t n = json_array_size(m);
    if (n == 0)
        return api_fail(e, 400, "invalid_request_error", "empty_array", "messages",
                        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.");
    if (n > API_MAX_MESSAGES)
        return api_fail(e, 400, "invalid_request_error", "array_above_max_length", "messages",
                        "Invalid 'messages': array too long. Expected an array with maximum length %d, but got an array with length %zu instead.",
                        API_MAX_MESSAGES, n);
    if (!(r->msgs = calloc(n, sizeof *r->msgs)) || !(r->msg_extra = calloc(n, sizeof *r->msg_extra))) return nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return type_error(e, param, "an object", msg);
        json_t *role = json_object_get(msg, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!role || json_is_null(role))
            return api_fail(e, 400, "invalid_request_error", "missing_required_parameter", param,
                            "Missing required parameter: '%s'.", param);
        if (!json_is_string(role)) return type_error(e, param, "a string", role);
        const char *rs = json_string_value(role);
        const char *canon = !strcmp(rs, "system") || !strcmp(rs, "developer") ? "system"
                            : !strcmp(rs, "user")                             ? "user"
                            : !strcmp(rs, "assistant")                        ? "assistant"
                            : !strcmp(rs, "tool")                             ? "tool"
                                                                              : NULL;
        if (!canon)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                            "Invalid value for '%s': supported roles are 'system', 'developer', 'user', 'assistant' and 'tool' ('%.40s' given).",
                            param, rs);
        r->msgs[i].role = canon; /* static */
        r->n_msgs = i + 1;       /* freed from here on, whatever follows */
        if (!parse_tool_members(msg, i, canon, &r->msg_extra[i], e)) return false;
        json_t *content = json_object_get(msg, "content");
        if (r->msg_extra[i] && !strcmp(canon, "assistant") && (!content || json_is_null(content)))
            continue; /* tool calls alone: content NULL */
        if ((!content || json_is_null(content)) && strcmp(canon, "assistant") != 0) {
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return api_fail(e, 400, "invalid_request_error", "missing_required_parameter", param,
                            "Missing required parameter: '%s'.", param);
        }
        char *text = NULL;
        if (!parse_content(content, i, &text, e)) return false;
        r->msgs[i].content = text;
    }
    return true;
}

/* A token-id array: every element an integer in [0, INT32_MAX]. */
static bool parse_ids(json_t *a, const char *param, int32_t **ids, int *n, struct api_error *e) {
    size_t len = json_array_size(a);
    if (len > (size_t)INT32_MAX / 4)
        return api_fail(e, 400, "invalid_request_error", "array_above_max_length", param,
                        "Invalid '%s': too many token ids.", param);
    *ids = malloc((len ? len : 1) * sizeof **ids);
    if (!*ids) return nomem(e);
    for (size_t i = 0; i < len; i++) {
        long long x;
        char p[64];
        snprintf(p, sizeof p, "%s[%zu]", param, i);
        if (int_value(json_array_get(a, i), p, 0, INT32_MAX, &x, e) != FIELD_OK) return false;
        (*ids)[i] = (int32_t)x;
    }
    *n = (int)len;
    return true;
}

static bool parse_prompt(json_t *root, struct api_request *r, struct api_error *e) {
    json_t *p = field(root, "prompt");
    if (!p)
        return api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "prompt",
                        "Missing required parameter: 'prompt'.");
    if (json_is_string(p)) {
        r->prompt = dup_string(p, &r->prompt_len);
        return r->prompt ? true : nomem(e);
    }
    if (!json_is_array(p))
        return type_error(e, "prompt", "a string, an array of strings or an array of token ids", p);
    size_t n = json_array_size(p);
    if (n == 0)
        return api_fail(e, 400, "invalid_request_error", "empty_array", "prompt",
                        "Invalid 'prompt': empty array. Expected a string or a non-empty array.");
    json_t *first = json_array_get(p, 0);
    if (json_is_string(first) || json_is_array(first)) {
        /* a batch: strings, or arrays of token ids */
        if (n > API_MAX_PROMPTS)
            return api_fail(e, 400, "invalid_request_error", "array_above_max_length", "prompt",
                            "Invalid 'prompt': a batch of %zu prompts; at most %d.", n, API_MAX_PROMPTS);
        if (n > 1 && !(r->more = calloc(n - 1, sizeof *r->more))) return nomem(e);
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(p, i);
            char param[32];
            snprintf(param, sizeof param, "prompt[%zu]", i);
            char **text = i ? &r->more[i - 1].prompt : &r->prompt;
            size_t *len = i ? &r->more[i - 1].prompt_len : &r->prompt_len;
            int32_t **ids = i ? &r->more[i - 1].prompt_ids : &r->prompt_ids;
            int *n_ids = i ? &r->more[i - 1].n_prompt_ids : &r->n_prompt_ids;
            if (i) r->n_more = (int)i;
            if (json_is_string(first) != json_is_string(v) || (!json_is_string(v) && !json_is_array(v)))
                return type_error(e, param, json_is_string(first) ? "a string" : "an array of token ids", v);
            if (json_is_string(v)) {
                if (!(*text = dup_string(v, len))) return nomem(e);
            } else if (!parse_ids(v, param, ids, n_ids, e)) {
                return false;
            }
        }
        return true;
    }
    return parse_ids(p, "prompt", &r->prompt_ids, &r->n_prompt_ids, e);
}

static bool parse_stop(json_t *root, struct api_request *r, struct api_error *e) {
    json_t *s = field(root, "stop");
    if (!s) return true;
    size_t n;
    if (json_is_string(s)) n = 1;
    else if (json_is_array(s)) n = json_array_size(s);
    else return type_error(e, "stop", "a string or an array of strings", s);
    if (n > API_MAX_STOP)
        return api_fail(e, 400, "invalid_request_error", "array_above_max_length", "stop",
                        "Invalid 'stop': array too long. Expected an array with maximum length %d, but got an array with length %zu instead.",
                        API_MAX_STOP, n);
    if (n == 0) return true;
    if (!(r->stop = calloc(n, sizeof *r->stop))) return nomem(e);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_string(s) ? s : json_array_get(s, i);
        char param[32];
        snprintf(param, sizeof param, json_is_string(s) ? "stop" : "stop[%zu]", i);
        if (!json_is_string(v)) return type_error(e, param, "a string", v);
        size_t len = json_string_length(v);
        if (len == 0 || len > API_MAX_STOP_LEN)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                            "Invalid '%s': a stop string must be 1 to %d bytes long (got %zu).",
                            param, API_MAX_STOP_LEN, len);
        if (memchr(json_string_value(v), 0, len))
            return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                            "Invalid '%s': NUL in a stop string.", param);
        if (!(r->stop[i] = dup_string(v, NULL))) return nomem(e);
        r->n_stop = (int)i + 1;
    }
    return true;
}

/* Fields that would change the meaning of a request kvik cannot honour:
 * refused rather than silently ignored. */
static bool refuse_unsupported(json_t *root, const struct api_request *r, struct api_error *e) {
    json_t *v;
    if (r->route != API_ROUTE_CHAT && (v = field(root, "tools")) && (!json_is_array(v) || json_array_size(v) > 0))
        return unsupported(e, "tools", "is supported on /v1/chat/completions only");
    if ((v = field(root, "functions")) && (!json_is_array(v) || json_array_size(v) > 0))
        return unsupported(e, "functions", "is not supported by this server");
    if ((v = field(root, "logit_bias")) && (!json_is_object(v) || json_object_size(v) > 0))
        return unsupported(e, "logit_bias", "is not supported by this server");

    if (r->route == API_ROUTE_COMPLETIONS) {
        if ((v = field(root, "suffix")) && (!json_is_string(v) || json_string_length(v) > 0))
            return unsupported(e, "suffix", "is not supported by this server");
        long long best_of;
        int st = get_int(root, "best_of", 1, API_MAX_N, &best_of, e);
        if (st == FIELD_BAD) return false;
        if (st == FIELD_OK && best_of != r->n)
            return unsupported(e, "best_of", "other than n is not supported");
    }
    return true;
}

static bool parse_fields(json_t *root, struct api_request *r, struct api_error *e) {
    bool chat = r->route == API_ROUTE_CHAT;
    if (get_string(root, "model", &r->model, e) == FIELD_BAD) return false;
    if (get_string(root, "user", &r->user, e) == FIELD_BAD) return false;
    if (get_string(root, "cache_salt", &r->cache_salt, e) == FIELD_BAD) return false;
    if (chat ? !parse_messages(root, r, e) : !parse_prompt(root, r, e)) return false;
    if (chat && !parse_tools(root, r, e)) return false;
    if (!parse_format(root, r, e)) return false;

    long long x;
    int st;
    /* max_completion_tokens (chat) wins over the older max_tokens */
    if ((st = get_int(root, "max_tokens", chat ? 1 : 0, 1 << 24, &x, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->max_tokens = (int)x;
    r->score_only = st == FIELD_OK && x == 0;
    if (chat) {
        if ((st = get_int(root, "max_completion_tokens", 1, 1 << 24, &x, e)) == FIELD_BAD) return false;
        if (st == FIELD_OK) r->max_tokens = (int)x;
    }
    r->n = 1;
    if ((st = get_int(root, "n", 1, API_MAX_N, &x, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->n = (int)x;

    if (get_bool(root, "stream", &r->stream, e) == FIELD_BAD) return false;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so)) return type_error(e, "stream_options", "an object", so);
        if (!r->stream)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "stream_options",
                            "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu)) return type_error(e, "stream_options.include_usage", "a boolean", iu);
        r->include_usage = iu && json_is_true(iu);
    }

    /* sampling: OpenAI's defaults, then the fields given */
    r->sp = sampler_params_openai();
    double d;
    if ((st = get_number(root, "temperature", 0, 2, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.temp = (float)d;
    if ((st = get_number(root, "top_p", 0, 1, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) {
        if (d == 0) r->sp.temp = 0; /* nothing but the most likely token: greedy */
        else r->sp.top_p = (float)d;
    }
    if ((st = get_int(root, "top_k", -1, 1 << 30, &x, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.top_k = x < 0 ? 0 : (int32_t)x;
    if ((st = get_number(root, "min_p", 0, 1, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.min_p = (float)d;
    if ((st = get_number(root, "presence_penalty", -2, 2, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.presence_penalty = (float)d;
    if ((st = get_number(root, "frequency_penalty", -2, 2, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.frequency_penalty = (float)d;
    if ((st = get_number(root, "repetition_penalty", 0.01, 10, &d, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.repeat_penalty = (float)d;
    if ((st = get_int(root, "seed", INT64_MIN, INT64_MAX, &x, e)) == FIELD_BAD) return false;
    if (st == FIELD_OK) r->sp.seed = (uint64_t)x;

    /* logprobs: chat has logprobs (bool) + top_logprobs; completions has
     * logprobs (the number of alternatives) */
    if (chat) {
        if (get_bool(root, "logprobs", &r->logprobs, e) == FIELD_BAD) return false;
        if ((st = get_int(root, "top_logprobs", 0, API_MAX_TOP_LOGPROBS, &x, e)) == FIELD_BAD) return false;
        if (st == FIELD_OK) {
            if (!r->logprobs)
                return api_fail(e, 400, "invalid_request_error", "invalid_value", "top_logprobs",
                                "Invalid 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is given.");
            r->top_logprobs = (int)x;
        }
    } else {
        if ((st = get_int(root, "logprobs", 0, API_MAX_TOP_LOGPROBS, &x, e)) == FIELD_BAD) return false;
        if (st == FIELD_OK) r->logprobs = true, r->top_logprobs = (int)x;
        if (get_bool(root, "echo", &r->echo, e) == FIELD_BAD) return false;
        if (r->n_more && r->stream)
            return api_fail(e, 400, "invalid_request_error", "unsupported_value", "stream",
                            "Streaming a batch of %d prompts is not supported; send one prompt per request to stream.",
                            r->n_more + 1);
        if (r->score_only && !r->echo)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", "max_tokens",
                            "Invalid 'max_tokens': 0 is allowed only with 'echo' (the prompt is scored, nothing is generated).");
    }
    if (get_bool(root, "ignore_eos", &r->ignore_eos, e) == FIELD_BAD) return false;
    if (!parse_stop(root, r, e)) return false;
    return refuse_unsupported(root, r, e);
}

bool api_parse_request(enum api_route route, const char *body, size_t len, size_t max_body,
                       struct api_request *r, struct api_error *e) {
    *r = (struct api_request){.route = route};
    json_t *root = load_body(body, len, max_body, e);
    if (!root) return false;
    bool ok = parse_fields(root, r, e);
    json_decref(root);
    if (!ok) {
        api_request_free(r);
        r->route = route;
    }
    return ok;
}

void api_request_free(struct api_request *r) {
    if (!r) return;
    free(r->model);
    for (size_t i = 0; i < r->n_msgs; i++) free((char *)r->msgs[i].content);
    for (size_t i = 0; r->msg_extra && i < r->n_msgs; i++) free(r->msg_extra[i]);
    free(r->msgs);
    free(r->msg_extra);
    free(r->tools_json);
    free(r->tool_name);
    free(r->grammar);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_more; i++) free(r->more[i].prompt), free(r->more[i].prompt_ids);
    free(r->more);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->user);
    free(r->cache_salt);
    *r = (struct api_request){0};
}

/* ---- prompt -> token ids -------------------------------------------------- */

/* Encodes text into p->ids (growing the buffer once if the first guess is
 * short). */
static bool encode(const struct tokenizer *tok, const char *text, size_t len, bool parse_special,
                   struct api_prompt *p, struct api_error *e) {
    int64_t cap = (int64_t)len + 8;
    for (int tries = 0; tries < 2; tries++) {
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) return nomem(e);
        int64_t n = tokenizer_encode(tok, text, len, true, parse_special, ids, cap);
        if (n < 0) {
            free(ids);
            return n == KVIK_ERR_NOMEM ? nomem(e)
                                       : api_fail(e, 400, "invalid_request_error", NULL, NULL,
                                                  "The prompt could not be tokenized.");
        }
        if (n <= cap) {
            if (n > INT32_MAX / 2) {
                free(ids);
                return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", NULL,
                                "The prompt is too long.");
            }
            p->ids = ids;
            p->n = (int)n;
            return true;
        }
        free(ids);
        cap = n;
    }
    return nomem(e);
}

bool api_prepare(const struct api_request *r, const struct tokenizer *tok,
                 const struct chat_format *fmt, int n_ctx, struct api_prompt *out,
                 struct api_error *e) {
    *out = (struct api_prompt){0};
    bool chat = r->route == API_ROUTE_CHAT;
    const char *param = chat ? "messages" : "prompt";
    if (chat) {
        if (!fmt)
            return api_fail(e, 400, "invalid_request_error", "no_chat_template", NULL,
                            "This model has no chat template kvik can render; use /v1/completions.");
        struct kvik_err kerr = {0};
        int32_t *ids = NULL;
        size_t n_ids = 0;
        const char *tools = r->tool_choice == API_TOOLS_NONE ? NULL : r->tools_json;
        kvik_status st = chat_encode_tools(fmt, tok, r->msgs, (const char *const *)r->msg_extra, r->n_msgs, tools,
                                           true, &ids, &n_ids, &kerr);
        if (st == KVIK_ERR_NOMEM) return nomem(e);
        if (st)
            return api_fail(e, 400, "invalid_request_error", "invalid_value", tools ? NULL : "messages",
                            "Invalid '%s': %s.", tools ? "tools" : "messages", kerr.msg);
        if (n_ids > INT32_MAX / 2) {
            free(ids);
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", NULL,
                            "The prompt is too long.");
        }
        out->ids = ids;
        out->n = (int)n_ids;
    } else if (r->prompt) {
        if (!encode(tok, r->prompt, r->prompt_len, false, out, e)) return false;
    } else {
        int32_t nv = tokenizer_n_vocab(tok);
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] >= nv)
                return api_fail(e, 400, "invalid_request_error", "invalid_value", "prompt",
                                "Invalid 'prompt': token id %d is out of range (the vocabulary has %d tokens).",
                                r->prompt_ids[i], nv);
        if (!(out->ids = malloc(((size_t)r->n_prompt_ids + 1) * sizeof *out->ids))) return nomem(e);
        memcpy(out->ids, r->prompt_ids, (size_t)r->n_prompt_ids * sizeof *out->ids);
        out->n = r->n_prompt_ids;
    }
    if (out->n == 0) {
        api_prompt_free(out);
        return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                        "Invalid '%s': the prompt is empty (it encodes to no tokens).", param);
    }
    int64_t want = r->score_only ? 0 : r->max_tokens ? r->max_tokens : 1;
    if ((int64_t)out->n + want > n_ctx) {
        int n = out->n;
        api_prompt_free(out);
        if (r->max_tokens)
            return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                            "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the %s, %d in the completion). Please reduce the length of the %s or completion.",
                            n_ctx, (long long)n + want, n, chat ? "messages" : "prompt",
                            r->max_tokens, param);
        return api_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                        "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens. Please reduce the length of the %s.",
                        n_ctx, param, n, param);
    }
    out->max_tokens = r->score_only ? 0 : r->max_tokens ? r->max_tokens : n_ctx - out->n;
    return true;
}

void api_prompt_free(struct api_prompt *p) {
    if (!p) return;
    free(p->ids);
    *p = (struct api_prompt){0};
}

/* ---- /tokenize and /detokenize -------------------------------------------- */

bool api_parse_tokenize(const char *body, size_t len, size_t max_body, struct api_tokenize *t,
                        struct api_error *e) {
    *t = (struct api_tokenize){.add_special = true, .parse_special = true};
    json_t *root = load_body(body, len, max_body, e);
    if (!root) return false;
    bool ok = false;
    const char *key = field(root, "content") ? "content" : "prompt";
    json_t *v = field(root, key);
    if (!v)
        api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "content",
                 "Missing required parameter: 'content'.");
    else if (!json_is_string(v))
        type_error(e, key, "a string", v);
    else if (!(t->text = dup_string(v, &t->len)))
        nomem(e);
    else if (get_bool(root, "add_special", &t->add_special, e) != FIELD_BAD &&
             get_bool(root, "add_special_tokens", &t->add_special, e) != FIELD_BAD && /* vLLM's name */
             get_bool(root, "parse_special", &t->parse_special, e) != FIELD_BAD)
        ok = true;
    json_decref(root);
    if (!ok) api_tokenize_free(t);
    return ok;
}

void api_tokenize_free(struct api_tokenize *t) {
    if (!t) return;
    free(t->text);
    *t = (struct api_tokenize){0};
}

bool api_parse_detokenize(const char *body, size_t len, size_t max_body,
                          struct api_detokenize *d, struct api_error *e) {
    *d = (struct api_detokenize){0};
    json_t *root = load_body(body, len, max_body, e);
    if (!root) return false;
    bool ok = false;
    json_t *v = field(root, "tokens");
    if (!v)
        api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "tokens",
                 "Missing required parameter: 'tokens'.");
    else if (!json_is_array(v))
        type_error(e, "tokens", "an array of token ids", v);
    else if (json_array_size(v) > API_MAX_DETOKENIZE)
        api_fail(e, 400, "invalid_request_error", "array_above_max_length", "tokens",
                 "Invalid 'tokens': array too long (at most %d ids).", API_MAX_DETOKENIZE);
    else
        ok = parse_ids(v, "tokens", &d->ids, &d->n, e);
    json_decref(root);
    if (!ok) api_detokenize_free(d);
    return ok;
}

void api_detokenize_free(struct api_detokenize *d) {
    if (!d) return;
    free(d->ids);
    *d = (struct api_detokenize){0};
}

/* ---- POST /v1/embeddings ------------------------------------------------- */

/* input[i] (param "input" or "input[i]"): a string, or an array of ids. */
static bool parse_embed_input(json_t *v, const char *param, struct api_embed_request *r, int i,
                              struct api_error *e) {
    if (json_is_string(v)) {
        if (!(r->texts[i] = dup_string(v, &r->lens[i]))) return nomem(e);
        return true;
    }
    if (!json_is_array(v)) return type_error(e, param, "a string or an array of token ids", v);
    if (json_array_size(v) == 0)
        return api_fail(e, 400, "invalid_request_error", "invalid_value", param,
                        "Invalid '%s': an array of token ids must not be empty.", param);
    return parse_ids(v, param, &r->ids[i], &r->n_ids[i], e);
}

bool api_parse_embeddings(const char *body, size_t len, size_t max_body, struct api_embed_request *r,
                          struct api_error *e) {
    *r = (struct api_embed_request){0};
    json_t *root = load_body(body, len, max_body, e);
    if (!root) return false;
    bool ok = false;
    json_t *in = field(root, "input");
    char *fmt = NULL;
    long long dims = 0;
    if (!in) {
        api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "input",
                 "Missing required parameter: 'input'.");
        goto out;
    }
    /* a string, an array of ids, an array of strings, or an array of id arrays */
    bool many = json_is_array(in) && json_array_size(in) > 0 && !json_is_integer(json_array_get(in, 0)) &&
                !json_is_real(json_array_get(in, 0));
    size_t n = many ? json_array_size(in) : 1;
    if (json_is_array(in) && json_array_size(in) == 0) {
        api_fail(e, 400, "invalid_request_error", "invalid_value", "input", "Invalid 'input': it must not be empty.");
        goto out;
    }
    if (n > API_MAX_EMBED_INPUTS) {
        api_fail(e, 400, "invalid_request_error", "array_above_max_length", "input",
                 "Invalid 'input': array too long. Expected an array with maximum length %d, but got an array "
                 "with length %zu instead.", API_MAX_EMBED_INPUTS, n);
        goto out;
    }
    r->n = (int)n;
    r->texts = calloc(n, sizeof *r->texts);
    r->lens = calloc(n, sizeof *r->lens);
    r->ids = calloc(n, sizeof *r->ids);
    r->n_ids = calloc(n, sizeof *r->n_ids);
    if (!r->texts || !r->lens || !r->ids || !r->n_ids) {
        nomem(e);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        char p[32];
        snprintf(p, sizeof p, many ? "input[%zu]" : "input", i);
        if (!parse_embed_input(many ? json_array_get(in, i) : in, p, r, (int)i, e)) goto out;
    }
    if (get_string(root, "encoding_format", &fmt, e) == FIELD_BAD) goto out;
    if (fmt && strcmp(fmt, "float") && strcmp(fmt, "base64")) {
        api_fail(e, 400, "invalid_request_error", "invalid_value", "encoding_format",
                 "Invalid 'encoding_format': expected 'float' or 'base64', but got '%.40s'.", fmt);
        goto out;
    }
    r->base64 = fmt && !strcmp(fmt, "base64");
    if (get_int(root, "dimensions", 1, 1 << 20, &dims, e) == FIELD_BAD) goto out;
    r->dimensions = (int)dims;
    ok = true;
out:
    free(fmt);
    json_decref(root);
    if (!ok) api_embed_request_free(r);
    return ok;
}

void api_embed_request_free(struct api_embed_request *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        if (r->texts) free(r->texts[i]);
        if (r->ids) free(r->ids[i]);
    }
    free(r->texts);
    free(r->lens);
    free(r->ids);
    free(r->n_ids);
    *r = (struct api_embed_request){0};
}

bool api_parse_rerank(const char *body, size_t len, struct api_rerank_request *r, struct api_error *e) {
    *r = (struct api_rerank_request){0};
    json_t *root = load_body(body, len, len + 1, e);
    if (!root) return false;
    bool ok = false;
    long long top_n = 0;
    json_t *docs = field(root, "documents");
    const char *docs_name = "documents";
    if (!docs) docs = field(root, "texts"), docs_name = "texts";
    if (get_string(root, "query", &r->query, e) == FIELD_BAD) goto out;
    if (!r->query || !r->query[0]) {
        api_fail(e, 400, "invalid_request_error", "missing_required_parameter", "query",
                 "Missing required parameter: 'query' (a non-empty string).");
        goto out;
    }
    r->query_len = strlen(r->query);
    if (!json_is_array(docs) || json_array_size(docs) == 0 || json_array_size(docs) > API_MAX_RERANK_DOCS) {
        api_fail(e, 400, "invalid_request_error", "invalid_value", "documents",
                 "Invalid 'documents': an array of 1 to %d strings or {\"text\": string} objects.",
                 API_MAX_RERANK_DOCS);
        goto out;
    }
    r->n = (int)json_array_size(docs);
    r->docs = calloc((size_t)r->n, sizeof *r->docs);
    r->lens = calloc((size_t)r->n, sizeof *r->lens);
    if (!r->docs || !r->lens) {
        nomem(e);
        goto out;
    }
    for (int i = 0; i < r->n; i++) {
        json_t *d = json_array_get(docs, (size_t)i);
        if (json_is_object(d)) d = json_object_get(d, "text");
        if (!json_is_string(d)) {
            api_fail(e, 400, "invalid_request_error", "invalid_value", docs_name,
                     "Invalid '%s[%d]': a string or an object with a 'text' string.", docs_name, i);
            goto out;
        }
        r->lens[i] = json_string_length(d);
        if (!(r->docs[i] = malloc(r->lens[i] + 1))) {
            nomem(e);
            goto out;
        }
        memcpy(r->docs[i], json_string_value(d), r->lens[i] + 1);
    }
    if (get_int(root, "top_n", 1, r->n, &top_n, e) == FIELD_BAD) goto out;
    r->top_n = top_n ? (int)top_n : r->n;
    if (get_bool(root, "return_documents", &r->return_documents, e) == FIELD_BAD) goto out;
    ok = true;
out:
    json_decref(root);
    if (!ok) api_rerank_request_free(r);
    return ok;
}

void api_rerank_request_free(struct api_rerank_request *r) {
    if (!r) return;
    for (int i = 0; r->docs && i < r->n; i++) free(r->docs[i]);
    free(r->docs);
    free(r->lens);
    free(r->query);
    *r = (struct api_rerank_request){0};
}
