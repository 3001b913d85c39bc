/*
 * stores.c — the Files and Vector Stores routes of stores.h: the path cut
 * into its parts, each body read with jansson into kb.h's structs (every
 * field checked, unknown ones ignored as OpenAI does), the knowledge base
 * called, and its objects written back in OpenAI's shapes.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/multipart.h"
#include "server/request.h"
#include "server/stores.h"

enum {
    MAX_SEGMENTS = 6,
    MAX_BATCH = 2000,        /* files in one batch, as OpenAI allows */
    MAX_TEXTS = 2000,        /* texts in one /texts call */
    MAX_FILTER_NODES = 64,
    MAX_FILTER_DEPTH = 8,
    MAX_SET = 256,           /* values of one in/nin */
    MAX_QUERIES = 8,
    MAX_RESULTS = 50,
};

struct batch {
    char id[KB_ID];
    char store_id[KB_ID];
    struct kb_tenant tenant;
    int64_t created_at;
    int n;                    /* files */
    char (*files)[KB_ID];     /* [n] */
    int completed, failed;
};

struct stores {
    struct kb *kb;
    size_t max_file;
    pthread_mutex_t mu;       /* batches */
    struct batch *batches;
    int n_batches, cap_batches;
};

/* ---- replies ----------------------------------------------------------------- */

static void reply_json(struct stores_reply *out, int status, json_t *root) {
    out->status = root ? status : 500;
    out->ctype = "application/json";
    out->body = root ? json_dumps(root, JSON_COMPACT) : NULL;
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(root);
}

static void reply_error(struct stores_reply *out, const struct api_error *e) {
    out->status = e->status;
    out->ctype = "application/json";
    out->body = api_error_json(e);
    out->len = out->body ? strlen(out->body) : 0;
}

/* An error of the knowledge base as OpenAI's status and object. */
static void reply_kb(struct stores_reply *out, kvik_status s, const struct kvik_err *err, const char *param) {
    struct api_error e;
    switch (s) {
    case KVIK_ERR_NOT_FOUND: api_fail(&e, 404, "invalid_request_error", "not_found", param, "%s", err->msg); break;
    case KVIK_ERR_INVALID_ARG:
    case KVIK_ERR_UNSUPPORTED:
        api_fail(&e, 400, "invalid_request_error", "invalid_value", param, "%s", err->msg);
        break;
    case KVIK_ERR_BUSY: api_fail(&e, 503, "server_error", NULL, NULL, "%s", err->msg); break;
    default: api_fail(&e, 500, "server_error", NULL, NULL, "%s", err->msg[0] ? err->msg : "internal error"); break;
    }
    reply_error(out, &e);
}

static void reply_bad(struct stores_reply *out, const char *param, const char *fmt, const char *what) {
    struct api_error e;
    api_fail(&e, 400, "invalid_request_error", "invalid_value", param, fmt, what);
    reply_error(out, &e);
}

/* ---- reading bodies ----------------------------------------------------------- */

static json_t *parse_body(const struct stores_request *r, struct stores_reply *out) {
    json_error_t je;
    json_t *root = r->len ? json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &je) : json_object();
    if (!root) {
        struct api_error e;
        api_fail(&e, 400, "invalid_request_error", "invalid_json", NULL, "The body is not valid JSON: %s (line %d).",
                 je.text, je.line);
        reply_error(out, &e);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        reply_bad(out, NULL, "%s", "The body must be a JSON object.");
        return NULL;
    }
    return root;
}

/* field of obj as a string (NULL when absent or null); bad types fail. */
static bool get_string(json_t *obj, const char *field, const char **out, struct stores_reply *reply) {
    json_t *v = json_object_get(obj, field);
    *out = NULL;
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v)) {
        reply_bad(reply, field, "'%s' must be a string.", field);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* An attributes (or metadata: strings only) object into out. */
static bool get_attrs(json_t *obj, const char *field, bool metadata, struct kb_attrs *out, bool *given,
                      struct stores_reply *reply) {
    *out = (struct kb_attrs){0};
    json_t *v = json_object_get(obj, field);
    if (given) *given = v && !json_is_null(v);
    if (!v || json_is_null(v)) return true;
    if (!json_is_object(v) || json_object_size(v) > KB_MAX_ATTRS) {
        reply_bad(reply, field, "'%s' must be an object of at most 16 pairs.", field);
        return false;
    }
    struct vec_attr a[KB_MAX_ATTRS];
    int n = 0;
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        a[n] = (struct vec_attr){.key = key};
        if (json_is_string(x)) {
            a[n].v = (struct vec_value){.type = VEC_STR, .str = json_string_value(x), .len = json_string_length(x)};
        } else if (!metadata && json_is_number(x)) {
            a[n].v = (struct vec_value){.type = VEC_NUM, .num = json_number_value(x)};
        } else if (!metadata && json_is_boolean(x)) {
            a[n].v = (struct vec_value){.type = VEC_BOOL, .b = json_is_true(x)};
        } else {
            reply_bad(reply, field,
                      metadata ? "'%s' values must be strings." : "'%s' values must be strings, numbers or booleans.",
                      field);
            return false;
        }
        n++;
    }
    if (!kb_attrs_copy(out, a, n)) {
        struct api_error e;
        api_fail(&e, 500, "server_error", NULL, NULL, "The server ran out of memory.");
        reply_error(reply, &e);
        return false;
    }
    struct kvik_err err = {0};
    kvik_status s = kb_attrs_check(out, metadata, &err);
    if (s) {
        kb_attrs_free(out);
        reply_kb(reply, s, &err, field);
        return false;
    }
    return true;
}

/* chunking_strategy: absent, {"type":"auto"} or {"type":"static","static":
 * {"max_chunk_size_tokens","chunk_overlap_tokens"}}. */
