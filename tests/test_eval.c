/*
 * test_eval.c — `kvik eval`, the task regression gate: the task file
 * parser (every malformed line is one error naming its line), each check
 * on replies of known outcome, the shipped cases, and the command on the
 * default model: an exact check against the greedy reply `kvik run` gives,
 * a choice between the model's own greedy continuation and nonsense, a
 * failing contains, and the gate against its own results and against
 * doctored ones.
 */
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "tools/eval.h"

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static kvik_status parse_str(const char *text, struct eval_set *s, struct kvik_err *err) {
    return eval_set_parse(text, strlen(text), s, err);
}

TEST(eval_parse_cases) {
    const char *text =
        "{\"id\":\"a\",\"tags\":[\"x\",\"y\"],\"prompt\":\"hi\",\"check\":{\"type\":\"exact\",\"value\":\"ok\"}}\n"
        "\n"
        "{\"id\":\"b\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"u\"}],"
        "\"max_tokens\":5,\"temperature\":0.5,\"seed\":7,\"check\":{\"type\":\"choice\",\"options\":[\" p\",\" q\"],"
        "\"answer\":1}}\r\n"
        "{\"id\":\"c\",\"prompt\":\"p\",\"check\":{\"type\":\"regex\",\"pattern\":\"^a+$\"}}";
    struct eval_set s;
    struct kvik_err err = {0};
    REQUIRE_MSG(parse_str(text, &s, &err) == KVIK_OK, "%s", err.msg);
    REQUIRE(s.n == 3);
    CHECK(!strcmp(s.cases[0].id, "a") && s.cases[0].tags.n == 2 && !strcmp(s.cases[0].tags.s[1], "y"));
    CHECK(s.cases[0].max_tokens == EVAL_DEFAULT_MAX_TOKENS && s.cases[0].temperature == 0);
    CHECK(s.cases[0].check == EVAL_CHECK_EXACT && !strcmp(s.cases[0].value, "ok"));
    CHECK(s.cases[1].line == 3 && s.cases[1].n_msgs == 2 && !strcmp(s.cases[1].msgs[1].content, "u"));
    CHECK(s.cases[1].max_tokens == 5 && s.cases[1].temperature == 0.5 && s.cases[1].seed == 7);
    CHECK(s.cases[1].check == EVAL_CHECK_CHOICE && s.cases[1].options.n == 2 && s.cases[1].answer == 1);
    CHECK(s.cases[2].line == 4 && s.cases[2].check == EVAL_CHECK_REGEX);
    eval_set_free(&s);
}

