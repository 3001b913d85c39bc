/*
 * cmd_template.c — `kvik template`: a chat template rendered with the Jinja
 * engine, to see the exact prompt a model gets.
 *
 *   kvik template (-m MODEL | --template FILE.jinja) --messages FILE.json
 *       [--tools FILE.json] [--no-generation-prompt] [--var NAME=JSON]...
 *       [--bos TEXT] [--eos TEXT] [--now SECONDS]
 *
 * Prints the rendered text as is (no newline added). With -m the template
 * is the file's tokenizer.chat_template and BOS/EOS are its tokens' texts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik template (-m MODEL | --template FILE) --messages FILE [--tools FILE]\n"
            "                     [--no-generation-prompt] [--var NAME=JSON]... [--bos TEXT]\n"
            "                     [--eos TEXT] [--now SECONDS]\n"
            "  -m PATH                 a GGUF file: its tokenizer.chat_template, BOS and EOS\n"
            "  --template FILE         a Jinja chat template\n"
            "  --messages FILE         a JSON array of messages ({\"role\", \"content\", ...})\n"
            "  --tools FILE            a JSON array of tools (default: tools is none)\n"
            "  --no-generation-prompt  add_generation_prompt false (default true)\n"
            "  --var NAME=JSON         another template variable (enable_thinking=false)\n"
            "  --bos TEXT, --eos TEXT  bos_token and eos_token (default: the model's, else \"\")\n"
            "  --now SECONDS           the time strftime_now formats, Unix seconds (default: now)\n"
            "Prints the rendered prompt exactly, without a newline added.\n");
}

static bool valid_name(const char *s, size_t n) {
    if (!n) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (i && ch >= '0' && ch <= '9');
        if (!ok) return false;
    }
    return true;
}

/* The GGUF's template text and BOS/EOS texts (owned); false with a message. */
static bool from_model(const char *path, char **tmpl, char **bos, char **eos) {
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    struct tokenizer *tok = NULL;
    bool ok = false;
    if (gguf_open(path, &g, &err) != KVIK_OK) {
        fprintf(stderr, "kvik template: %s: %s\n", path, err.msg);
        return false;
    }
    struct gguf_str s;
    if (gguf_get_str(g, "tokenizer.chat_template", &s, &err) != KVIK_OK) {
        fprintf(stderr, "kvik template: %s has no chat template (tokenizer.chat_template)\n", path);
        goto done;
    }
    *tmpl = strndup(s.ptr, s.len);
    if (tokenizer_load(g, &tok, &err) == KVIK_OK) {
        int32_t b = tokenizer_bos(tok), e = tokenizer_eos(tok);
        const char *bt = b >= 0 ? tokenizer_token_text(tok, b) : NULL;
        const char *et = e >= 0 ? tokenizer_token_text(tok, e) : NULL;
        if (bt && !*bos) *bos = strdup(bt);
        if (et && !*eos) *eos = strdup(et);
    }
    ok = *tmpl != NULL;
done:
    tokenizer_free(tok);
    gguf_close(g);
    return ok;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *tfile = NULL, *mfile = NULL, *toolfile = NULL;
    char *bos = NULL, *eos = NULL;
    bool gen = true;
    long long now = (long long)time(NULL);
    struct strbuf extra = {0};
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--no-generation-prompt")) gen = false;
        else if (has && !strcmp(a, "-m")) model = argv[++i];
        else if (has && !strcmp(a, "--template")) tfile = argv[++i];
        else if (has && !strcmp(a, "--messages")) mfile = argv[++i];
        else if (has && !strcmp(a, "--tools")) toolfile = argv[++i];
        else if (has && !strcmp(a, "--bos")) {
            free(bos);
            bos = strdup(argv[++i]);
        } else if (has && !strcmp(a, "--eos")) {
            free(eos);
            eos = strdup(argv[++i]);
        } else if (has && !strcmp(a, "--now")) {
            long v;
            if (!cli_parse_long(argv[++i], 0, 253402300799L, &v)) {
                fprintf(stderr, "kvik template: --now: expected Unix seconds, got '%s'\n", argv[i]);
                goto out;
            }
            now = v;
        } else if (has && !strcmp(a, "--var")) {
            const char *v = argv[++i], *eq = strchr(v, '=');
            if (!eq || !valid_name(v, (size_t)(eq - v))) {
                fprintf(stderr, "kvik template: --var: expected NAME=JSON, got '%s'\n", v);
                goto out;
            }
            strbuf_puts(&extra, ",\"");
            strbuf_put(&extra, v, (size_t)(eq - v));
            strbuf_puts(&extra, "\":");
            strbuf_puts(&extra, eq + 1);
        } else {
            fprintf(stderr, "kvik template: unknown or incomplete argument '%s' (kvik template --help)\n", a);
            goto out;
        }
    }
    if (!model == !tfile || !mfile) {
        fprintf(stderr, "kvik template: give -m MODEL or --template FILE, and --messages FILE (kvik template --help)\n");
        goto out;
    }
    rc = 1;
    char *tmpl = NULL, *msgs = NULL, *tools = NULL;
    size_t tlen = 0, mlen = 0, toollen = 0;
    if (model) {
        char pbuf[4096];
        const char *path = cli_resolve_model(model, pbuf, sizeof pbuf);
        if (!cli_model_exists(path, model, "template") || !from_model(path, &tmpl, &bos, &eos)) goto out;
        tlen = strlen(tmpl);
    } else if (!(tmpl = cli_read_file(tfile, &tlen))) {
        fprintf(stderr, "kvik template: cannot read %s\n", tfile);
        goto out;
    }
    if (!(msgs = cli_read_file(mfile, &mlen))) {
        fprintf(stderr, "kvik template: cannot read %s\n", mfile);
        free(tmpl);
        goto out;
    }
    if (toolfile && !(tools = cli_read_file(toolfile, &toollen))) {
        fprintf(stderr, "kvik template: cannot read %s\n", toolfile);
        free(tmpl);
        free(msgs);
        goto out;
    }
    struct strbuf vars = {0};
    strbuf_puts(&vars, "{\"messages\":");
    strbuf_put(&vars, msgs, mlen);
    strbuf_puts(&vars, ",\"tools\":");
    if (tools) strbuf_put(&vars, tools, toollen);
    else strbuf_puts(&vars, "null");
    strbuf_puts(&vars, gen ? ",\"add_generation_prompt\":true" : ",\"add_generation_prompt\":false");
    if (extra.p) strbuf_put(&vars, extra.p, extra.n);
    strbuf_puts(&vars, "}");
    struct kvik_err err = {0};
    struct jinja_template *t = NULL;
    struct jinja_output o = {0};
    if (vars.oom) fprintf(stderr, "kvik template: out of memory\n");
    else if (jinja_compile(tmpl, tlen, model ? "chat_template" : tfile, &t, &err) != KVIK_OK)
        fprintf(stderr, "kvik template: %s\n", err.msg);
    else {
        struct jinja_input in = {vars.p, vars.n, bos, eos, now};
        if (jinja_render(t, &in, &o, &err) != KVIK_OK) fprintf(stderr, "kvik template: %s\n", err.msg);
        else {
            fwrite(o.text, 1, o.len, stdout);
            rc = fflush(stdout) ? 1 : 0;
        }
    }
    jinja_output_free(&o);
    jinja_free(t);
    free(vars.p);
    free(tmpl);
    free(msgs);
    free(tools);
out:
    free(extra.p);
    free(bos);
    free(eos);
    return rc;
}