static bool get_chunking(json_t *obj, struct kb_chunking *c, struct stores_reply *reply) {
    *c = (struct kb_chunking){800, 400};
    json_t *v = json_object_get(obj, "chunking_strategy");
    if (!v || json_is_null(v)) return true;
    const char *type = json_string_value(json_object_get(v, "type"));
    if (!json_is_object(v) || !type) {
        reply_bad(reply, "chunking_strategy", "%s", "'chunking_strategy' must be an object with a 'type'.");
        return false;
    }
    if (!strcmp(type, "auto")) return true;
    json_t *st = json_object_get(v, "static");
    json_t *mx = json_object_get(st, "max_chunk_size_tokens"), *ov = json_object_get(st, "chunk_overlap_tokens");
    if (strcmp(type, "static") || !json_is_object(st) || !json_is_integer(mx) || !json_is_integer(ov)) {
        reply_bad(reply, "chunking_strategy", "%s",
                  "'chunking_strategy' must be {\"type\":\"auto\"} or {\"type\":\"static\",\"static\":"
                  "{\"max_chunk_size_tokens\":N,\"chunk_overlap_tokens\":M}}.");
        return false;
    }
    json_int_t m = json_integer_value(mx), o = json_integer_value(ov);
    if (m < 100 || m > 4096 || o < 0 || o > m / 2) {
        reply_bad(reply, "chunking_strategy", "%s",
                  "max_chunk_size_tokens must be 100 to 4096, and chunk_overlap_tokens 0 to half of it.");
        return false;
    }
    *c = (struct kb_chunking){(int)m, (int)o};
    return true;
}

/* expires_after: absent (-1, or 0 with clear), null (0), or {"anchor":
 * "last_active_at","days":1..365}. */
static bool get_expiry(json_t *obj, int *days, struct stores_reply *reply) {
    json_t *v = json_object_get(obj, "expires_after");
    if (!v) return true;
    if (json_is_null(v)) {
        *days = 0;
        return true;
    }
    const char *anchor = json_string_value(json_object_get(v, "anchor"));
    json_t *d = json_object_get(v, "days");
    if (!json_is_object(v) || !anchor || strcmp(anchor, "last_active_at") || !json_is_integer(d) ||
        json_integer_value(d) < 1 || json_integer_value(d) > 365) {
        reply_bad(reply, "expires_after", "%s",
                  "'expires_after' must be {\"anchor\":\"last_active_at\",\"days\":N} with N from 1 to 365.");
        return false;
    }
    *days = (int)json_integer_value(d);
    return true;
}

/* ---- filters ---------------------------------------------------------------------- */

struct filter_pool {
    struct vec_filter node[MAX_FILTER_NODES];
    int n;
    struct vec_value set[MAX_FILTER_NODES][MAX_SET];
};

static bool value_of(json_t *x, struct vec_value *v) {
    if (json_is_string(x)) *v = (struct vec_value){.type = VEC_STR, .str = json_string_value(x), .len = json_string_length(x)};
    else if (json_is_number(x)) *v = (struct vec_value){.type = VEC_NUM, .num = json_number_value(x)};
    else if (json_is_boolean(x)) *v = (struct vec_value){.type = VEC_BOOL, .b = json_is_true(x)};
    else return false;
    return true;
}

/* One filter object into pool (its strings point into the JSON, which
 * must outlive the filter); NULL with *why set. */
static struct vec_filter *read_filter(json_t *f, struct filter_pool *pool, int depth, const char **why) {
    static const char *const ops[] = {"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "and", "or"};
    const char *type = json_string_value(json_object_get(f, "type"));
    if (!json_is_object(f) || !type) {
        *why = "a filter must be an object with a 'type'";
        return NULL;
    }
    if (depth > MAX_FILTER_DEPTH || pool->n == MAX_FILTER_NODES) {
        *why = "the filter is nested too deep or has too many parts (64 at most)";
        return NULL;
    }
    int op = -1;
    for (int i = 0; i < 10; i++)
        if (!strcmp(type, ops[i])) op = i;
    if (op < 0) {
        *why = "a filter's type must be eq, ne, gt, gte, lt, lte, in, nin, and or or";
        return NULL;
    }
    int idx = pool->n++;
    struct vec_filter *node = &pool->node[idx];
    *node = (struct vec_filter){.op = op};
    if (op == VEC_AND || op == VEC_OR) {
        json_t *subs = json_object_get(f, "filters");
        if (!json_is_array(subs)) {
            *why = "an 'and' or 'or' filter needs a 'filters' array";
            return NULL;
        }
        /* the children must sit next to each other: read them into a local
         * list first, then copy them to consecutive slots */
        size_t k = json_array_size(subs);
        if (k > MAX_FILTER_NODES) {
            *why = "the filter has too many parts (64 at most)";
            return NULL;
        }
        struct vec_filter tmp[MAX_FILTER_NODES];
        for (size_t i = 0; i < k; i++) {
            struct vec_filter *c = read_filter(json_array_get(subs, i), pool, depth + 1, why);
            if (!c) return NULL;
            tmp[i] = *c;
        }
        if (pool->n + (int)k > MAX_FILTER_NODES) {
            *why = "the filter has too many parts (64 at most)";
            return NULL;
        }
        memcpy(&pool->node[pool->n], tmp, k * sizeof *tmp);
        node->sub = &pool->node[pool->n];
        node->n_sub = (int)k;
        pool->n += (int)k;
        return node;
    }
    const char *key = json_string_value(json_object_get(f, "key"));
    json_t *val = json_object_get(f, "value");
    if (!key || !val) {
        *why = "a comparison filter needs a 'key' and a 'value'";
        return NULL;
    }
    node->key = key;
    if (op == VEC_IN || op == VEC_NIN) {
        if (!json_is_array(val) || json_array_size(val) > MAX_SET) {
            *why = "an 'in' or 'nin' filter's value must be an array of at most 256 strings or numbers";
            return NULL;
        }
        node->set = pool->set[idx];
        node->n_set = (int)json_array_size(val);
        for (int i = 0; i < node->n_set; i++)
            if (!value_of(json_array_get(val, (size_t)i), &pool->set[idx][i])) {
                *why = "an 'in' or 'nin' filter's values must be strings or numbers";
                return NULL;
            }
        return node;
    }
    if (!value_of(val, &node->v)) {
        *why = "a comparison filter's value must be a string, a number or a boolean";
        return NULL;
    }
    return node;
}

/* ---- writing objects -------------------------------------------------------------- */

static json_t *attrs_json(const struct kb_attrs *a) {
    json_t *o = json_object();
    for (int i = 0; o && i < a->n; i++) {
        const struct vec_attr *x = &a->a[i];
        json_t *v = x->v.type == VEC_STR   ? json_stringn(x->v.str, x->v.len)
                  : x->v.type == VEC_NUM   ? json_real(x->v.num)
                                           : json_boolean(x->v.b);
        if (x->v.type == VEC_NUM && x->v.num == floor(x->v.num) && fabs(x->v.num) < 9e15) {
            json_decref(v);
            v = json_integer((json_int_t)x->v.num);
        }
        json_object_set_new(o, x->key, v);
    }
    return o;
}

static json_t *file_json(const struct kb_file *f) {
    return json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:n, s:n}", "id", f->id, "object", "file", "bytes",
                     (json_int_t)f->bytes, "created_at", (json_int_t)f->created_at, "filename", f->filename,
                     "purpose", f->purpose, "status", "processed", "expires_at", "status_details");
}