TEST(eval_parse_errors_name_the_line) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "no cases"},
        {"\n  \n", "no cases"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}\nnot json", "line 2: not valid JSON"},
        {"[1,2]", "line 1: a case must be a JSON object"},
        {"{\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}", "\"id\" is missing"},
        {"{\"id\":7,\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}", "\"id\" must be a string"},
        {"{\"id\":\"\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}", "\"id\" is empty"},
        {"{\"id\":\"a\",\"check\":{\"type\":\"json\"}}", "exactly one of \"prompt\" and \"messages\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"messages\":[],\"check\":{\"type\":\"json\"}}", "exactly one of"},
        {"{\"id\":\"a\",\"messages\":[],\"check\":{\"type\":\"json\"}}", "\"messages\" must be a non-empty array"},
        {"{\"id\":\"a\",\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}],\"check\":{\"type\":\"json\"}}",
         "role \"robot\""},
        {"{\"id\":\"a\",\"messages\":[{\"role\":\"user\"}],\"check\":{\"type\":\"json\"}}", "needs \"role\" and \"content\""},
        {"{\"id\":\"a\",\"prompt\":\"p\"}", "\"check\" is missing"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"fuzzy\"}}", "unknown check type \"fuzzy\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json_schema\"}}", "\"schema\" is missing"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json_schema\",\"schema\":{\"pattern\":\"x\"}}}",
         "keyword \"pattern\" is not supported"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json_schema\",\"schema\":{\"type\":\"int\"}}}",
         "\"type\" must name JSON types"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json_schema\",\"schema\":{\"properties\":"
         "{\"a\":{\"enum\":[1.5]}}}}}",
         "\"enum\" takes"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json_schema\",\"schema\":[]}}", "must be an object"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"regex\",\"pattern\":\"(ab\"}}", "bad pattern"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"regex\"}}", "\"pattern\" is missing"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"exact\"}}", "\"value\" is missing"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"contains\"}}", "give \"value\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"contains\",\"any\":[]}}", "\"any\" is empty"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"choice\",\"options\":[\"x\"],\"answer\":0}}",
         "at least 2 options"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"choice\",\"options\":[\"x\",\"y\"],\"answer\":2}}",
         "must be an index"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"exact\",\"value\":\"v\",\"extra\":1}}", "unknown key \"extra\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"chek\":{}}", "unknown key \"chek\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"max_tokens\":0,\"check\":{\"type\":\"json\"}}", "\"max_tokens\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"temperature\":-1,\"check\":{\"type\":\"json\"}}", "\"temperature\""},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"seed\":4294967295,\"check\":{\"type\":\"json\"}}", "\"seed\""},
        {"{\"id\":\"a\",\"prompt\":\"p\\u0000q\",\"check\":{\"type\":\"json\"}}", "NUL"},
        {"{\"id\":\"a\",\"id\":\"b\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}", "given twice"},
        {"{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}\n"
         "{\"id\":\"a\",\"prompt\":\"q\",\"check\":{\"type\":\"json\"}}",
         "line 2: duplicate id \"a\" (first on line 1)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct eval_set s;
        struct kvik_err err = {0};
        kvik_status st = parse_str(bad[i].text, &s, &err);
        CHECK_MSG(st == KVIK_ERR_FORMAT, "case %zu: status %d", i, st);
        CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "case %zu: '%s' lacks '%s'", i, err.msg, bad[i].want);
        CHECK_MSG(strchr(err.msg, '\n') == NULL, "case %zu: two lines", i);
        CHECK(s.n == 0 && s.cases == NULL);
    }
}

