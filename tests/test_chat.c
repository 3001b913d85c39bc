/*
 * test_chat.c — chat templates. The golden renderings in tests/data/chat/
 * come from Jinja2 running each family's reference template
 * (scripts/gen_chat_golden.py); here chat_detect must recognise each
 * reference text and chat_format_apply must reproduce Jinja2 byte for byte.
 */
#include <stdlib.h>

#include "gguf/gguf.h"
#include "test.h"
#include "tokenizer/chat.h"

/* Keep in step with CONVERSATIONS in scripts/gen_chat_golden.py. */
static const struct chat_msg conv_basic[] = {{"user", "Hello!"}};
static const struct chat_msg conv_system[] = {
    {"system", "You are a pirate."},
    {"user", "Hi"},
    {"assistant", "Arr, hello there!"},
    {"user", "What is 2+2?"},
};
static const struct chat_msg conv_spaces[] = {
    {"user", "  padded question \n"},
    {"assistant", "\tanswer with a trailing newline\n"},
    {"user", "Thanks\u00a0\u3000"},
};
static const struct chat_msg conv_unicode[] = {
    {"system", "R\u00e9ponds en fran\u00e7ais.\n"},
    {"user", "Gr\u00fc\u00dfe, \u4e16\u754c \U0001F642"},
};
static const struct chat_msg conv_multiturn[] = {
    {"user", "Write a Python function that adds two numbers."},
    {"assistant", "```python\ndef add(a, b):\n    return a + b\n```"},
    {"user", "Now in C."},
    {"assistant", "int add(int a, int b) { return a + b; }"},
    {"user", "\u8c22\u8c22! \u3069\u3046\u3082"},
};
static const struct chat_msg conv_markers[] = {
    {"system", "Quote <|im_start|>system and <start_of_turn>model as text."},
    {"user", "<|im_end|>\n<|im_start|>assistant\n<end_of_turn>\n<start_of_turn>model\n"
             "<bos><eos><|endoftext|><|eot_id|><|start_header_id|>user<|end_header_id|>"},
    {"assistant", " [INST] x [/INST]</s><s><|end|><|user|>"},
    {"user", "<start_of_image><|im_start|>"},
};
static const struct chat_msg conv_latesystem[] = {
    {"user", "Hi"},
    {"system", "Answer briefly."},
    {"user", "Why is the sky blue?"},
};

static const struct {
    const char *name;
    const struct chat_msg *msgs;
    size_t n;
} conversations[] = {
    {"basic", conv_basic, 1},         {"system", conv_system, 4},
    {"spaces", conv_spaces, 3},       {"unicode", conv_unicode, 2},
    {"multiturn", conv_multiturn, 5}, {"markers", conv_markers, 4},
    {"latesystem", conv_latesystem, 3},
};
enum { N_CONVERSATIONS = sizeof conversations / sizeof conversations[0] };

#define QWEN_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

static const struct {
    const char *name;           // file stem in tests/data/chat
    enum chat_template family;
    const char *default_system; // NULL: none
    const char *raises;         // the conversation the reference template raises on, or NULL
} references[] = {
    {"chatml", CHAT_TEMPLATE_CHATML, NULL, NULL},
    {"smollm2", CHAT_TEMPLATE_CHATML,
     "You are a helpful AI assistant named SmolLM, trained by Hugging Face", NULL},
    {"qwen2.5-coder-0.5b", CHAT_TEMPLATE_CHATML, QWEN_SYSTEM, NULL},
    {"qwen2.5-coder-1.5b", CHAT_TEMPLATE_CHATML, QWEN_SYSTEM, NULL},
    {"llama3", CHAT_TEMPLATE_LLAMA3, NULL, NULL},
    {"gemma", CHAT_TEMPLATE_GEMMA, NULL, NULL},
    {"mistral", CHAT_TEMPLATE_MISTRAL, NULL, "latesystem"},
    {"phi3", CHAT_TEMPLATE_PHI3, NULL, NULL},
};
enum { N_REFERENCES = sizeof references / sizeof references[0] };

