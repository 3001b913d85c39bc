/*
 * test_cli.c — the kvik command's argument handling: bad arguments give one
 * line on stderr and exit status 2; --help and --version print to stdout and
 * exit 0; `bench kernels --json` prints one JSON object with a row for each
 * requested type; `bench offline --json` reports what it measured.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "tools/bench.h"

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

TEST(cli_bad_arguments_exit_2_with_one_line) {
    static const char *const bad[] = {
        "", "frobnicate", "bench", "bench kernels -t 0", "bench kernels -t x",
        "bench kernels --types q9_9", "bench kernels --isa sse9", "bench kernels --reps 0",
        "bench kernels --nope", "bench kernels --tokens 0", "bench kernels --tokens 5000", "bench kernels --tokens",
        "bench kernels --rows 8", "bench kernels --rows x", "bench kernels --cols 33", "bench kernels --ctx 0",
        "bench kernels --cols 576 --types q4_k", "info", "info --nope x", "run", "run -p", "run -p x -f y",
        "run -p x -n -1", "run -p x -t 0", "run -p x --top-p 2", "run -p x --temp nan", "run --bogus",
        "bench offline -r 0", "bench offline -p x", "bench offline -p 0 -n 0", "bench offline --nope",
        "bench offline -t", "bench engine -b 0", "bench engine -b 1,,2", "bench engine -b x", "bench engine -n 0",
        "bench engine --nope", "bench engine --kv-type q4_0", "bench engine --kv-type", "run -p x --kv-type q4_0",
        "run -p x -c 0",
    };
    char out[4096], err[4096];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int st = test_run_kvik(bad[i], out, sizeof out, err, sizeof err);
        CHECK_MSG(st == 2, "kvik %s: exit %d, want 2", bad[i], st);
        if (bad[i][0]) /* bare `kvik` prints its usage */
            CHECK_MSG(count_lines(err) == 1, "kvik %s: stderr has %d lines: %s", bad[i], count_lines(err), err);
        CHECK_MSG(out[0] == 0, "kvik %s: wrote to stdout", bad[i]);
    }
}