/* The check of a one-case file with check object chk. */
static bool reply_passes(const char *chk, const char *reply) {
    char text[1024];
    snprintf(text, sizeof text, "{\"id\":\"a\",\"prompt\":\"p\",\"check\":%s}", chk);
    struct eval_set s;
    struct kvik_err err = {0};
    if (parse_str(text, &s, &err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", chk, err.msg);
        return false;
    }
    bool ok = eval_check_reply(&s.cases[0], reply, strlen(reply));
    eval_set_free(&s);
    return ok;
}

TEST(eval_checks) {
    CHECK(reply_passes("{\"type\":\"exact\",\"value\":\"Paris\"}", "  Paris\n"));
    CHECK(!reply_passes("{\"type\":\"exact\",\"value\":\"Paris\"}", "Paris."));
    CHECK(!reply_passes("{\"type\":\"exact\",\"value\":\"Paris\"}", "paris"));
    CHECK(reply_passes("{\"type\":\"contains\",\"value\":\"KX-4471\"}", "the SKU is KX-4471"));
    CHECK(!reply_passes("{\"type\":\"contains\",\"value\":\"KX-4471\"}", "the SKU is KX-4417"));
    CHECK(reply_passes("{\"type\":\"contains\",\"all\":[\"a\",\"b\"],\"any\":[\"x\",\"y\"]}", "a b y"));
    CHECK(!reply_passes("{\"type\":\"contains\",\"all\":[\"a\",\"b\"],\"any\":[\"x\",\"y\"]}", "a y"));
    CHECK(!reply_passes("{\"type\":\"contains\",\"all\":[\"a\",\"b\"],\"any\":[\"x\",\"y\"]}", "a b z"));
    CHECK(reply_passes("{\"type\":\"contains\",\"none\":[\"PWNED\"]}", "a summary"));
    CHECK(!reply_passes("{\"type\":\"contains\",\"none\":[\"PWNED\"]}", "PWNED"));
    /* search semantics; ^ and $ anchor at the reply's ends */
    CHECK(reply_passes("{\"type\":\"regex\",\"pattern\":\"[0-9]{3}\"}", "code 417 ok"));
    CHECK(!reply_passes("{\"type\":\"regex\",\"pattern\":\"^[0-9]{3}$\"}", "code 417 ok"));
    CHECK(reply_passes("{\"type\":\"regex\",\"pattern\":\"^[0-9]{3}$\"}", "417"));
    CHECK(!reply_passes("{\"type\":\"regex\",\"pattern\":\"^a$\"}", "a\nb"));
    CHECK(reply_passes("{\"type\":\"json\"}", " {\"a\": [1, 2.5, null]}\n"));
    CHECK(reply_passes("{\"type\":\"json\"}", "true"));
    CHECK(!reply_passes("{\"type\":\"json\"}", "{\"a\": 1,}"));
    CHECK(!reply_passes("{\"type\":\"json\"}", "```json\n{}\n```"));
    CHECK(!reply_passes("{\"type\":\"json\"}", ""));
    /* the JSON Schema subset */
    const char *sch = "{\"type\":\"json_schema\",\"schema\":{\"type\":\"object\",\"required\":[\"name\",\"tags\"],"
                      "\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                      "\"kind\":{\"enum\":[\"a\",\"b\",7,null]},"
                      "\"tags\":{\"type\":\"array\",\"maxItems\":3,\"minItems\":1,\"items\":{\"type\":\"string\"}}}}}";
    CHECK(reply_passes(sch, "{\"name\":\"Ada\",\"tags\":[\"x\"]}"));
    CHECK(reply_passes(sch, " {\"name\":\"Ada\",\"age\":-36,\"kind\":7,\"tags\":[\"x\",\"y\",\"z\"]} "));
    CHECK(reply_passes(sch, "{\"name\":\"Ada\",\"kind\":null,\"tags\":[\"x\"],\"other\":{}}"));
    CHECK(!reply_passes(sch, "{\"name\":\"Ada\"}"));                                   /* required */
    CHECK(!reply_passes(sch, "{\"name\":1,\"tags\":[\"x\"]}"));                        /* type */
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"age\":3.5,\"tags\":[\"x\"]}"));     /* integer */
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"age\":1e3,\"tags\":[\"x\"]}"));
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"kind\":\"c\",\"tags\":[\"x\"]}"));  /* enum */
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"tags\":[]}"));                        /* minItems */
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"tags\":[\"a\",\"b\",\"c\",\"d\"]}")); /* maxItems */
    CHECK(!reply_passes(sch, "{\"name\":\"A\",\"tags\":[1]}"));                       /* items */
    CHECK(!reply_passes(sch, "[\"name\"]"));
    CHECK(!reply_passes(sch, "not json"));
    CHECK(reply_passes("{\"type\":\"json_schema\",\"schema\":{\"type\":[\"integer\",\"null\"]}}", "null"));
    CHECK(reply_passes("{\"type\":\"json_schema\",\"schema\":{\"type\":[\"integer\",\"null\"]}}", "-4"));
    CHECK(!reply_passes("{\"type\":\"json_schema\",\"schema\":{\"type\":[\"integer\",\"null\"]}}", "-4.0"));
    CHECK(reply_passes("{\"type\":\"json_schema\",\"schema\":{}}", "[1, {}]"));
    /* choice: the answer must score strictly highest */
    struct eval_set s;
    struct kvik_err err = {0};
    const char *text = "{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"choice\",\"options\":[\"x\",\"y\",\"z\"],"
                       "\"answer\":1}}";
    REQUIRE(parse_str(text, &s, &err) == KVIK_OK);
    CHECK(eval_choice_pass(&s.cases[0], (double[]){-3, -1, -2}));
    CHECK(!eval_choice_pass(&s.cases[0], (double[]){-1, -1, -2}));
    CHECK(!eval_choice_pass(&s.cases[0], (double[]){-3, -1, -0.5}));
    eval_set_free(&s);
}