/* Reads a whole file into a NUL-terminated malloc'ed buffer, or NULL. */
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = (n + 4096 + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

TEST(chat_matches_jinja_golden) {
    const char *dir = test_env("KVIK_TEST_DATA");
    if (!*dir) {
        test_skip("KVIK_TEST_DATA not set");
        return;
    }
    char path[1024], out[4096];
    int compared = 0, refused = 0;
    for (size_t r = 0; r < N_REFERENCES; r++) {
        snprintf(path, sizeof path, "%s/chat/%s.jinja", dir, references[r].name);
        char *text = read_text(path, NULL);
        CHECK_MSG(text != NULL, "missing %s", path);
        if (!text) continue;
        struct chat_format fmt;
        struct kvik_err err = {0};
        kvik_status st = chat_detect(text, &fmt, &err);
        free(text);
        CHECK_MSG(st == KVIK_OK, "%s: %s", references[r].name, err.msg);
        if (st != KVIK_OK) continue;
        CHECK_STR(chat_template_name(fmt.tmpl), chat_template_name(references[r].family));
        CHECK_MSG(!fmt.approximate, "%s", references[r].name);
        if (references[r].default_system) CHECK_STR(fmt.default_system, references[r].default_system);
        else CHECK(fmt.default_system == NULL);
        for (size_t c = 0; c < N_CONVERSATIONS; c++) {
            if (references[r].raises && !strcmp(references[r].raises, conversations[c].name)) {
                st = chat_format_apply(&fmt, conversations[c].msgs, conversations[c].n, true, out,
                                       sizeof out, NULL, &err);
                CHECK_MSG(st == KVIK_ERR_INVALID_ARG, "%s accepts %s", references[r].name,
                          conversations[c].name);
                refused++;
                continue;
            }
            for (int gen = 1; gen >= 0; gen--) {
                snprintf(path, sizeof path, "%s/chat/%s.%s.%s.txt", dir, references[r].name,
                         conversations[c].name, gen ? "gen" : "nogen");
                size_t want_len = 0;
                char *want = read_text(path, &want_len);
                CHECK_MSG(want != NULL, "missing %s", path);
                if (!want) continue;
                size_t needed = 0;
                st = chat_format_apply(&fmt, conversations[c].msgs, conversations[c].n, gen, out,
                                       sizeof out, &needed, &err);
                CHECK_MSG(st == KVIK_OK, "%s: %s", path, err.msg);
                CHECK_MSG(st == KVIK_OK && needed == want_len && memcmp(out, want, want_len) == 0,
                          "%s:\n--- want ---\n%s\n--- got ---\n%s", path, want, out);
                free(want);
                compared++;
            }
        }
        chat_format_free(&fmt);
    }
    CHECK_EQ_INT(compared, (N_REFERENCES * N_CONVERSATIONS - 1) * 2);
    CHECK_EQ_INT(refused, 1);
}

TEST(chat_smollm2_default_system_from_model) {
    /* the real model's template, when the model is cached */
    char path[4096];
    if (!test_default_model(path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    struct gguf_str s = {0};
    if (gguf_get_str(g, "tokenizer.chat_template", &s, &err) != KVIK_OK) {
        CHECK_MSG(false, "%s", err.msg);
        gguf_close(g);
        return;
    }
    char *text = malloc(s.len + 1);
    if (!text) {
        gguf_close(g);
        REQUIRE(false);
    }
    memcpy(text, s.ptr, s.len);
    text[s.len] = 0;
    gguf_close(g);
    struct chat_format fmt;
    CHECK_EQ_INT(chat_detect(text, &fmt, &err), KVIK_OK);
    free(text);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_CHATML);
    CHECK_STR(fmt.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    chat_format_free(&fmt);
}

TEST(chat_template_names) {
    struct kvik_err err = {0};
    for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++) {
        enum chat_template back = CHAT_TEMPLATE_COUNT;
        CHECK_EQ_INT(chat_template_from_name(chat_template_name((enum chat_template)t), &back, &err),
                     KVIK_OK);
        CHECK_EQ_INT(back, t);
    }
    enum chat_template x;
    CHECK_EQ_INT(chat_template_from_name("vicuna", &x, &err), KVIK_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "vicuna") != NULL);
    CHECK_EQ_INT(chat_template_from_name("ChatML", &x, &err), KVIK_ERR_UNSUPPORTED);
    CHECK_STR(chat_template_name(CHAT_TEMPLATE_COUNT), "?");
}

TEST(chat_detect_variants) {
    struct kvik_err err = {0};
    struct chat_format fmt;

    /* Qwen2.5 style: "\n" escaped inside the literal, default system in the
     * else branch, an earlier literal that closes before <|im_end|> */
    const char *qwen =
        "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- endif %}"
        "{%- if messages[0]['role'] == 'system' %}"
        "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
        "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
        "You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
        "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
        "message.content + '<|im_end|>' + '\\n' }}{%- endfor %}";
    CHECK_EQ_INT(chat_detect(qwen, &fmt, &err), KVIK_OK);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_CHATML);
    CHECK_STR(fmt.default_system,
              "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    chat_format_free(&fmt);
    CHECK(fmt.default_system == NULL);

    /* Llama 3.1: recognised, flagged approximate (date header, tools) */
    const char *l31 = "{{- bos_token }}{%- if not tools is defined %}{%- set tools = none %}"
                      "{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
                      "{{- \"Cutting Knowledge Date: December 2023\\n\" }}";
    CHECK_EQ_INT(chat_detect(l31, &fmt, &err), KVIK_OK);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_LLAMA3);
    CHECK(fmt.approximate);
    chat_format_free(&fmt);

    /* refused rather than guessed */
    const char *refused[] = {
        "",
        "{{ messages[0]['content'] }}",
        "{% for m in messages %}{{'<|im_start|>' + m['role'] + '<|im_sep|>'}}{% endfor %}",
        "{{ '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}",
        "{{ '[INST]' + message['content'] + '[/INST]' }}",
        "{{ '[SYSTEM_PROMPT]' }}{{ ' [INST] ' }}",
        "{{ '<|user|>' + message['content'] }}", /* no <|end|>: not phi3 */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err.msg[0] = 0;
        CHECK_MSG(chat_detect(refused[i], &fmt, &err) == KVIK_ERR_UNSUPPORTED, "accepted: %s",
                  refused[i]);
        CHECK(err.msg[0] != 0);
        chat_format_free(&fmt);
    }
    CHECK_EQ_INT(chat_detect(NULL, &fmt, &err), KVIK_ERR_INVALID_ARG);
}