static json_t *counts_json(int64_t completed, int64_t failed) {
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "in_progress", (json_int_t)0, "completed", (json_int_t)completed,
                     "failed", (json_int_t)failed, "cancelled", (json_int_t)0, "total",
                     (json_int_t)(completed + failed));
}

static json_t *store_json(const struct kb_store *s) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:I, s:o, s:s, s:I, s:o}", "id", s->id, "object", "vector_store",
                          "created_at", (json_int_t)s->created_at, "name", s->name, "usage_bytes",
                          (json_int_t)s->usage_bytes, "file_counts", counts_json(s->n_completed, s->n_failed),
                          "status", s->status == KB_STORE_EXPIRED ? "expired" : "completed", "last_active_at",
                          (json_int_t)s->last_active_at, "metadata", attrs_json(&s->metadata));
    if (!o) return NULL;
    if (s->expires_days > 0) {
        json_object_set_new(o, "expires_after",
                            json_pack("{s:s, s:i}", "anchor", "last_active_at", "days", s->expires_days));
        json_object_set_new(o, "expires_at", json_integer(s->last_active_at + (json_int_t)s->expires_days * 86400));
    } else {
        json_object_set_new(o, "expires_after", json_null());
        json_object_set_new(o, "expires_at", json_null());
    }
    return o;
}

static json_t *chunking_json(const struct kb_chunking *c) {
    return json_pack("{s:s, s:{s:i, s:i}}", "type", "static", "static", "max_chunk_size_tokens", c->max_tokens,
                     "chunk_overlap_tokens", c->overlap);
}

static json_t *sfile_json(const struct kb_sfile *f) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:o, s:o}", "id", f->file_id, "object",
                          "vector_store.file", "usage_bytes", (json_int_t)f->usage_bytes, "created_at",
                          (json_int_t)f->created_at, "vector_store_id", f->store_id, "status",
                          f->status == KB_SFILE_COMPLETED ? "completed" : "failed", "attributes",
                          attrs_json(&f->attrs), "chunking_strategy", chunking_json(&f->chunking));
    if (!o) return NULL;
    json_object_set_new(o, "last_error",
                        f->status == KB_SFILE_FAILED
                            ? json_pack("{s:s, s:s}", "code", f->error_code, "message", f->error)
                            : json_null());
    return o;
}

static json_t *deleted_json(const char *id, const char *object) {
    return json_pack("{s:s, s:s, s:b}", "id", id, "object", object, "deleted", 1);
}

/* ---- lists ------------------------------------------------------------------------------ */

struct page {
    int limit;
    bool asc;
    const char *after, *before;
};

static bool get_page(const struct stores_request *r, int default_limit, struct page *p, struct stores_reply *out) {
    *p = (struct page){.limit = default_limit};
    const char *v = r->arg ? r->arg(r->arg_ctx, "limit") : NULL;
    if (v) {
        char *end;
        errno = 0;
        long l = strtol(v, &end, 10);
        if (errno || *end || l < 1 || l > (default_limit > 100 ? default_limit : 100)) {
            reply_bad(out, "limit", "%s", "'limit' must be an integer from 1 to 100.");
            return false;
        }
        p->limit = (int)l;
    }
    v = r->arg ? r->arg(r->arg_ctx, "order") : NULL;
    if (v && strcmp(v, "asc") && strcmp(v, "desc")) {
        reply_bad(out, "order", "%s", "'order' must be 'asc' or 'desc'.");
        return false;
    }
    p->asc = v && !strcmp(v, "asc");
    p->after = r->arg ? r->arg(r->arg_ctx, "after") : NULL;
    p->before = r->arg ? r->arg(r->arg_ctx, "before") : NULL;
    return true;
}

/* A cursor page of items[0..n) (oldest first; id_of gives each one's id,
 * to_json its object) as OpenAI's list object. */
static json_t *page_json(const struct page *p, const void *items, size_t size, int64_t n,
                         const char *(*id_of)(const void *), json_t *(*to_json)(const void *)) {
    int64_t from = 0, to = n; /* in the requested order */
    const char *base = items;
#define AT(i) (base + (size_t)(p->asc ? (i) : n - 1 - (i)) * size)
    for (int64_t i = 0; p->after && i < n; i++)
        if (!strcmp(id_of(AT(i)), p->after)) from = i + 1;
    for (int64_t i = 0; p->before && i < n; i++)
        if (!strcmp(id_of(AT(i)), p->before)) to = i;
    json_t *data = json_array();
    int64_t i = from;
    for (; data && i < to && i - from < p->limit; i++) json_array_append_new(data, to_json(AT(i)));
    bool more = i < to;
    size_t k = data ? json_array_size(data) : 0;
    json_t *o = json_pack("{s:s, s:o, s:b}", "object", "list", "data", data, "has_more", more);
    if (o) {
        json_t *first = k ? json_object_get(json_array_get(data, 0), "id") : NULL;
        json_t *last = k ? json_object_get(json_array_get(data, k - 1), "id") : NULL;
        json_object_set(o, "first_id", first ? first : json_null());
        json_object_set(o, "last_id", last ? last : json_null());
    }
#undef AT
    return o;
}