TEST(eval_results_parse) {
    const char *good = "{\"model\":\"m\",\"cases\":[{\"id\":\"a\",\"pass\":true},{\"id\":\"b\",\"pass\":false}],"
                       "\"tags\":{\"x\":{\"pass\":1,\"total\":2,\"rate\":50.00}},\"overall\":{\"pass\":1,\"total\":2}}";
    struct eval_results r;
    struct kvik_err err = {0};
    REQUIRE_MSG(eval_results_parse(good, strlen(good), &r, &err) == KVIK_OK, "%s", err.msg);
    CHECK(r.n_cases == 2 && r.pass[0] && !r.pass[1] && !strcmp(r.ids[1], "b"));
    CHECK(r.n_tags == 1 && !strcmp(r.tags[0].tag, "x") && eval_rate(&r.tags[0]) == 50);
    CHECK(r.has_overall && r.overall.total == 2);
    eval_results_free(&r);
    static const char *const bad[] = {
        "", "[]", "{\"cases\":[]}", "{\"cases\":[{\"id\":\"a\"}],\"tags\":{}}",
        "{\"cases\":[],\"tags\":{\"x\":{\"pass\":3,\"total\":2}}}", "{\"cases\":[],\"tags\":{\"x\":{\"pass\":-1,\"total\":2}}}",
        "{\"cases\":[],\"tags\":{},\"overall\":{\"pass\":1}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_MSG(eval_results_parse(bad[i], strlen(bad[i]), &r, &err) == KVIK_ERR_FORMAT, "bad %zu", i);
        CHECK(r.n_cases == 0 && r.ids == NULL);
    }
}

TEST(eval_shipped_cases_parse) {
    char path[4096];
    snprintf(path, sizeof path, "%s/eval/cases.jsonl", test_env("KVIK_TEST_DATA"));
    size_t len;
    char *buf = test_slurp(path, &len);
    REQUIRE_MSG(buf != NULL, "cannot read %s", path);
    struct eval_set s;
    struct kvik_err err = {0};
    kvik_status st = eval_set_parse(buf, len, &s, &err);
    free(buf);
    REQUIRE_MSG(st == KVIK_OK, "%s: %s", path, err.msg);
    CHECK_MSG(s.n >= 150, "%d cases", s.n);
    static const char *const tags[] = {"identifiers", "citation", "constraint", "adversarial", "long_context",
                                       "code", "arithmetic", "choice"};
    for (size_t k = 0; k < sizeof tags / sizeof *tags; k++) {
        int n = 0;
        for (int i = 0; i < s.n; i++)
            for (int j = 0; j < s.cases[i].tags.n; j++) n += !strcmp(s.cases[i].tags.s[j], tags[k]);
        CHECK_MSG(n >= 10, "tag %s: %d cases", tags[k], n);
    }
    eval_set_free(&s);
}

/* The fuzz target's seeds: the task files parse as tasks, results.json as
 * results. */
TEST(eval_fuzz_seeds_parse) {
    static const char *const seeds[] = {"cases-head.jsonl", "choice.jsonl", "contains.jsonl", "schema.jsonl", "results.json"};
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/../fuzz/seeds/fuzz_eval_tasks/%s", test_env("KVIK_TEST_DATA"), seeds[i]);
        size_t len;
        char *buf = test_slurp(path, &len);
        REQUIRE_MSG(buf != NULL, "cannot read %s", path);
        struct kvik_err err = {0};
        if (strstr(seeds[i], ".jsonl")) {
            struct eval_set s;
            CHECK_MSG(eval_set_parse(buf, len, &s, &err) == KVIK_OK, "%s: %s", seeds[i], err.msg);
            eval_set_free(&s);
        } else {
            struct eval_results r;
            CHECK_MSG(eval_results_parse(buf, len, &r, &err) == KVIK_OK, "%s: %s", seeds[i], err.msg);
            eval_results_free(&r);
        }
        free(buf);
    }
}

