/*
 * multipart.h — a multipart/form-data body (RFC 7578) cut into its parts,
 * as POST /v1/files receives an upload. Pure: no sockets, no allocation;
 * the parts point into the body.
 *
 * The boundary comes from the Content-Type's boundary parameter (quoted or
 * not, 1..70 bytes). The body is a preamble, then parts, each opened by a
 * line "--BOUNDARY" and its header lines, the whole ended by
 * "--BOUNDARY--". Each part needs a Content-Disposition of form-data with
 * a name; its filename, when given, is read from filename="..." (quoted,
 * with backslash escapes) or a bare token. Lines end in CRLF (a bare LF is
 * accepted). Anything else is an error with a reason.
 */
#ifndef KVIK_SERVER_MULTIPART_H
#define KVIK_SERVER_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

enum { MP_MAX_NAME = 256 };

struct mp_part {
    char name[MP_MAX_NAME];     /* the form field's name */
    char filename[MP_MAX_NAME]; /* "" when none was given */
    bool has_filename;
    char content_type[128];     /* "" when none was given */
    const char *data;           /* into the body */
    size_t len;
};

/* Parses body[0..len) sent with content_type into parts[0..max); returns
 * the number of parts, or -1 with *why set (a static string). */
int multipart_parse(const char *content_type, const char *body, size_t len, struct mp_part *parts, int max,
                    const char **why);

#endif /* KVIK_SERVER_MULTIPART_H */
