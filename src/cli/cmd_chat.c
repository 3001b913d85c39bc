/*
 * cmd_chat.c — `kvik chat`: an interactive multi-turn chat on stdin/stdout.
 *
 * One line of stdin is one user message; a line ending in a backslash
 * continues on the next. Each turn encodes the whole conversation with the
 * chat template (generation prompt on; see Special tokens) and submits it
 * to the serving engine as a new request (gen.c), with the engine's prefix
 * cache on and one cache key for the whole chat. The previous turn's request
 * left every position it computed in the cache, its partly filled last
 * block included (engine.h, "Prefix cache"), so the turn attaches the
 * conversation so far and prefills exactly what is new: the end-of-turn
 * marker, the new message and the generation prompt, or more from the
 * point where re-tokenizing the reply text differs from what was sampled
 * (usually nowhere). The reply streams to stdout and joins the
 * conversation as an assistant message. Ctrl-D (EOF) ends the chat.
 *
 * Special tokens: chat_encode (tokenizer/chat.h) renders and tokenizes the
 * conversation, the template's markers as special tokens and message text
 * always as plain text, as `kvik run --chat` and the server do.
 *
 * Context: when the prompt plus room for a reply (-n, at most a quarter of
 * the context) does not fit, the oldest user/assistant pairs are dropped
 * (the system message stays) and the conversation is prefilled again from
 * the last cached block before the point where it now differs. A message
 * that does not fit even alone is refused with one line on stderr and the
 * chat goes on.
 *
 * stdout carries only the replies (one "\n" after each); the "> " prompt
 * (terminals only), notes and one statistics line per turn go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/gen.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik chat [-m MODEL] [options]   (one message per line on stdin; Ctrl-D ends)\n"
            "  -m PATH        model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -n N           at most N tokens per reply (default 1024)\n" GEN_USAGE_OPTIONS
            "  --system TEXT  a system message (default: the template's own, if any)\n"
            "  --chat-template NAME  chatml, llama3, gemma, mistral or phi3 (default: the model's)\n"
            GEN_USAGE_SPEC
            "With -s SEED, reply t (from 0) samples with seed SEED + t.\n"
            "A line ending in a backslash continues on the next line.\n");
}

struct chat_opts {
    struct gen_opts g;
    const char *system; // --system; NULL: none
};

static int chat_opt(void *p, const char *a, const char *v) {
    struct chat_opts *o = p;
    if (v && !strcmp(a, "--system")) return o->system = v, GEN_OPT_VALUE;
    return 0;
}

/* ---- growable buffers ------------------------------------------------- */

struct idvec {
    int32_t *v; // [cap]
    int64_t n, cap;
};

static bool idvec_reserve(struct idvec *d, int64_t cap) {
    if (cap <= d->cap) return true;
    int32_t *nv = realloc(d->v, sizeof(int32_t) * (size_t)cap);
    if (!nv) return false;
    d->v = nv, d->cap = cap;
    return true;
}

/* ---- the conversation ------------------------------------------------- */

struct chat {
    struct gen g;
    struct chat_format fmt;
    struct chat_msg *msgs; // [n_msgs] contents owned
    size_t n_msgs, cap_msgs;
    size_t first_turn;     // 1 with a system message, else 0
    struct idvec ids;      // the conversation being prepared, then fed
    uint64_t turns;        // replies so far
};

enum { CHAT_CACHE_KEY = 1 }; /* the prefix cache key of every turn */

static kvik_status push_msg(struct chat *c, const char *role, const char *content, size_t len,
                            struct kvik_err *err) {
    if (c->n_msgs == c->cap_msgs) {
        size_t nc = c->cap_msgs * 2 + 8;
        struct chat_msg *nm = realloc(c->msgs, nc * sizeof *nm);
        if (!nm) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
        c->msgs = nm, c->cap_msgs = nc;
    }
    char *s = malloc(len + 1);
    if (!s) return err_set(err, KVIK_ERR_NOMEM, "out of memory");
    memcpy(s, content, len);
    s[len] = 0;
    c->msgs[c->n_msgs++] = (struct chat_msg){.role = role, .content = s};
    return KVIK_OK;
}

