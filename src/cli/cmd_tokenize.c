/*
 * cmd_tokenize.c — `kvik tokenize` and `kvik detokenize`: text to ids and
 * back with the tokenizer of any GGUF file that has one. Only the file's
 * metadata is read (gguf_open validates and maps it; no weights are
 * loaded), so vocabulary-only files work as well as models.
 *
 *   kvik tokenize -m MODEL (-p TEXT | -f FILE) [--add-special] [--parse-special] [--pieces]
 *       ids separated by spaces on one line; with --pieces one line per
 *       token: the id, a tab and the token's bytes in single quotes, with
 *       \n \t \r \\ \' escaped and bytes that are not printable UTF-8 as \xNN.
 *   kvik detokenize -m MODEL [--skip-special] ID...
 *       the text the ids decode to, then a newline. An ID argument may hold
 *       several ids separated by spaces or commas, so the output of
 *       tokenize can be passed quoted; "-" reads the ids from stdin.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

static void usage_tokenize(FILE *f) {
    fprintf(f,
            "usage: kvik tokenize [-m MODEL] (-p TEXT | -f FILE) [--add-special] [--parse-special]\n"
            "                     [--pieces]\n"
            "  -m PATH          a GGUF file with a vocabulary (a model or a vocabulary-only file;\n"
            "                   default: $KVIK_MODEL, else the default model in the cache)\n"
            "  -p TEXT          the text\n"
            "  -f FILE          read the text from FILE\n"
            "  --add-special    add BOS/EOS as the vocabulary asks (default: nothing added)\n"
            "  --parse-special  control tokens written in the text (<|im_start|>) become their\n"
            "                   ids (default: they are plain text)\n"
            "  --pieces         one token a line: id, tab, its bytes quoted and escaped\n"
            "Prints the ids on one line, separated by spaces.\n");
}

static void usage_detokenize(FILE *f) {
    fprintf(f,
            "usage: kvik detokenize [-m MODEL] [--skip-special] ID...\n"
            "  -m PATH         a GGUF file with a vocabulary (default as for kvik tokenize)\n"
            "  --skip-special  control tokens give nothing (default: their text)\n"
            "  ID...           token ids; an argument may hold several separated by spaces or\n"
            "                  commas; \"-\" reads them from stdin\n"
            "Prints the decoded text followed by a newline.\n");
}

/* Opens path and builds its tokenizer; one line on stderr on failure. */
static struct tokenizer *load_tokenizer(const char *path, const char *arg, const char *cmd) {
    if (!cli_model_exists(path, arg, cmd)) return NULL;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    if (gguf_open(path, &g, &err) != KVIK_OK || tokenizer_load(g, &tok, &err) != KVIK_OK)
        fprintf(stderr, "kvik %s: %s: %s\n", cmd, path, err.msg);
    gguf_close(g);
    return tok;
}

/* A token's bytes for --pieces: quoted, escaped. */
static void print_piece(FILE *f, const char *p, size_t n) {
    const uint8_t *s = (const uint8_t *)p;
    fputc('\'', f);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_valid_seq(s + i, n - i > 4 ? 4 : n - i);
        uint8_t c = s[i];
        if (k == 1 && c == '\n') fputs("\\n", f);
        else if (k == 1 && c == '\t') fputs("\\t", f);
        else if (k == 1 && c == '\r') fputs("\\r", f);
        else if (k == 1 && c == '\\') fputs("\\\\", f);
        else if (k == 1 && c == '\'') fputs("\\'", f);
        else if (k == 0 || (k == 1 && (c < 0x20 || c == 0x7f))) fprintf(f, "\\x%02x", c);
        else fwrite(s + i, 1, k, f);
        i += k ? k : 1;
    }
    fputc('\'', f);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_arg = NULL, *text = NULL, *file = NULL;
    bool add_special = false, parse_special = false, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_tokenize(stdout);
            return 0;
        } else if (!strcmp(a, "-m") && i + 1 < argc) {
            model_arg = argv[++i];
        } else if (!strcmp(a, "-p") && i + 1 < argc) {
            text = argv[++i];
        } else if (!strcmp(a, "-f") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(a, "--add-special")) {
            add_special = true;
        } else if (!strcmp(a, "--parse-special")) {
            parse_special = true;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else {
            fprintf(stderr, "kvik tokenize: unknown or incomplete argument '%s' (try kvik tokenize --help)\n", a);
            return 2;
        }
    }
    if (!text == !file) {
        fprintf(stderr, "kvik tokenize: give the text with -p TEXT or -f FILE (one of them)\n");
        return 2;
    }
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        buf = cli_read_file(file, &len);
        if (!buf) {
            fprintf(stderr, "kvik tokenize: cannot read '%s': %s\n", file, strerror(errno));
            return 1;
        }
        text = buf;
    } else {
        len = strlen(text);
    }
    char path_buf[4096];
    const char *path = cli_resolve_model(model_arg, path_buf, sizeof path_buf);
    struct tokenizer *tok = load_tokenizer(path, model_arg, "tokenize");
    int rc = 1;
    int32_t *ids = NULL;
    if (!tok) goto done;
    /* every byte gives at most one id (plus BOS and EOS); else ask again */
    int64_t cap = (int64_t)len + 3, n;
    for (;;) {
        ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) {
            fprintf(stderr, "kvik tokenize: out of memory\n");
            goto done;
        }
        n = tokenizer_encode(tok, text, len, add_special, parse_special, ids, cap);
        if (n <= cap) break;
        free(ids);
        cap = n;
    }
    if (n < 0) {
        fprintf(stderr, "kvik tokenize: encoding failed (%s)\n", kvik_status_string((kvik_status)n));
        goto done;
    }
    char *piece = NULL;
    size_t piece_cap = tokenizer_max_piece_len(tok) + 1;
    if (pieces && !(piece = malloc(piece_cap))) {
        fprintf(stderr, "kvik tokenize: out of memory\n");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if (pieces) {
            int64_t pn = tokenizer_decode_piece(tok, ids[i], piece, piece_cap, true);
            printf("%d\t", ids[i]);
            print_piece(stdout, piece, pn > 0 ? (size_t)pn : 0);
            putchar('\n');
        } else {
            printf(i ? " %d" : "%d", ids[i]);
        }
    }
    if (!pieces) putchar('\n');
    free(piece);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(ids);
    free(buf);
    tokenizer_free(tok);
    return rc;
}