static const char *file_id_of(const void *x) { return ((const struct kb_file *)x)->id; }
static json_t *file_to_json(const void *x) { return file_json(x); }
static const char *store_id_of(const void *x) { return ((const struct kb_store *)x)->id; }
static json_t *store_to_json(const void *x) { return store_json(x); }
static const char *sfile_id_of(const void *x) { return ((const struct kb_sfile *)x)->file_id; }
static json_t *sfile_to_json(const void *x) { return sfile_json(x); }

/* ---- files ------------------------------------------------------------------------------ */

static void files_upload(struct stores *s, const struct stores_request *r, struct stores_reply *out) {
    struct mp_part parts[8];
    const char *why = "";
    int n = multipart_parse(r->content_type, r->body, r->len, parts, 8, &why);
    if (n < 0) {
        reply_bad(out, NULL, "The upload must be multipart/form-data with 'file' and 'purpose': %s.", why);
        return;
    }
    const struct mp_part *file = NULL, *purpose = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(parts[i].name, "file")) file = &parts[i];
        else if (!strcmp(parts[i].name, "purpose")) purpose = &parts[i];
    }
    if (!file || !purpose) {
        reply_bad(out, file ? "purpose" : "file", "The upload lacks its '%s' part.", file ? "purpose" : "file");
        return;
    }
    char pur[32];
    if (purpose->len == 0 || purpose->len >= sizeof pur || memchr(purpose->data, 0, purpose->len)) {
        reply_bad(out, "purpose", "%s", "'purpose' must be 1 to 31 bytes, such as 'assistants'.");
        return;
    }
    memcpy(pur, purpose->data, purpose->len);
    pur[purpose->len] = 0;
    if (file->len > s->max_file) {
        struct api_error e;
        api_fail(&e, 413, "invalid_request_error", "file_too_large", "file",
                 "The file is %zu bytes; the limit is %zu bytes (--max-file-size).", file->len, s->max_file);
        reply_error(out, &e);
        return;
    }
    struct kb_file f;
    struct kvik_err err = {0};
    kvik_status st = kb_file_add(s->kb, &r->tenant, file->has_filename && file->filename[0] ? file->filename : "upload",
                                 pur, file->data, file->len, &f, &err);
    if (st) return reply_kb(out, st, &err, NULL);
    reply_json(out, 200, file_json(&f));
}

static void files_route(struct stores *s, const struct stores_request *r, char seg[][KB_ID * 2], int nseg,
                        struct stores_reply *out) {
    struct kvik_err err = {0};
    bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST"), del = !strcmp(r->method, "DELETE");
    if (nseg == 1 && post) return files_upload(s, r, out);
    if (nseg == 1 && get) {
        struct page p;
        if (!get_page(r, 10000, &p, out)) return;
        struct kb_file *fl;
        const char *purpose = r->arg ? r->arg(r->arg_ctx, "purpose") : NULL;
        int64_t n = kb_file_list(s->kb, &r->tenant, purpose, &fl, &err);
        if (n < 0) return reply_kb(out, (kvik_status)n, &err, NULL);
        reply_json(out, 200, page_json(&p, fl, sizeof *fl, n, file_id_of, file_to_json));
        free(fl);
        return;
    }
    if (nseg == 2 && (get || del)) {
        kvik_status st;
        if (get) {
            struct kb_file f;
            if ((st = kb_file_get(s->kb, &r->tenant, seg[1], &f, &err))) return reply_kb(out, st, &err, NULL);
            return reply_json(out, 200, file_json(&f));
        }
        if ((st = kb_file_delete(s->kb, &r->tenant, seg[1], &err))) return reply_kb(out, st, &err, NULL);
        return reply_json(out, 200, deleted_json(seg[1], "file"));
    }
    if (nseg == 3 && get && !strcmp(seg[2], "content")) {
        char *data;
        size_t len;
        kvik_status st = kb_file_content(s->kb, &r->tenant, seg[1], &data, &len, &err);
        if (st) return reply_kb(out, st, &err, NULL);
        *out = (struct stores_reply){.status = 200, .body = data, .len = len, .ctype = "application/octet-stream"};
        return;
    }
    struct api_error e;
    api_fail(&e, 404, "invalid_request_error", "unknown_url", NULL, "Unknown request URL: %.16s %.200s.", r->method,
             r->path);
    reply_error(out, &e);
}

/* ---- vector stores ------------------------------------------------------------------------ */

/* Adds each of ids[0..n) to the store; its reply only on a failure other
 * than a file that is not text (those are recorded as failed files). */
static bool add_files(struct stores *s, const struct stores_request *r, const char *store, json_t *files,
                      bool objects, const struct kb_attrs *attrs, const struct kb_chunking *c, int *completed,
                      int *failed, char (*ids)[KB_ID], struct stores_reply *out) {
    size_t n = json_array_size(files);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(files, i);
        struct kb_attrs own = {0};
        struct kb_chunking oc = *c;
        const char *fid = objects ? json_string_value(json_object_get(x, "file_id")) : json_string_value(x);
        if (!fid) {
            reply_bad(out, objects ? "files" : "file_ids", "%s",
                      objects ? "Each of 'files' needs a 'file_id' string." : "'file_ids' must hold strings.");
            return false;
        }
        if (objects && (!get_attrs(x, "attributes", false, &own, NULL, out) || !get_chunking(x, &oc, out))) {
            kb_attrs_free(&own);
            return false;
        }
        struct kb_sfile sf;
        struct kvik_err err = {0};
        kvik_status st =
            kb_store_add_file(s->kb, &r->tenant, store, fid, objects ? &own : attrs, objects ? &oc : c, &sf, &err);
        kb_attrs_free(&own);
        if (st) {
            reply_kb(out, st, &err, objects ? "files" : "file_ids");
            return false;
        }
        if (ids) snprintf(ids[i], KB_ID, "%s", fid);
        if (sf.status == KB_SFILE_COMPLETED) ++*completed;
        else ++*failed;
        kb_sfile_free(&sf);
    }
    return true;
}