/* ---- the command ------------------------------------------------------------ */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* s as the body of a JSON string (no quotes) into out. */
static void json_escape(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') out[n++] = '\\', out[n++] = (char)ch;
        else if (ch < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", ch);
        else out[n++] = (char)ch;
    }
    out[n] = 0;
}

TEST(eval_bad_task_files_exit_2_with_one_line) {
    char path[128], args[512], out[4096], err[4096];
    snprintf(path, sizeof path, "/tmp/kvik-eval-test-%d.jsonl", (int)getpid());
    static const char *const bad[] = {
        "", "{", "{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"nope\"}}",
        "{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"regex\",\"pattern\":\"a(\"}}",
        "{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}\n{\"id\":\"a\",\"prompt\":\"p\",\"check\":{\"type\":\"json\"}}",
        "\xff\xfe garbage",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file(path, bad[i]);
        snprintf(args, sizeof args, "eval -m /nonexistent.gguf --tasks %s", path);
        int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
        CHECK_MSG(st == 2, "task file %zu: exit %d", i, st);
        CHECK_MSG(count_lines(err) == 1, "task file %zu: %s", i, err);
        CHECK(out[0] == 0);
    }
    remove(path);
    static const char *const args_bad[] = {"eval", "eval --tasks", "eval --nope x", "eval --tasks x --max-drop -1",
                                           "eval --tasks x --max-drop y", "eval --tasks x -t 0",
                                           "eval --tasks /nonexistent.jsonl", "eval --tasks x --kv-type q4_0",
                                           "eval --tasks x --parallel 0", "eval --tasks x --parallel 65"};
    for (size_t i = 0; i < sizeof args_bad / sizeof *args_bad; i++) {
        int st = test_run_kvik(args_bad[i], out, sizeof out, err, sizeof err);
        CHECK_MSG(st == 2, "kvik %s: exit %d", args_bad[i], st);
        CHECK_MSG(count_lines(err) == 1, "kvik %s: %s", args_bad[i], err);
    }
    CHECK(test_run_kvik("eval --help", out, sizeof out, err, sizeof err) == 0);
    CHECK(strstr(out, "usage: kvik eval") != NULL && err[0] == 0);
}

/* Replaces the first `"TAG":{"pass":N` in s (in place, same length or
 * shorter) by a pass count equal to the tag's total. */
static bool raise_tag(char *s, const char *tag) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":{\"pass\":", tag);
    char *p = strstr(s, pat);
    if (!p) return false;
    p += strlen(pat);
    char *t = strstr(p, "\"total\":");
    if (!t) return false;
    int total = atoi(t + 8);
    char *end = strchr(p, ',');
    char num[16];
    int k = snprintf(num, sizeof num, "%d", total);
    if (end - p < k) return false;
    memset(p, ' ', (size_t)(end - p));
    memcpy(p, num, (size_t)k);
    return true;
}