TEST(chat_rejects_bad_conversations) {
    struct kvik_err err = {0};
    char out[256];
    size_t needed = 99;
    const struct chat_msg tool[] = {{"user", "hi"}, {"tool", "{}"}};
    for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++) {
        CHECK_EQ_INT(chat_apply((enum chat_template)t, tool, 2, true, out, sizeof out, &needed, &err),
                     KVIK_ERR_INVALID_ARG);
        CHECK(strstr(err.msg, "tool") != NULL);
        CHECK_EQ_INT(needed, 0);
    }
    const struct chat_msg null_content[] = {{"user", NULL}};
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_CHATML, null_content, 1, true, out, sizeof out, NULL, &err),
                 KVIK_ERR_INVALID_ARG);

    const struct chat_msg two_users[] = {{"user", "a"}, {"user", "b"}};
    const struct chat_msg assistant_first[] = {{"assistant", "a"}, {"user", "b"}};
    const struct chat_msg late_system[] = {{"user", "a"}, {"system", "s"}};
    const struct chat_msg system_in_user_place[] = {{"user", "a"}, {"assistant", "b"}, {"system", "s"}};
    const enum chat_template strict[] = {CHAT_TEMPLATE_GEMMA, CHAT_TEMPLATE_MISTRAL};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(chat_apply(strict[i], two_users, 2, true, out, sizeof out, NULL, &err),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(chat_apply(strict[i], assistant_first, 2, true, out, sizeof out, NULL, &err),
                     KVIK_ERR_INVALID_ARG);
        CHECK_EQ_INT(chat_apply(strict[i], system_in_user_place, 3, true, out, sizeof out, NULL, &err),
                     KVIK_ERR_INVALID_ARG);
    }
    /* Mistral v0.1 raises on any later system message; Gemma 3's template
     * renders one in a place where user is not expected */
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_MISTRAL, late_system, 2, true, out, sizeof out, NULL, &err),
                 KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_GEMMA, late_system, 2, false, out, sizeof out, NULL, &err),
                 KVIK_OK);
    CHECK_STR(out, "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>system\ns<end_of_turn>\n");
    /* the free-form families accept any order */
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_CHATML, two_users, 2, true, out, sizeof out, NULL, &err),
                 KVIK_OK);
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_COUNT, two_users, 2, true, out, sizeof out, NULL, &err),
                 KVIK_ERR_INVALID_ARG);
}

TEST(chat_buffer_sizes) {
    struct kvik_err err = {0};
    const struct chat_msg m[] = {{"user", "Hello!"}};
    const char *want = "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n";
    size_t len = strlen(want), needed = 0;

    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_CHATML, m, 1, true, NULL, 0, &needed, &err), KVIK_OK);
    CHECK_EQ_INT(needed, len);

    char buf[128];
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_CHATML, m, 1, true, buf, len + 1, &needed, &err), KVIK_OK);
    CHECK_STR(buf, want);

    memset(buf, 'x', sizeof buf);
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_CHATML, m, 1, true, buf, len, &needed, &err),
                 KVIK_ERR_INVALID_ARG);
    CHECK_EQ_INT(needed, len);
    CHECK_EQ_INT(strlen(buf), len - 1); /* truncated, still terminated */
    CHECK(memcmp(buf, want, len - 1) == 0);
    CHECK(strstr(err.msg, "too small") != NULL);

    /* no messages: only the generation prompt */
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_GEMMA, NULL, 0, true, buf, sizeof buf, &needed, &err),
                 KVIK_OK);
    CHECK_STR(buf, "<start_of_turn>model\n");
}