/* ---- detokenize --------------------------------------------------------------- */

struct id_list {
    int32_t *v;
    int64_t n, cap;
};

/* Appends the ids in s (separated by spaces, tabs, newlines or commas);
 * false with a message on anything that is not an id of the vocabulary
 * (n_vocab < 0: not known yet, range checked later). */
static bool parse_ids(struct id_list *l, const char *s, const char *what) {
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) return true;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        bool sep = *end == 0 || *end == ' ' || *end == ',' || *end == '\t' || *end == '\n' || *end == '\r';
        if (end == p || !sep || errno || v < 0 || v > INT32_MAX) {
            int w = 0;
            while (p[w] && p[w] != ' ' && p[w] != ',' && p[w] != '\n' && w < 40) w++;
            fprintf(stderr, "kvik detokenize: '%.*s' in %s is not a token id\n", w, p, what);
            return false;
        }
        if (l->n == l->cap) {
            int64_t cap = l->cap ? l->cap * 2 : 256;
            int32_t *nv = realloc(l->v, (size_t)cap * sizeof *nv);
            if (!nv) {
                fprintf(stderr, "kvik detokenize: out of memory\n");
                return false;
            }
            l->v = nv;
            l->cap = cap;
        }
        l->v[l->n++] = (int32_t)v;
        p = end;
    }
}

int cmd_detokenize(int argc, char **argv) {
    const char *model_arg = NULL;
    bool skip_special = false, from_stdin = false;
    struct id_list ids = {0};
    int rc = 2, n_args = 0;
    char *in = NULL;
    struct tokenizer *tok = NULL;
    char *text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_detokenize(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "-m") && i + 1 < argc) {
            model_arg = argv[++i];
        } else if (!strcmp(a, "--skip-special")) {
            skip_special = true;
        } else if (!strcmp(a, "-")) {
            from_stdin = true;
            n_args++;
        } else if (a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
            fprintf(stderr, "kvik detokenize: unknown or incomplete argument '%s' (try kvik detokenize --help)\n", a);
            goto done;
        } else {
            if (!parse_ids(&ids, a, "the arguments")) goto done;
            n_args++;
        }
    }
    if (n_args == 0) {
        fprintf(stderr, "kvik detokenize: no token ids given (try kvik detokenize --help)\n");
        goto done;
    }
    if (from_stdin) {
        size_t len;
        in = cli_read_file("/dev/stdin", &len);
        if (!in) {
            fprintf(stderr, "kvik detokenize: cannot read stdin: %s\n", strerror(errno));
            rc = 1;
            goto done;
        }
        if (strlen(in) != len) {
            fprintf(stderr, "kvik detokenize: stdin holds a NUL byte, not token ids\n");
            goto done;
        }
        if (!parse_ids(&ids, in, "stdin")) goto done;
    }
    char path_buf[4096];
    const char *path = cli_resolve_model(model_arg, path_buf, sizeof path_buf);
    rc = 1;
    if (!(tok = load_tokenizer(path, model_arg, "detokenize"))) goto done;
    for (int64_t i = 0; i < ids.n; i++) {
        if (ids.v[i] >= tokenizer_n_vocab(tok)) {
            fprintf(stderr, "kvik detokenize: token id %d is out of range (the vocabulary has %d)\n",
                    ids.v[i], tokenizer_n_vocab(tok));
            rc = 2;
            goto done;
        }
    }
    int64_t n = tokenizer_decode(tok, ids.v, ids.n, NULL, 0, !skip_special);
    if (n < 0 || !(text = malloc((size_t)n + 1))) {
        fprintf(stderr, "kvik detokenize: %s\n", n < 0 ? "decoding failed" : "out of memory");
        goto done;
    }
    tokenizer_decode(tok, ids.v, ids.n, text, (size_t)n, !skip_special);
    fwrite(text, 1, (size_t)n, stdout);
    putchar('\n');
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(text);
    free(in);
    free(ids.v);
    tokenizer_free(tok);
    return rc;
}