static void store_create(struct stores *s, const struct stores_request *r, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    const char *name;
    struct kb_attrs md = {0};
    struct kb_chunking c;
    int days = 0;
    json_t *fids = json_object_get(b, "file_ids");
    if (!get_string(b, "name", &name, out) || !get_attrs(b, "metadata", true, &md, NULL, out) ||
        !get_chunking(b, &c, out) || !get_expiry(b, &days, out))
        goto done;
    if (fids && !json_is_null(fids) && (!json_is_array(fids) || json_array_size(fids) > 500)) {
        reply_bad(out, "file_ids", "%s", "'file_ids' must be an array of at most 500 ids.");
        goto done;
    }
    struct kb_store st;
    struct kvik_err err = {0};
    kvik_status k = kb_store_create(s->kb, &r->tenant, name, &md, days, &st, &err);
    if (k) {
        reply_kb(out, k, &err, NULL);
        goto done;
    }
    int ok_n = 0, bad_n = 0;
    if (json_is_array(fids) && !add_files(s, r, st.id, fids, false, NULL, &c, &ok_n, &bad_n, NULL, out)) {
        kb_store_delete(s->kb, &r->tenant, st.id, &err); /* all or nothing */
        kb_store_free(&st);
        goto done;
    }
    kb_store_free(&st);
    if ((k = kb_store_get(s->kb, &r->tenant, st.id, &st, &err))) {
        reply_kb(out, k, &err, NULL);
        goto done;
    }
    reply_json(out, 200, store_json(&st));
    kb_store_free(&st);
done:
    kb_attrs_free(&md);
    json_decref(b);
}

static void store_update(struct stores *s, const struct stores_request *r, const char *id, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    const char *name;
    struct kb_attrs md = {0};
    bool md_given = false;
    int days = -1;
    if (get_string(b, "name", &name, out) && get_attrs(b, "metadata", true, &md, &md_given, out) &&
        get_expiry(b, &days, out)) {
        struct kb_store st;
        struct kvik_err err = {0};
        kvik_status k = kb_store_update(s->kb, &r->tenant, id, name, md_given ? &md : NULL, days, &st, &err);
        if (k) reply_kb(out, k, &err, NULL);
        else {
            reply_json(out, 200, store_json(&st));
            kb_store_free(&st);
        }
    }
    kb_attrs_free(&md);
    json_decref(b);
}

static void sfile_add(struct stores *s, const struct stores_request *r, const char *store, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    const char *fid;
    struct kb_attrs a = {0};
    struct kb_chunking c;
    if (get_string(b, "file_id", &fid, out) && get_attrs(b, "attributes", false, &a, NULL, out) &&
        get_chunking(b, &c, out)) {
        if (!fid) {
            reply_bad(out, "file_id", "%s", "'file_id' is required.");
        } else {
            struct kb_sfile sf;
            struct kvik_err err = {0};
            kvik_status k = kb_store_add_file(s->kb, &r->tenant, store, fid, &a, &c, &sf, &err);
            if (k) reply_kb(out, k, &err, "file_id");
            else {
                reply_json(out, 200, sfile_json(&sf));
                kb_sfile_free(&sf);
            }
        }
    }
    kb_attrs_free(&a);
    json_decref(b);
}

/* POST /v1/vector_stores/{vs}/texts: each text becomes a file of purpose
 * "assistants" (its name given, or "text-N.txt") added to the store. */
static void texts_add(struct stores *s, const struct stores_request *r, const char *store, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    json_t *texts = json_object_get(b, "texts");
    struct kb_chunking c;
    struct kb_attrs common = {0};
    if (!json_is_array(texts) || json_array_size(texts) == 0 || json_array_size(texts) > MAX_TEXTS) {
        reply_bad(out, "texts", "%s", "'texts' must be an array of 1 to 2000 strings or {text, attributes, filename}.");
        goto done;
    }
    if (!get_chunking(b, &c, out) || !get_attrs(b, "attributes", false, &common, NULL, out)) goto done;
    struct kb_store probe;
    struct kvik_err err = {0};
    kvik_status k = kb_store_get(s->kb, &r->tenant, store, &probe, &err);
    if (k) {
        reply_kb(out, k, &err, NULL);
        goto done;
    }
    kb_store_free(&probe);
    json_t *data = json_array();
    size_t n = json_array_size(texts);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(texts, i);
        json_t *t = json_is_string(x) ? x : json_object_get(x, "text");
        const char *fname = json_string_value(json_object_get(x, "filename"));
        struct kb_attrs own = {0};
        bool own_given = false;
        if (!json_is_string(t)) {
            reply_bad(out, "texts", "%s", "Each of 'texts' must be a string or an object with a 'text' string.");
            json_decref(data);
            goto done;
        }
        if (json_is_object(x) && !get_attrs(x, "attributes", false, &own, &own_given, out)) {
            json_decref(data);
            goto done;
        }
        char name[64];
        snprintf(name, sizeof name, "text-%zu.txt", i);
        struct kb_file f;
        k = kb_file_add(s->kb, &r->tenant, fname ? fname : name, "assistants", json_string_value(t),
                        json_string_length(t), &f, &err);
        struct kb_sfile sf;
        if (!k) k = kb_store_add_file(s->kb, &r->tenant, store, f.id, own_given ? &own : &common, &c, &sf, &err);
        kb_attrs_free(&own);
        if (k) {
            reply_kb(out, k, &err, "texts");
            json_decref(data);
            goto done;
        }
        json_array_append_new(data, sfile_json(&sf));
        kb_sfile_free(&sf);
    }
    reply_json(out, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
done:
    kb_attrs_free(&common);
    json_decref(b);
}

/* ---- batches ------------------------------------------------------------------------------- */

static json_t *batch_json(const struct batch *b) {
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o}", "id", b->id, "object", "vector_store.files_batch",
                     "created_at", (json_int_t)b->created_at, "vector_store_id", b->store_id, "status", "completed",
                     "file_counts", counts_json(b->completed, b->failed));
}