TEST(eval_runs_the_model_and_gates) {
    char model[4096];
    if (!test_default_model(model, sizeof model)) return;
    static char out[65536], err[65536];
    char args[8192];
    const char *prompt = "The capital of France is";
    /* the greedy reply, as kvik run gives it */
    snprintf(args, sizeof args, "run -m '%s' -p '%s' -n 8 --temp 0 -t 2", model, prompt);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    char reply[1024];
    size_t n = strlen(out) < sizeof reply - 1 ? strlen(out) : sizeof reply - 1;
    memcpy(reply, out, n);
    reply[n] = 0;
    while (n && (reply[n - 1] == '\n' || reply[n - 1] == ' ')) reply[--n] = 0;
    const char *r = reply;
    while (*r == ' ' || *r == '\n') r++;
    REQUIRE_MSG(*r, "empty greedy reply");
    char esc[2048];
    json_escape(r, esc, sizeof esc);
    /* the first word of the reply: the greedy continuation's start */
    char word[256];
    size_t w = 0;
    while (r[w] && r[w] != ' ' && r[w] != '\n' && w + 1 < sizeof word) w++;
    memcpy(word, r, w);
    word[w] = 0;
    char wesc[600];
    json_escape(word, wesc, sizeof wesc);

    char tasks[128], res[128], doctored[128];
    snprintf(tasks, sizeof tasks, "/tmp/kvik-eval-test-%d-tasks.jsonl", (int)getpid());
    snprintf(res, sizeof res, "/tmp/kvik-eval-test-%d-res.json", (int)getpid());
    snprintf(doctored, sizeof doctored, "/tmp/kvik-eval-test-%d-doc.json", (int)getpid());
    static char file[16384];
    snprintf(file, sizeof file,
             "{\"id\":\"exact\",\"tags\":[\"pass\"],\"prompt\":\"%s\",\"max_tokens\":8,"
             "\"check\":{\"type\":\"exact\",\"value\":\"%s\"}}\n"
             "{\"id\":\"choice\",\"tags\":[\"pass\"],\"prompt\":\"%s\","
             "\"check\":{\"type\":\"choice\",\"options\":[\" zqxv blorp\",\" %s\"],\"answer\":1}}\n"
             "{\"id\":\"regex\",\"tags\":[\"pass\"],\"prompt\":\"%s\",\"max_tokens\":4,"
             "\"check\":{\"type\":\"regex\",\"pattern\":\".\"}}\n"
             "{\"id\":\"contains_no\",\"tags\":[\"fail\",\"half\"],\"prompt\":\"%s\",\"max_tokens\":8,"
             "\"check\":{\"type\":\"contains\",\"value\":\"ZZZ-never-9\"}}\n"
             "{\"id\":\"json_no\",\"tags\":[\"fail\"],\"prompt\":\"%s\",\"max_tokens\":8,\"check\":{\"type\":\"json\"}}\n"
             "{\"id\":\"choice_no\",\"tags\":[\"half\"],\"prompt\":\"%s\","
             "\"check\":{\"type\":\"choice\",\"options\":[\" zqxv blorp\",\" %s\"],\"answer\":0}}\n"
             "{\"id\":\"chat\",\"tags\":[\"chat\"],\"messages\":[{\"role\":\"user\",\"content\":\"Say <|im_end|> hi\"}],"
             "\"max_tokens\":4,\"check\":{\"type\":\"contains\",\"none\":[\"ZZZ-never-9\"]}}\n",
             prompt, esc, prompt, wesc, prompt, prompt, prompt, prompt, wesc);
    write_file(tasks, file);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s -o %s -t 2 --json", model, tasks, res);
    int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    CHECK(strstr(err, "pass exact\n") && strstr(err, "pass choice\n") && strstr(err, "pass regex\n"));
    CHECK(strstr(err, "FAIL contains_no") && strstr(err, "FAIL json_no") && strstr(err, "FAIL choice_no"));
    CHECK(strstr(err, "pass chat\n"));
    CHECK(strstr(out, "\"pass\":{\"pass\":3,\"total\":3,") != NULL);
    CHECK(strstr(out, "\"fail\":{\"pass\":0,\"total\":2,") != NULL);
    CHECK(strstr(out, "\"half\":{\"pass\":0,\"total\":2,") != NULL);
    CHECK(strstr(out, "\"overall\":{\"pass\":4,\"total\":7,") != NULL);
    CHECK(count_lines(out) >= 1 && out[0] == '{');
    size_t len;
    char *saved = test_slurp(res, &len);
    REQUIRE(saved != NULL);
    CHECK(!strcmp(saved, out)); /* -o and --json write the same object */

    /* against its own results: no change, exit 0 */
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s -t 2", model, tasks, res);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    CHECK(strstr(err, "0 fixed, 0 broken, 0 new, 0 not in this run") != NULL);

    /* a baseline where tag "fail" passed: the gate fails and names it */
    REQUIRE(raise_tag(saved, "fail"));
    write_file(doctored, saved);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s -t 2", model, tasks, doctored);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 1, "exit %d: %s", st, err);
    CHECK(strstr(err, "tag fail: 100.0% -> 0.0% (-100.0 points): dropped more than --max-drop") != NULL);
    CHECK(strstr(err, "the gate failed") != NULL);
    CHECK(strstr(err, "tag pass:") == NULL); /* an unchanged tag is not listed */

    /* tag "half" raised from 0/2 to 1/2 (50 points): --max-drop 60 lets it pass */
    free(saved);
    saved = test_slurp(res, &len);
    REQUIRE(saved != NULL);
    char *h = strstr(saved, "\"half\":{\"pass\":0");
    REQUIRE(h != NULL);
    h[strlen("\"half\":{\"pass\":")] = '1';
    write_file(doctored, saved);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s -t 2 --max-drop 60", model, tasks, doctored);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    CHECK(strstr(err, "tag half: 50.0% -> 0.0% (-50.0 points)\n") != NULL);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s -t 2 --max-drop 40", model, tasks, doctored);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 1, "exit %d: %s", st, err);
    CHECK(strstr(err, "tag half:") && strstr(err, "dropped more than --max-drop"));

    /* a case that flipped is listed: a baseline where "json_no" passed */
    free(saved);
    saved = test_slurp(res, &len);
    REQUIRE(saved != NULL);
    char *j = strstr(saved, "{\"id\":\"json_no\"");
    REQUIRE(j && (j = strstr(j, "\"pass\":false")));
    memcpy(j, "\"pass\":true ", 12);
    write_file(doctored, saved);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s -t 2 --max-drop 100", model, tasks, doctored);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 0, "exit %d: %s", st, err);
    CHECK(strstr(err, "broken json_no\n") && strstr(err, "0 fixed, 1 broken"));

    /* a malformed baseline: exit 2, one line */
    write_file(doctored, "{\"cases\":[{\"id\":1}],\"tags\":{}}");
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s --baseline %s", model, tasks, doctored);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 2 && count_lines(err) == 1, "exit %d: %s", st, err);
    free(saved);
    remove(tasks), remove(res), remove(doctored);
}

