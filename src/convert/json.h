/*
 * json.h — a small strict JSON (RFC 8259) parser for file headers.
 *
 * json_parse reads a whole buffer into a tree of owned values. It accepts
 * exactly one value, surrounded by optional whitespace, and rejects
 * everything RFC 8259 does not allow: trailing commas, comments, single
 * quotes, control characters in strings, invalid UTF-8, lone or misordered
 * \uXXXX surrogates, leading zeros, and nesting deeper than JSON_MAX_DEPTH.
 * Strings are decoded (escapes resolved) into NUL-terminated storage; a
 * string may contain NUL bytes, so its length is in len. A number that is a
 * non-negative integer fitting in 64 bits becomes JSON_UINT; every other
 * valid number (negative, fraction, exponent, too large) becomes
 * JSON_NUMBER; every number's value is also in num, as strtod reads it
 * (nearest double; overflow gives +-HUGE_VAL). Duplicate keys are kept in order;
 * callers decide whether they are errors.
 */
#ifndef KVIK_CONVERT_JSON_H
#define KVIK_CONVERT_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define JSON_MAX_DEPTH 64

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_UINT,   /* a non-negative integer <= UINT64_MAX, in u */
    JSON_NUMBER, /* any other number, in num */
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
};

struct json_member;

struct json_value {
    enum json_type type;
    size_t at;                       /* byte offset of the value in the input */
    uint64_t u;                      /* JSON_UINT */
    double num;                      /* JSON_UINT and JSON_NUMBER: the value as a double */
    char *str;                       /* JSON_STRING: [len] bytes + NUL, owned */
    size_t len;                      /* JSON_STRING: bytes; ARRAY/OBJECT: entries */
    struct json_value *items;        /* JSON_ARRAY: [len] */
    struct json_member *members;     /* JSON_OBJECT: [len], in input order */
};

struct json_member {
    char *key;        /* [key_len] bytes + NUL, owned */
    size_t key_len;
    struct json_value value;
};

/* Parses buf[0..len) into *out. On failure *out holds nothing to free and
 * err says what is wrong and at which byte offset (KVIK_ERR_FORMAT), or
 * KVIK_ERR_NOMEM. */
kvik_status json_parse(const char *buf, size_t len, struct json_value *out,
                       struct kvik_err *err);

/* Frees what json_parse allocated under v; v itself is the caller's. */
void json_free(struct json_value *v);

const char *json_type_name(enum json_type t);

#endif