static struct batch *batch_find(struct stores *s, const struct kb_tenant *t, const char *store, const char *id) {
    for (int i = 0; i < s->n_batches; i++) {
        struct batch *b = &s->batches[i];
        if (!strcmp(b->id, id) && !strcmp(b->store_id, store) && !memcmp(b->tenant.h, t->h, sizeof t->h)) return b;
    }
    return NULL;
}

static void batch_create(struct stores *s, const struct stores_request *r, const char *store, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    json_t *fids = json_object_get(b, "file_ids"), *files = json_object_get(b, "files");
    bool objects = files && !json_is_null(files);
    json_t *list = objects ? files : fids;
    struct kb_attrs a = {0};
    struct kb_chunking c;
    struct batch bt = {.created_at = (int64_t)time(NULL), .tenant = r->tenant};
    if ((fids && !json_is_null(fids) && objects) || !json_is_array(list) || json_array_size(list) == 0 ||
        json_array_size(list) > MAX_BATCH) {
        reply_bad(out, "file_ids", "%s", "Give 'file_ids' or 'files' (not both): an array of 1 to 2000.");
        goto done;
    }
    if (!get_attrs(b, "attributes", false, &a, NULL, out) || !get_chunking(b, &c, out)) goto done;
    bt.n = (int)json_array_size(list);
    if (!(bt.files = calloc((size_t)bt.n, sizeof *bt.files))) {
        reply_bad(out, NULL, "%s", "The server ran out of memory.");
        out->status = 500;
        goto done;
    }
    if (!add_files(s, r, store, list, objects, &a, &c, &bt.completed, &bt.failed, bt.files, out)) goto done;
    snprintf(bt.store_id, sizeof bt.store_id, "%s", store);
    unsigned long long x = (unsigned long long)clock_ns() ^ (unsigned long long)(uintptr_t)&bt;
    snprintf(bt.id, sizeof bt.id, "vsfb_%016llx%08x", x, (unsigned)rand());
    pthread_mutex_lock(&s->mu);
    if (s->n_batches == s->cap_batches) {
        int cap = s->cap_batches ? 2 * s->cap_batches : 16;
        struct batch *nb = realloc(s->batches, (size_t)cap * sizeof *nb);
        if (nb) s->batches = nb, s->cap_batches = cap;
    }
    bool kept = s->n_batches < s->cap_batches;
    if (kept) s->batches[s->n_batches++] = bt;
    pthread_mutex_unlock(&s->mu);
    reply_json(out, 200, batch_json(&bt));
    if (kept) bt.files = NULL;
done:
    free(bt.files);
    kb_attrs_free(&a);
    json_decref(b);
}

static void batch_route(struct stores *s, const struct stores_request *r, const char *store, const char *id,
                        const char *what, struct stores_reply *out) {
    pthread_mutex_lock(&s->mu);
    struct batch *b = batch_find(s, &r->tenant, store, id);
    struct batch copy = b ? *b : (struct batch){0};
    char (*files)[KB_ID] = NULL;
    if (b && (files = malloc((size_t)(b->n ? b->n : 1) * sizeof *files))) memcpy(files, b->files, (size_t)b->n * sizeof *files);
    pthread_mutex_unlock(&s->mu);
    if (!b) {
        struct api_error e;
        api_fail(&e, 404, "invalid_request_error", "not_found", NULL, "No file batch found with id '%.64s'.", id);
        reply_error(out, &e);
    } else if (!what || !strcmp(what, "cancel")) { /* a finished batch stays as it is */
        reply_json(out, 200, batch_json(&copy));
    } else {
        struct page p;
        if (get_page(r, 20, &p, out)) {
            struct kb_sfile *all;
            struct kvik_err err = {0};
            int64_t n = kb_store_file_list(s->kb, &r->tenant, store, &all, &err);
            if (n < 0) {
                reply_kb(out, (kvik_status)n, &err, NULL);
            } else {
                int64_t m = 0; /* the batch's files still in the store */
                for (int64_t i = 0; i < n; i++) {
                    bool in = false;
                    for (int k = 0; files && k < copy.n && !in; k++) in = !strcmp(files[k], all[i].file_id);
                    if (in) all[m++] = all[i];
                    else kb_sfile_free(&all[i]);
                }
                reply_json(out, 200, page_json(&p, all, sizeof *all, m, sfile_id_of, sfile_to_json));
                for (int64_t i = 0; i < m; i++) kb_sfile_free(&all[i]);
                free(all);
            }
        }
    }
    free(files);
}

/* ---- search ------------------------------------------------------------------------------------ */

static bool ranker_of(const char *name, int *ranker, bool *rerank) {
    static const char *const names[] = {"dense", "bm25", "hybrid"};
    *rerank = false;
    if (!name || !strcmp(name, "auto") || !strcmp(name, "default-2024-11-15")) name = STORES_DEFAULT_RANKER;
    if (!strcmp(name, "none")) name = "dense";
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(names[i]);
        if (!strncmp(name, names[i], l) && (!name[l] || !strcmp(name + l, "+rerank"))) {
            *ranker = i;
            *rerank = name[l] != 0;
            return true;
        }
    }
    return false;
}

static int cmp_result(const void *a, const void *b) {
    const struct kb_result *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->chunk > y->chunk) - (x->chunk < y->chunk);
}

