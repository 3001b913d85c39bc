/*
 * http_check.h — checks on a request's header fields that libmicrohttpd
 * leaves to the application: how the body is framed (Content-Length,
 * Transfer-Encoding), bytes a field may not hold, and the bearer token of
 * Authorization. Pure functions over (pointer, length) pairs: no sockets,
 * no allocation; the fuzz target tests/fuzz/fuzz_http_headers.c runs them.
 *
 * Rules (RFC 9110 and 9112, the strict reading that closes request
 * smuggling behind a proxy):
 *   - a field name is a token: no spaces, no separators, no control bytes
 *     ("Content-Length : 5" is a 400, not an unknown field);
 *   - a field value holds no control byte but horizontal tab (a NUL in
 *     "Authorization: Bearer KEY\0..." is a 400, never part of the key);
 *   - Content-Length is digits only; several are allowed only with equal
 *     values; a value that does not fit 64 bits is a 400;
 *   - Transfer-Encoding lists codings over all its fields: exactly one
 *     "chunked" (any case) is accepted; "chunked" twice, an empty list,
 *     or any of it in an HTTP/1.0 request is a 400; any other coding
 *     ("gzip", "gzip, chunked") is a 501;
 *   - Content-Length together with Transfer-Encoding is a 400.
 */
#ifndef KVIK_SERVER_HTTP_CHECK_H
#define KVIK_SERVER_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One header field as received: name and value with their lengths (a
 * value may hold bytes past a NUL). */
struct http_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* How a request's body is framed. */
struct http_framing {
    bool chunked;     /* Transfer-Encoding: chunked */
    bool has_length;  /* a Content-Length was given */
    uint64_t length;  /* its value (0 without) */
};

/* Checks fields f[0..n) of a request (http10: the request line says
 * HTTP/1.0). 0 when the request may go on, *out then filled; else the
 * status to answer, 400 or 501, with *why a short static reason. */
int http_check_fields(const struct http_field *f, size_t n, bool http10, struct http_framing *out,
                      const char **why);

/* The fields f[0..n) as parsed in place in buf[0..len), the request's
 * header block as received, empty line included (libmicrohttpd writes
 * NULs over separators and line ends, and its strings end at the first
 * NUL byte of a line); the request line ends at line_end. True when every
 * field lies in order within the block and the bytes left out of the
 * strings are separators only: ':' and blanks between a name and its
 * value, a line end ("\r\n" or "\n", now NULs) after a value or the
 * request line. False when bytes were cut off at a NUL ("Bearer KEY\0",
 * "Bearer KEY\0junk") or a field lies elsewhere (a line folded onto the
 * previous one): the request is then refused. One NUL just before a bare
 * "\n" looks like "\r\n" and passes. */
bool http_check_layout(const char *buf, size_t len, size_t line_end, const struct http_field *f, size_t n);

/* The token of an Authorization value "Bearer TOKEN" (scheme in any case,
 * spaces after it skipped, trailing spaces and tabs dropped): true with
 * *tok, *tok_len set; false if the value is not a bearer credential. */
bool http_bearer_token(const char *v, size_t len, const char **tok, size_t *tok_len);

/* given[0..lg) equals key[0..lk), in time that depends only on lk. */
bool http_key_equal(const char *given, size_t lg, const char *key, size_t lk);

#endif /* KVIK_SERVER_HTTP_CHECK_H */