TEST(chat_long_conversation) {
    /* more messages than the renderer keeps on its stack */
    enum { N = 41 };
    struct chat_msg msgs[N];
    msgs[0] = (struct chat_msg){"system", "sys"};
    for (int i = 1; i < N; i++)
        msgs[i] = (struct chat_msg){i % 2 ? "user" : "assistant", i % 2 ? "q" : "a"};
    struct kvik_err err = {0};
    size_t needed = 0;
    for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++) {
        CHECK_EQ_INT(chat_apply((enum chat_template)t, msgs, N, true, NULL, 0, &needed, &err),
                     KVIK_OK);
        CHECK(needed > 20 * N / 2);
    }
    char *buf = malloc(needed + 1);
    REQUIRE(buf);
    CHECK_EQ_INT(chat_apply(CHAT_TEMPLATE_PHI3, msgs, N, false, buf, needed + 1, NULL, &err),
                 KVIK_OK);
    CHECK(strncmp(buf, "<|system|>\nsys<|end|>\n<|user|>\nq<|end|>\n", 38) == 0);
    CHECK(strcmp(buf + strlen(buf) - 13, "<|endoftext|>") == 0);
    free(buf);
}

/* A registry model's own template: chat_detect_gguf recognises it
 * exactly, and it is the text the golden renderings came from. */
static void check_model_template(const char *file, const char *stem) {
    char path[4096];
    if (!test_cached_model(file, path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    struct chat_format fmt;
    CHECK_EQ_INT(chat_detect_gguf(g, &fmt, &err), KVIK_OK);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_CHATML);
    CHECK(!fmt.approximate);
    CHECK(!fmt.by_architecture);
    CHECK_STR(fmt.default_system ? fmt.default_system : "", QWEN_SYSTEM);
    chat_format_free(&fmt);
    struct gguf_str s = {0};
    CHECK_EQ_INT(gguf_get_str(g, "tokenizer.chat_template", &s, &err), KVIK_OK);
    char golden[1024];
    snprintf(golden, sizeof golden, "%s/chat/%s.jinja", test_env("KVIK_TEST_DATA"), stem);
    size_t len = 0;
    char *want = read_text(golden, &len);
    CHECK_MSG(want != NULL, "missing %s", golden);
    CHECK_MSG(want && len == s.len && memcmp(want, s.ptr, len) == 0, "%s differs from %s", golden, file);
    free(want);
    gguf_close(g);
}

TEST(chat_qwen25_coder_05b_template_from_model) {
    check_model_template("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b");
}

TEST(chat_qwen25_coder_15b_template_from_model) {
    check_model_template("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b");
}

TEST(chat_gemma3_from_architecture) {
    /* gemma-3-270m has no tokenizer.chat_template: its architecture picks gemma */
    char path[4096];
    if (!test_cached_model("gemma-3-270m-q4_k_m.gguf", path, sizeof path)) return;
    struct kvik_err err = {0};
    struct gguf *g = NULL;
    REQUIRE(gguf_open(path, &g, &err) == KVIK_OK);
    CHECK(gguf_find_key(g, "tokenizer.chat_template") < 0);
    struct chat_format fmt;
    CHECK_EQ_INT(chat_detect_gguf(g, &fmt, &err), KVIK_OK);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_GEMMA);
    CHECK(fmt.by_architecture);
    CHECK(!fmt.approximate);
    chat_format_free(&fmt);
    gguf_close(g);
}

/* A GGUF in memory with the given architecture and, when tmpl is not
 * NULL, tokenizer.chat_template (as a u32 when as_number). */