/* Removes messages [at, at + k). */
static void drop_msgs(struct chat *c, size_t at, size_t k) {
    if (k == 0) return;
    for (size_t i = at; i < at + k; i++) free((char *)c->msgs[i].content);
    memmove(c->msgs + at, c->msgs + at + k, (c->n_msgs - at - k) * sizeof *c->msgs);
    c->n_msgs -= k;
}

/* Renders and tokenizes msgs[0..n) (generation prompt on) into c->ids. */
static kvik_status encode_conversation(struct chat *c, const struct chat_msg *msgs, size_t n,
                                       struct kvik_err *err) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    kvik_status st = chat_encode(&c->fmt, c->g.tok, msgs, n, true, &ids, &n_ids, err);
    if (!st && !idvec_reserve(&c->ids, (int64_t)n_ids)) st = err_set(err, KVIK_ERR_NOMEM, "out of memory");
    if (!st) {
        memcpy(c->ids.v, ids, n_ids * sizeof *ids);
        c->ids.n = (int64_t)n_ids;
    }
    free(ids);
    return st;
}

/* ---- one turn --------------------------------------------------------- */

/*
 * Renders the conversation (the user's message last), makes it fit, feeds
 * what the cache lacks and streams the reply. Returns 0, 1 for a message
 * refused (one line on stderr, the conversation as before), or -1 with err
 * set for a runtime error.
 */
static int chat_turn(struct chat *c, const struct chat_opts *o, const char *line, size_t len,
                     struct kvik_err *err) {
    const int n_ctx = c->g.n_ctx;
    const int64_t reserve = o->g.n_gen < n_ctx / 4 ? o->g.n_gen : n_ctx / 4;
    if (push_msg(c, "user", line, len, err)) return -1;
    kvik_status st = encode_conversation(c, c->msgs, c->n_msgs, err);
    if (!st && c->ids.n + reserve > n_ctx && c->n_msgs > c->first_turn + 1) {
        /* make sure the message fits alone before dropping anything */
        struct chat_msg alone[2] = {c->msgs[0], c->msgs[c->n_msgs - 1]};
        if (!(st = encode_conversation(c, alone + 1 - c->first_turn, c->first_turn + 1, err)) && c->ids.n < n_ctx) {
            size_t dropped = 0;
            do {
                drop_msgs(c, c->first_turn, c->n_msgs - c->first_turn >= 3 ? 2 : 1);
                dropped++;
                st = encode_conversation(c, c->msgs, c->n_msgs, err);
            } while (!st && c->ids.n + reserve > n_ctx && c->n_msgs > c->first_turn + 1);
            fprintf(stderr, "kvik chat: context full (-c %d): dropped the oldest %zu turn%s\n", n_ctx, dropped,
                    dropped == 1 ? "" : "s");
        }
    }
    if (st || c->ids.n >= n_ctx) {
        if (st == KVIK_ERR_NOMEM) return -1;
        if (st) fprintf(stderr, "kvik chat: message not sent: %s\n", err->msg);
        else
            fprintf(stderr, "kvik chat: message not sent: it needs %lld tokens, the context holds %d (-c)\n",
                    (long long)c->ids.n, n_ctx);
        drop_msgs(c, c->n_msgs - 1, 1);
        return 1;
    }

    /* the whole conversation is a new request; the prefix cache holds what the last turn computed */
    int64_t n = c->ids.n;
    int max_tokens = (int)(n + o->g.n_gen < n_ctx ? o->g.n_gen : n_ctx - n);
    if (!idvec_reserve(&c->ids, n + max_tokens)) {
        err_set(err, KVIK_ERR_NOMEM, "out of memory");
        return -1;
    }
    struct sampler_params sp = o->g.sp;
    if (sp.seed != SAMPLER_SEED_RANDOM && (sp.seed += c->turns) == SAMPLER_SEED_RANDOM) sp.seed++; /* a stream per turn */
    c->turns++;
    struct gen_text reply = {0};
    struct gen_result res;
    st = gen_generate(&c->g, c->ids.v, (int)n, max_tokens, &sp, CHAT_CACHE_KEY, c->ids.v + n, stdout, &reply, &res,
                      err);
    fputc('\n', stdout);
    fflush(stdout);
    if (!st) st = push_msg(c, "assistant", reply.buf ? reply.buf : "", reply.len, err);
    free(reply.buf);
    if (st) return -1;

    int64_t n_gen = res.n_gen, reused = res.n_cached;
    int64_t kept = n_gen > 0 ? n + n_gen - 1 : n; /* the last token sampled was not fed */
    double prefill_s = (double)(res.t_first - res.t_submit) * 1e-9, decode_s = (double)(res.t_end - res.t_first) * 1e-9;
    fprintf(stderr,
            "kvik chat: prefilled %lld new tokens, reused %lld cached; prefill %.1f tok/s; "
            "reply %lld tokens%s, decode %.1f tok/s; context %lld/%d\n",
            (long long)(n - reused), (long long)reused, (double)(n - reused) / prefill_s, (long long)n_gen,
            res.eog ? "" : " (cut off)", n_gen > 1 ? (double)(n_gen - 1) / decode_s : 0, (long long)kept, n_ctx);
    return 0;
}