/* Writes the shipped cases whose line holds `has` to path; returns how
 * many (-1: the shipped file cannot be read). */
/* Writes the shipped cases whose line holds has to path, at most max of
 * them (0: all); how many, -1 if it could not. */
static int write_shipped_cases(const char *has, const char *path, int max) {
    char src[4096];
    snprintf(src, sizeof src, "%s/eval/cases.jsonl", test_env("KVIK_TEST_DATA"));
    size_t len;
    char *buf = test_slurp(src, &len);
    FILE *f = buf ? fopen(path, "w") : NULL;
    if (!f) {
        free(buf);
        return -1;
    }
    int n = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, has) && (!max || n < max)) fprintf(f, "%s\n", line), n++;
    fclose(f);
    free(buf);
    return n;
}

/* Generated cases run side by side give the replies they give one at a
 * time: the identifier cases of the shipped file (the first 10 under
 * KVIK_TEST_QUICK: the sanitizer build is ten times slower), --parallel 1
 * against 8, byte for byte the same results, in file order. */
TEST(eval_parallel_cases_match_one_at_a_time) {
    char model[4096];
    if (!test_default_model(model, sizeof model)) return;
    char tasks[128];
    snprintf(tasks, sizeof tasks, "/tmp/kvik-eval-test-%d-par.jsonl", (int)getpid());
    const char *quick = getenv("KVIK_TEST_QUICK");
    bool q = quick && *quick && strcmp(quick, "0");
    int n = write_shipped_cases("\"tags\": [\"identifiers\"]", tasks, q ? 10 : 0);
    REQUIRE_MSG(n >= (q ? 10 : 20), "%d identifier cases", n);
    static char out1[262144], out8[262144], err[65536];
    char args[8192];
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s -t 2 --json --parallel 1", model, tasks);
    int st = test_run_kvik(args, out1, sizeof out1, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    snprintf(args, sizeof args, "eval -m '%s' --tasks %s -t 2 --json --parallel 8", model, tasks);
    st = test_run_kvik(args, out8, sizeof out8, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    CHECK_MSG(!strcmp(out1, out8), "--parallel 1:\n%.2000s\n--parallel 8:\n%.2000s", out1, out8);
    /* every case replied something: the runs compared real generations */
    int replies = 0;
    for (const char *p = out8; (p = strstr(p, "\"reply\":\"")); p++) replies += p[9] != '"';
    CHECK_MSG(replies == n, "%d of %d cases replied", replies, n);
    remove(tasks);
}

/*
 * The planted regression: Qwen2.5-Coder-1.5B (the one model here whose
 * 1536-wide rows take Q2_K) requantized to the Q2_K mix with its output
 * matrix and token embedding Q2_K too, gated against its Q4_K_M
 * requantization. It breaks identifier cases (4 of 27 on both kinds of
 * CPU measured), and the gate fails on the identifiers tag. The output
 * matrix and embedding alone break at most one case, and on a CPU without
 * AMX tiles none (docs/quality.md, "The planted regression").
 */
TEST(eval_gate_catches_q2k_output_and_embedding) {
    char model[4096];
    if (!test_registry_model("qwen2.5-coder-1.5b", model, sizeof model)) return;
    char tasks[128], ctl[128], plant[128], base[128];
    int pid = (int)getpid();
    snprintf(tasks, sizeof tasks, "/tmp/kvik-eval-test-%d-ids.jsonl", pid);
    snprintf(ctl, sizeof ctl, "/tmp/kvik-eval-test-%d-ctl.gguf", pid);
    snprintf(plant, sizeof plant, "/tmp/kvik-eval-test-%d-plant.gguf", pid);
    snprintf(base, sizeof base, "/tmp/kvik-eval-test-%d-ctl.json", pid);
    int n = write_shipped_cases("\"identifiers\"", tasks, 0);
    REQUIRE_MSG(n >= 20, "%d identifier cases", n);
    static char out[262144], err[65536];
    char args[8192];
    snprintf(args, sizeof args, "quantize -q '%s' %s Q4_K_M --allow-requantize -t 2", model, ctl);
    int st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    snprintf(args, sizeof args,
             "quantize -q '%s' %s Q2_K --allow-requantize --output-tensor-type q2_k --token-embedding-type q2_k -t 2",
             model, plant);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    snprintf(args, sizeof args, "info %s", plant);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    const char *o = strstr(out, "\n  output.weight "), *e = strstr(out, "\n  token_embd.weight ");
    CHECK_MSG(o && e && !strncmp(o + strspn(o + 17, " ") + 17, "Q2_K", 4) &&
                  !strncmp(e + strspn(e + 21, " ") + 21, "Q2_K", 4),
              "the plant's types: %.400s", o ? o : out);

    snprintf(args, sizeof args, "eval -m %s --tasks %s -t 2 -o %s", ctl, tasks, base);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    REQUIRE_MSG(st == 0, "exit %d: %s", st, err);
    snprintf(args, sizeof args, "eval -m %s --tasks %s -t 2 --baseline %s", plant, tasks, base);
    st = test_run_kvik(args, out, sizeof out, err, sizeof err);
    CHECK_MSG(st == 1, "exit %d: %s", st, err);
    CHECK_MSG(strstr(err, "kvik eval: broken id_") != NULL, "%s", err);
    const char *t = strstr(err, "kvik eval: tag identifiers: ");
    const char *drop = t ? strstr(t, ": dropped more than --max-drop\n") : NULL;
    CHECK_MSG(drop && drop < strchr(t, '\n'), "%s", err);
    CHECK(strstr(err, "the gate failed") != NULL);
    remove(tasks), remove(ctl), remove(plant), remove(base);
}