static kvik_status detect_in_memory(const char *arch, const char *tmpl, bool as_number,
                                    struct chat_format *fmt, struct kvik_err *err) {
    struct gguf_writer *w = gguf_writer_new();
    void *buf = NULL;
    size_t size = 0;
    struct gguf *g = NULL;
    kvik_status st = w ? KVIK_OK : KVIK_ERR_NOMEM;
    if (!st && arch) st = gguf_writer_set_str(w, "general.architecture", arch);
    if (!st && tmpl)
        st = as_number ? gguf_writer_set_u32(w, "tokenizer.chat_template", 7)
                       : gguf_writer_set_str(w, "tokenizer.chat_template", tmpl);
    if (!st) st = gguf_writer_write_memory(w, &buf, &size, err);
    if (!st) st = gguf_open_memory(buf, size, &g, err);
    if (!st) st = chat_detect_gguf(g, fmt, err);
    gguf_close(g);
    free(buf);
    gguf_writer_free(w);
    return st;
}

TEST(chat_detect_gguf_fallbacks) {
    struct kvik_err err = {0};
    struct chat_format fmt;
    const char *gemmas[] = {"gemma", "gemma2", "gemma3"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(detect_in_memory(gemmas[i], NULL, false, &fmt, &err), KVIK_OK);
        CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_GEMMA);
        CHECK(fmt.by_architecture);
        chat_format_free(&fmt);
    }
    /* no template and an architecture of no single family */
    CHECK_EQ_INT(detect_in_memory("llama", NULL, false, &fmt, &err), KVIK_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "no chat template") != NULL);
    CHECK_EQ_INT(detect_in_memory("gemma3x", NULL, false, &fmt, &err), KVIK_ERR_NOT_FOUND);
    CHECK_EQ_INT(detect_in_memory(NULL, NULL, false, &fmt, &err), KVIK_ERR_NOT_FOUND);
    /* a template wins over the architecture, and is never guessed around */
    CHECK_EQ_INT(detect_in_memory("gemma3", "{{'<|im_start|>' + m + '<|im_end|>'}}", false, &fmt, &err),
                 KVIK_OK);
    CHECK_EQ_INT(fmt.tmpl, CHAT_TEMPLATE_CHATML);
    CHECK(!fmt.by_architecture && fmt.jinja != NULL);
    chat_format_free(&fmt);
    CHECK(fmt.jinja == NULL);
    /* a template no family matches is run by the Jinja engine; one that
     * does not compile falls back to the recogniser, which refuses it */
    CHECK_EQ_INT(detect_in_memory("gemma3", "{{ unknown }}", false, &fmt, &err), KVIK_OK);
    CHECK(fmt.jinja != NULL && !fmt.by_architecture);
    chat_format_free(&fmt);
    CHECK_EQ_INT(detect_in_memory("gemma3", "{% if %}", false, &fmt, &err), KVIK_ERR_UNSUPPORTED);
    CHECK_EQ_INT(detect_in_memory("gemma3", "x", true, &fmt, &err), KVIK_ERR_FORMAT);
    CHECK_EQ_INT(chat_detect_gguf(NULL, &fmt, &err), KVIK_ERR_INVALID_ARG);
}

TEST(chat_detect_llama_cpp_templates) {
    /* real models' templates from llama.cpp's models/templates/ */
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/Qwen-Qwen2.5-7B-Instruct.jinja", test_env("KVIK_FIXTURES"));
    FILE *f = fopen(path, "rb");
    if (!f) {
        test_skip("template fixtures not found (KVIK_FIXTURES)");
        return;
    }
    fclose(f);
    static const struct {
        const char *file;
        enum chat_template family;
        bool approximate;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", CHAT_TEMPLATE_CHATML, false},
        {"Qwen-QwQ-32B.jinja", CHAT_TEMPLATE_CHATML, true},    /* <think> */
        {"Qwen-Qwen3-0.6B.jinja", CHAT_TEMPLATE_CHATML, true}, /* <think> */
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", CHAT_TEMPLATE_CHATML, true},
        {"google-gemma-2-2b-it.jinja", CHAT_TEMPLATE_GEMMA, false},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", CHAT_TEMPLATE_LLAMA3, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/templates/%s", test_env("KVIK_FIXTURES"), cases[i].file);
        char *text = read_text(path, NULL);
        CHECK_MSG(text != NULL, "missing %s", path);
        if (!text) continue;
        struct chat_format fmt;
        struct kvik_err err = {0};
        kvik_status st = chat_detect(text, &fmt, &err);
        free(text);
        CHECK_MSG(st == KVIK_OK, "%s: %s", cases[i].file, err.msg);
        if (st) continue;
        CHECK_MSG(fmt.tmpl == cases[i].family && fmt.approximate == cases[i].approximate,
                  "%s: %s, approximate %d", cases[i].file, chat_template_name(fmt.tmpl), fmt.approximate);
        if (i == 0) CHECK_STR(fmt.default_system ? fmt.default_system : "", QWEN_SYSTEM);
        chat_format_free(&fmt);
    }
}