/* ---- the command ------------------------------------------------------ */

/* Reads one message: a line, joined with the next while it ends in a
 * backslash. Returns its length (without the newline), or -1 at EOF with
 * nothing read. *buf is getline's. */
static ssize_t read_message(char **buf, size_t *cap, bool tty) {
    char *line = NULL;
    size_t line_cap = 0, len = 0;
    ssize_t k;
    bool any = false;
    while ((k = getline(&line, &line_cap, stdin)) >= 0) {
        any = true;
        if (k > 0 && line[k - 1] == '\n') k--;
        if (k > 0 && line[k - 1] == '\r') k--;
        bool more = k > 0 && line[k - 1] == '\\';
        if (more) line[k - 1] = '\n'; /* the backslash becomes the line break */
        if (len + (size_t)k + 1 > *cap) {
            size_t nc = 2 * (len + (size_t)k + 1);
            char *nb = realloc(*buf, nc);
            if (!nb) break;
            *buf = nb, *cap = nc;
        }
        memcpy(*buf + len, line, (size_t)k);
        len += (size_t)k;
        (*buf)[len] = 0;
        if (!more) break;
        if (tty) fputs(". ", stderr);
    }
    free(line);
    return any ? (ssize_t)len : -1;
}

static bool blank(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r\n\v\f", s[i])) return false;
    return true;
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o = {.g = gen_opts_default(ENGINE_DEFAULT_REPLY_TOKENS)};
    int rc = gen_parse_args(argc, argv, "chat", &o.g, chat_opt, &o, usage);
    if (rc >= 0) return rc;
    char pathbuf[4096];
    const char *path;
    if (!gen_opts_check(&o.g, "chat", pathbuf, sizeof pathbuf, &path)) return 2;
    if (!cli_model_exists(path, o.g.model, "chat")) return 1;
    struct kvik_err err = {0};

    struct chat c = {0};
    char *line = NULL;
    size_t line_cap = 0;
    bool tty = isatty(STDIN_FILENO);
    rc = 1;
    if (gen_load(&c.g, path, &o.g, &err)) goto fail;
    if (gen_chat_format(c.g.model, o.g.chat_template, "chat", &c.fmt, &err)) goto fail;
    int n_ctx = c.g.n_ctx;
    int max_batch = n_ctx < GEN_MAX_BATCH ? n_ctx : GEN_MAX_BATCH;
    if (gen_start(&c.g, &o.g, 1, n_ctx, max_batch, true, &err)) goto fail;
    if (!idvec_reserve(&c.ids, n_ctx)) {
        err_set(&err, KVIK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (o.system) {
        if (push_msg(&c, "system", o.system, strlen(o.system), &err)) goto fail;
        c.first_turn = 1;
    }
    if (tty)
        fprintf(stderr, "kvik chat: %s, %s template, context %d; Ctrl-D ends\n", path,
                chat_template_name(c.fmt.tmpl), n_ctx);
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t len = read_message(&line, &line_cap, tty);
        if (len < 0) break;
        if (blank(line, (size_t)len)) continue;
        if (chat_turn(&c, &o, line, (size_t)len, &err) < 0) goto fail;
    }
    if (tty) fputc('\n', stderr);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "kvik chat: %s\n", err.msg);
done:
    free(line);
    drop_msgs(&c, 0, c.n_msgs);
    free(c.msgs);
    free(c.ids.v);
    chat_format_free(&c.fmt);
    gen_free(&c.g);
    return rc;
}