TEST(cli_run_errors_are_one_line) {
    char out[4096], err[4096];
    /* a missing model, a missing prompt file: exit 1, one line */
    CHECK_EQ_INT(test_run_kvik("run -m /nonexistent.gguf -p hi", out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(count_lines(err), 1);
    CHECK(strstr(err, "not found") != NULL);
    CHECK_EQ_INT(test_run_kvik("run -m /nonexistent.gguf -f /nonexistent.txt", out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(count_lines(err), 1);
    /* a vocabulary-only file is not a model */
    char args[4200];
    snprintf(args, sizeof args, "run -m '%s/vocab/ggml-vocab-gpt-2.gguf' -p hi", test_env("KVIK_FIXTURES"));
    CHECK_EQ_INT(test_run_kvik(args, out, sizeof out, err, sizeof err), 1);
    CHECK_EQ_INT(count_lines(err), 1);
}

TEST(cli_help_and_version) {
    char out[4096], err[4096];
    CHECK_EQ_INT(test_run_kvik("--help", out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "usage: kvik") != NULL);
    CHECK_EQ_INT(test_run_kvik("--version", out, sizeof out, err, sizeof err), 0);
    CHECK(strncmp(out, "kvik 0.", 7) == 0);
    CHECK_EQ_INT(test_run_kvik("bench --help", out, sizeof out, err, sizeof err), 0);
    CHECK(strstr(out, "kvik bench kernels") != NULL);
}

TEST(cli_bench_json_has_requested_types) {
    char out[8192], err[4096];
    int st = test_run_kvik("bench kernels --quick --reps 1 -t 1 --types q4_0,q4_k --json", out, sizeof out, err,
                      sizeof err);
    REQUIRE(st == 0);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK(strstr(out, "\"read_bandwidth_gbs\":") != NULL);
    const char *mv = strstr(out, "\"matvec\":[");
    const char *mm = strstr(out, "\"matmul\":[");
    REQUIRE(mv && mm && mv < mm);
    /* each section lists exactly the two requested types, in order */
    const char *a = strstr(mv, "\"type\":\"Q4_0\""), *b = strstr(mv, "\"type\":\"Q4_K\"");
    CHECK(a && b && a < b && b < mm);
    CHECK(strstr(mm, "\"type\":\"Q4_0\"") && strstr(mm, "\"type\":\"Q4_K\""));
    /* (the attention section after them lists the cache types) */
    const char *q8 = strstr(out, "\"type\":\"Q8_0\""), *at = strstr(out, "\"attn\":[");
    CHECK(at && (q8 == NULL || q8 > at));
}

/* JSON number after "key": in s, or NAN. */
static double json_num(const char *s, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(s, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* --tokens sets the mat-mat's activation rows (16: a decode step's shape),
 * --rows and --cols its weight shape (a model's small matrices, or weights
 * larger than the caches). */
TEST(cli_bench_kernels_shape) {
    char out[8192], err[4096];
    REQUIRE(test_run_kvik("bench kernels --quick --reps 1 -t 1 --types q4_1,q8_0 --tokens 16 --rows 48 --cols 576 --json",
                          out, sizeof out, err, sizeof err) == 0);
    const char *mm = strstr(out, "\"matmul\":[");
    REQUIRE(mm != NULL);
    CHECK(json_num(mm, "rows") == 48 && json_num(mm, "cols") == 576 && json_num(mm, "tokens") == 16);
    CHECK(json_num(mm, "seconds") > 0);
}

/* The attention section: F16 and Q8_0 caches at --ctx positions, each
 * with its time per position in L2 and from memory. */
TEST(cli_bench_kernels_attention) {
    char out[8192], err[4096];
    REQUIRE(test_run_kvik("bench kernels --quick --reps 1 -t 2 --types q8_0 --ctx 40 --json", out, sizeof out, err,
                          sizeof err) == 0);
    const char *at = strstr(out, "\"attn\":[");
    REQUIRE(at != NULL);
    const char *f16 = strstr(at, "\"type\":\"F16\""), *q8 = strstr(at, "\"type\":\"Q8_0\"");
    REQUIRE(f16 && q8 && f16 < q8);
    for (const char *e = f16; e; e = e == f16 ? q8 : NULL) {
        CHECK(json_num(e, "ctx") == 40 && json_num(e, "head_dim") == 64 && json_num(e, "group") == 3);
        CHECK(json_num(e, "cache_ns") > 0 && json_num(e, "memory_ns") > 0 && json_num(e, "memory_gbs") > 0);
    }
}

TEST(cli_bench_offline_json) {
    char path[4096];
    const char *model = test_default_model(path, sizeof path);
    if (!model) return;
    char out[8192], err[4096], args[4200];
    snprintf(args, sizeof args, "bench offline -m '%s' -p 24 -n 5 -r 3 -t 1 --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK(strstr(out, "\"model\":\"SmolLM2-135M-Instruct.Q4_1.gguf\"") != NULL);
    CHECK(json_num(out, "threads") == 1 && json_num(out, "n_prompt") == 24 && json_num(out, "n_gen") == 5);
    CHECK(json_num(out, "reps") == 3);
    double pp = json_num(out, "pp_tok_s"), tg = json_num(out, "tg_tok_s");
    CHECK(pp > 0 && json_num(out, "pp_min") <= pp && pp <= json_num(out, "pp_max"));
    CHECK(tg > 0 && json_num(out, "tg_min") <= tg && tg <= json_num(out, "tg_max"));
    /* GB/s is the decode rate times the bytes one step reads */
    double gbs = json_num(out, "tg_gbs"), bytes = json_num(out, "decode_bytes");
    CHECK(fabs(gbs - tg * bytes / 1e9) <= 0.01 * gbs + 0.002);
    /* -p 0 skips the prefill test */
    snprintf(args, sizeof args, "bench offline -m '%s' -p 0 -n 2 -r 1 -t 1 --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK(json_num(out, "pp_tok_s") == 0 && json_num(out, "tg_tok_s") > 0);
}

TEST(cli_bench_engine_json) {
    char path[4096];
    const char *model = test_default_model(path, sizeof path);
    if (!model) return;
    char out[8192], err[4096], args[4200];
    snprintf(args, sizeof args, "bench engine -m '%s' -b 1,3 -p 4 -n 3 -t 1 --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK_EQ_INT(count_lines(out), 2);
    const char *second = strchr(out, '\n');
    REQUIRE(second);
    CHECK(json_num(out, "batch") == 1 && json_num(second, "batch") == 3);
    CHECK(json_num(out, "n_prompt") == 4 && json_num(out, "n_gen") == 3);
    CHECK(json_num(out, "prefill_tok_s") > 0 && json_num(second, "decode_tok_s") > 0);
    /* one prefill step, then a decode step per further token, at any batch */
    CHECK_MSG(json_num(out, "steps") == 3 && json_num(second, "steps") >= 3, "%s", out);
    CHECK(strstr(out, "\"kv_type\":\"F16\"") != NULL);
    /* --kv-type: the cache's rows (a Q8_0 cache's attention reads integers) */
    snprintf(args, sizeof args, "bench engine -m '%s' -b 2 -p 4 -n 3 -t 1 --kv-type q8_0 --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK(strstr(out, "\"kv_type\":\"Q8_0\"") != NULL && json_num(out, "decode_tok_s") > 0);
}

/* --phases: the forward pass's phases of the batch-B decode steps, each
 * timed, together no longer than the steps they are part of. */
TEST(cli_bench_engine_phases) {
    char path[4096];
    const char *model = test_default_model(path, sizeof path);
    if (!model) return;
    char out[8192], err[4096], args[4200];
    snprintf(args, sizeof args, "bench engine -m '%s' -b 2 -p 4 -n 5 -t 1 --phases --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    /* four decode steps a sequence, of both together when both prompts
     * were admitted in one step (the second may arrive a step later) */
    double steps = json_num(out, "phase_steps");
    CHECK_MSG(steps >= 1 && steps <= 4, "%s", out);
    const char *ph = strstr(out, "\"phases_ms\":{");
    REQUIRE(ph != NULL);
    static const char *const names[] = {"setup", "qkv", "attention", "wo", "gate_up", "glu", "down", "output"};
    double sum = 0;
    for (int i = 0; i < 8; i++) {
        double v = json_num(ph, names[i]);
        CHECK_MSG(v >= 0, "%s: %g", names[i], v);
        sum += v;
    }
    CHECK(json_num(ph, "qkv") > 0 && json_num(ph, "attention") > 0 && json_num(ph, "output") > 0);
    double step_ms = 2.0 / json_num(out, "decode_tok_s") * 1e3;
    CHECK_MSG(sum > 0 && sum <= 1.2 * step_ms, "phases %.3f ms against a %.3f ms step", sum, step_ms);
    snprintf(args, sizeof args, "bench engine -m '%s' -b 1 -p 4 -n 2 -t 1 --json", model);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK(strstr(out, "phases_ms") == NULL);
}

/* The recorded read bandwidth that `kvik run` compares decode speed with. */
TEST(cli_bandwidth_record_and_recall) {
    char dir[] = "/tmp/kvik-bw-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char sub[64], file[96];
    snprintf(sub, sizeof sub, "%s/cache", dir); /* created on the first record */
    snprintf(file, sizeof file, "%s/bandwidth", sub);
    const char *old = getenv("KVIK_CACHE");
    char *saved = old ? strdup(old) : NULL;
    setenv("KVIK_CACHE", sub, 1);
    int64_t when = -1;
    CHECK(bench_bandwidth_recall(2, &when) == 0 && when == 0); /* nothing yet */
    bench_bandwidth_record(21.25, 2);
    CHECK(fabs(bench_bandwidth_recall(2, &when) - 21.25) < 1e-9);
    CHECK(when > 1700000000);
    CHECK(bench_bandwidth_recall(1, NULL) == 0); /* measured with another thread count */
    bench_bandwidth_record(-3, 2);               /* nonsense is not recorded */
    CHECK(fabs(bench_bandwidth_recall(2, NULL) - 21.25) < 1e-9);
    FILE *f = fopen(file, "w");
    REQUIRE(f != NULL);
    fputs("garbage\n", f);
    fclose(f);
    CHECK(bench_bandwidth_recall(2, NULL) == 0);
    remove(file);
    rmdir(sub);
    rmdir(dir);
    if (saved) setenv("KVIK_CACHE", saved, 1), free(saved);
    else unsetenv("KVIK_CACHE");
}

/* `bench grammar --json` over a folder of schemas: one JSON object with
 * the mask times and a compile time for each schema; a file that is not
 * JSON is an error that names it. */
TEST(cli_bench_grammar_schema_folder) {
    char path[4096];
    const char *model = test_default_model(path, sizeof path);
    if (!model) return;
    char dir[] = "/tmp/kvik-schemas-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    static const char *const schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":8}},\"required\":[\"a\"]}",
        "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"yz\"]},\"maxItems\":3}",
    };
    char file[4200];
    for (int i = 0; i < 2; i++) {
        snprintf(file, sizeof file, "%s/s%d.json", dir, i);
        FILE *f = fopen(file, "w");
        REQUIRE(f);
        fputs(schemas[i], f);
        fclose(f);
    }
    char out[8192], err[4096], args[4400];
    snprintf(args, sizeof args, "bench grammar -m '%s' --schemas %s --walks 2 --max-tokens 30 --json", model, dir);
    REQUIRE(test_run_kvik(args, out, sizeof out, err, sizeof err) == 0);
    CHECK_EQ_INT(count_lines(out), 1);
    CHECK(json_num(out, "schemas") == 2 && json_num(out, "walks") == 4 && json_num(out, "masks") >= 4);
    double mean = json_num(out, "mean_us"), p99 = json_num(out, "p99_us");
    CHECK(mean > 0 && p99 >= json_num(out, "p50_us") && json_num(out, "max_us") >= p99);
    CHECK(strstr(out, "\"compile_ms\":[") != NULL);
    snprintf(file, sizeof file, "%s/zz.json", dir);
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fputs("{not json", f);
    fclose(f);
    CHECK(test_run_kvik(args, out, sizeof out, err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "zz.json") != NULL, "%s", err);
    for (int i = 0; i < 2; i++) snprintf(file, sizeof file, "%s/s%d.json", dir, i), unlink(file);
    snprintf(file, sizeof file, "%s/zz.json", dir);
    unlink(file);
    rmdir(dir);
}