static void search(struct stores *s, const struct stores_request *r, const char *store, struct stores_reply *out) {
    json_t *b = parse_body(r, out);
    if (!b) return;
    json_t *query = json_object_get(b, "query"), *fj = json_object_get(b, "filters");
    json_t *ro = json_object_get(b, "ranking_options"), *mx = json_object_get(b, "max_num_results");
    struct filter_pool *pool = NULL;
    struct kb_result *all = NULL;
    int n_all = 0;
    json_t *queries = json_is_string(query) ? json_pack("[O]", query) : json_incref(query);
    size_t nq = json_array_size(queries);
    if (!json_is_array(queries) || nq == 0 || nq > MAX_QUERIES) {
        reply_bad(out, "query", "%s", "'query' must be a non-empty string or an array of 1 to 8 of them.");
        goto done;
    }
    for (size_t i = 0; i < nq; i++)
        if (!json_is_string(json_array_get(queries, i)) || !json_string_length(json_array_get(queries, i))) {
            reply_bad(out, "query", "%s", "'query' must be a non-empty string or an array of 1 to 8 of them.");
            goto done;
        }
    struct kb_query q = {.k = 10, .threshold = -INFINITY};
    if (mx && !json_is_null(mx)) {
        if (!json_is_integer(mx) || json_integer_value(mx) < 1 || json_integer_value(mx) > MAX_RESULTS) {
            reply_bad(out, "max_num_results", "%s", "'max_num_results' must be an integer from 1 to 50.");
            goto done;
        }
        q.k = (int)json_integer_value(mx);
    }
    const char *ranker = NULL;
    if (ro && !json_is_null(ro)) {
        json_t *th = json_object_get(ro, "score_threshold");
        if (!json_is_object(ro) || !get_string(ro, "ranker", &ranker, out)) {
            if (!json_is_object(ro)) reply_bad(out, "ranking_options", "%s", "'ranking_options' must be an object.");
            goto done;
        }
        json_t *rc = json_object_get(ro, "rerank_candidates");
        if (rc && !json_is_null(rc)) {
            if (!json_is_integer(rc) || json_integer_value(rc) < 1 || json_integer_value(rc) > 200) {
                reply_bad(out, "ranking_options.rerank_candidates", "%s",
                          "'rerank_candidates' must be an integer from 1 to 200.");
                goto done;
            }
            q.candidates = (int)json_integer_value(rc);
        }
        if (th && !json_is_null(th)) {
            if (!json_is_number(th) || !isfinite(json_number_value(th))) {
                reply_bad(out, "ranking_options.score_threshold", "%s", "'score_threshold' must be a number.");
                goto done;
            }
            q.threshold = (float)json_number_value(th);
        }
    }
    if (!ranker_of(ranker, &q.ranker, &q.rerank)) {
        reply_bad(out, "ranking_options.ranker", "%s",
                  "'ranker' must be auto, default-2024-11-15, none, dense, bm25 or hybrid (each of the last three "
                  "with +rerank).");
        goto done;
    }
    if (fj && !json_is_null(fj)) {
        const char *why = "";
        if (!(pool = calloc(1, sizeof *pool)) || !(q.filter = read_filter(fj, pool, 0, &why))) {
            if (pool) reply_bad(out, "filters", "Invalid 'filters': %s.", why);
            else reply_bad(out, NULL, "%s", "The server ran out of memory."), out->status = 500;
            goto done;
        }
    }
    /* every query's results; a chunk found by several keeps its best score */
    for (size_t i = 0; i < nq; i++) {
        json_t *qs = json_array_get(queries, i);
        q.text = json_string_value(qs);
        q.len = json_string_length(qs);
        struct kb_result *res;
        struct kvik_err err = {0};
        int n = kb_search(s->kb, &r->tenant, store, &q, &res, &err);
        if (n < 0) {
            reply_kb(out, (kvik_status)n, &err, n == KVIK_ERR_NOT_FOUND ? NULL : "query");
            goto done;
        }
        struct kb_result *grown = realloc(all, (size_t)(n_all + n + 1) * sizeof *grown);
        if (!grown) {
            kb_results_free(res, n);
            reply_bad(out, NULL, "%s", "The server ran out of memory.");
            out->status = 500;
            goto done;
        }
        all = grown;
        for (int k = 0; k < n; k++) {
            int dup = -1;
            for (int j = 0; j < n_all && dup < 0; j++)
                if (all[j].chunk == res[k].chunk) dup = j;
            if (dup < 0) {
                all[n_all++] = res[k];
                continue;
            }
            if (res[k].score > all[dup].score) all[dup].score = res[k].score;
            free(res[k].text);
            kb_attrs_free(&res[k].attrs);
        }
        free(res);
    }
    qsort(all, (size_t)n_all, sizeof *all, cmp_result);
    json_t *data = json_array();
    for (int i = 0; data && i < n_all && i < q.k; i++) {
        const struct kb_result *x = &all[i];
        json_array_append_new(data, json_pack("{s:s, s:s, s:f, s:o, s:[{s:s, s:s%}]}", "file_id", x->file_id,
                                              "filename", x->filename, "score", (double)x->score, "attributes",
                                              attrs_json(&x->attrs), "content", "type", "text", "text", x->text,
                                              x->len));
    }
    reply_json(out, 200,
               json_pack("{s:s, s:O, s:o, s:b, s:n}", "object", "vector_store.search_results.page", "search_query",
                         queries, "data", data, "has_more", 0, "next_page"));
done:
    kb_results_free(all, n_all);
    free(pool);
    json_decref(queries);
    json_decref(b);
}

/* ---- dispatch --------------------------------------------------------------------------------- */

bool stores_route(const char *path) {
    return !strncmp(path, "/v1/files", 9) ? (path[9] == 0 || path[9] == '/')
         : !strncmp(path, "/v1/vector_stores", 17) ? (path[17] == 0 || path[17] == '/')
                                                     : false;
}

/* path's segments after "/v1/" into seg; -1 when one is empty or too long. */
static int split(const char *path, char seg[][KB_ID * 2]) {
    const char *p = path + 4;
    int n = 0;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || l >= KB_ID * 2 || n == MAX_SEGMENTS) return -1;
        memcpy(seg[n], p, l);
        seg[n][l] = 0;
        n++;
        if (!e) break;
        p = e + 1;
        if (!*p) return -1; /* a trailing slash */
    }
    return n;
}

static void stores_dispatch(struct stores *s, const struct stores_request *r, char seg[][KB_ID * 2], int nseg,
                            struct stores_reply *out) {
    struct kvik_err err = {0};
    const char *m = r->method;
    bool get = !strcmp(m, "GET"), post = !strcmp(m, "POST"), del = !strcmp(m, "DELETE");
    kvik_status k;
    if (nseg == 1) {
        if (post) return store_create(s, r, out);
        if (get) {
            struct page p;
            if (!get_page(r, 20, &p, out)) return;
            struct kb_store *sl;
            int64_t n = kb_store_list(s->kb, &r->tenant, &sl, &err);
            if (n < 0) return reply_kb(out, (kvik_status)n, &err, NULL);
            reply_json(out, 200, page_json(&p, sl, sizeof *sl, n, store_id_of, store_to_json));
            for (int64_t i = 0; i < n; i++) kb_store_free(&sl[i]);
            free(sl);
            return;
        }
    } else if (nseg == 2) {
        const char *id = seg[1];
        if (get) {
            struct kb_store st;
            if ((k = kb_store_get(s->kb, &r->tenant, id, &st, &err))) return reply_kb(out, k, &err, NULL);
            reply_json(out, 200, store_json(&st));
            kb_store_free(&st);
            return;
        }
        if (post) return store_update(s, r, id, out);
        if (del) {
            if ((k = kb_store_delete(s->kb, &r->tenant, id, &err))) return reply_kb(out, k, &err, NULL);
            return reply_json(out, 200, deleted_json(id, "vector_store.deleted"));
        }
    } else if (nseg == 3 && post && !strcmp(seg[2], "search")) {
        return search(s, r, seg[1], out);
    } else if (nseg == 3 && post && !strcmp(seg[2], "texts")) {
        return texts_add(s, r, seg[1], out);
    } else if (nseg == 3 && post && !strcmp(seg[2], "file_batches")) {
        return batch_create(s, r, seg[1], out);
    } else if (nseg >= 4 && !strcmp(seg[2], "file_batches") && (nseg == 4 ? get : nseg == 5 && (
                   (post && !strcmp(seg[4], "cancel")) || (get && !strcmp(seg[4], "files"))))) {
        return batch_route(s, r, seg[1], seg[3], nseg == 5 ? seg[4] : NULL, out);
    } else if (nseg == 3 && !strcmp(seg[2], "files")) {
        if (post) return sfile_add(s, r, seg[1], out);
        if (get) {
            struct page p;
            if (!get_page(r, 20, &p, out)) return;
            const char *filter = r->arg ? r->arg(r->arg_ctx, "filter") : NULL;
            struct kb_sfile *fl;
            int64_t n = kb_store_file_list(s->kb, &r->tenant, seg[1], &fl, &err);
            if (n < 0) return reply_kb(out, (kvik_status)n, &err, NULL);
            int64_t kept = 0;
            for (int64_t i = 0; i < n; i++) {
                const char *st = fl[i].status == KB_SFILE_COMPLETED ? "completed" : "failed";
                if (!filter || !strcmp(filter, st)) fl[kept++] = fl[i];
                else kb_sfile_free(&fl[i]);
            }
            reply_json(out, 200, page_json(&p, fl, sizeof *fl, kept, sfile_id_of, sfile_to_json));
            for (int64_t i = 0; i < kept; i++) kb_sfile_free(&fl[i]);
            free(fl);
            return;
        }
    } else if (nseg == 4 && !strcmp(seg[2], "files")) {
        const char *vs = seg[1], *fid = seg[3];
        struct kb_sfile sf;
        if (get || post) {
            struct kb_attrs a = {0};
            json_t *b = NULL;
            if (post) {
                if (!(b = parse_body(r, out))) return;
                bool given = false;
                if (!get_attrs(b, "attributes", false, &a, &given, out)) {
                    json_decref(b);
                    return;
                }
            }
            k = post ? kb_store_file_update(s->kb, &r->tenant, vs, fid, &a, &sf, &err)
                     : kb_store_file_get(s->kb, &r->tenant, vs, fid, &sf, &err);
            kb_attrs_free(&a);
            json_decref(b);
            if (k) return reply_kb(out, k, &err, NULL);
            reply_json(out, 200, sfile_json(&sf));
            kb_sfile_free(&sf);
            return;
        }
        if (del) {
            if ((k = kb_store_file_delete(s->kb, &r->tenant, vs, fid, &err))) return reply_kb(out, k, &err, NULL);
            return reply_json(out, 200, deleted_json(fid, "vector_store.file.deleted"));
        }
    } else if (nseg == 5 && get && !strcmp(seg[2], "files") && !strcmp(seg[4], "content")) {
        struct kb_result *c;
        int n = kb_store_file_chunks(s->kb, &r->tenant, seg[1], seg[3], &c, &err);
        if (n < 0) return reply_kb(out, (kvik_status)n, &err, NULL);
        json_t *data = json_array();
        for (int i = 0; data && i < n; i++)
            json_array_append_new(data, json_pack("{s:s, s:s%}", "type", "text", "text", c[i].text, c[i].len));
        kb_results_free(c, n);
        return reply_json(out, 200,
                          json_pack("{s:s, s:o, s:b, s:n}", "object", "vector_store.file_content.page", "data", data,
                                    "has_more", 0, "next_page"));
    }
    struct api_error e;
    api_fail(&e, 404, "invalid_request_error", "unknown_url", NULL, "Unknown request URL: %.16s %.200s.", m, r->path);
    reply_error(out, &e);
}

void stores_handle(struct stores *s, const struct stores_request *r, struct stores_reply *out) {
    *out = (struct stores_reply){0};
    char seg[MAX_SEGMENTS][KB_ID * 2];
    int n = split(r->path, seg);
    if (n < 1) {
        struct api_error e;
        api_fail(&e, 404, "invalid_request_error", "unknown_url", NULL, "Unknown request URL: %.16s %.200s.",
                 r->method, r->path);
        return reply_error(out, &e);
    }
    if (!strcmp(seg[0], "files")) files_route(s, r, seg, n, out);
    else stores_dispatch(s, r, seg, n, out);
    if (!out->body && out->status != 200) out->status = 500;
}

struct stores *stores_new(struct kb *kb, size_t max_file) {
    struct stores *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->kb = kb;
    s->max_file = max_file;
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

void stores_free(struct stores *s) {
    if (!s) return;
    for (int i = 0; i < s->n_batches; i++) free(s->batches[i].files);
    free(s->batches);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
