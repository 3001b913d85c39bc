/*
 * cli.h — subcommands of the `kvik` command. Each takes argv starting at its
 * own name and returns the process exit status (0 ok, 1 runtime error,
 * 2 usage error). Errors are one line on stderr.
 */
#ifndef KVIK_CLI_H
#define KVIK_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvik.h"

/* The default model's file name in the model cache (make model fetches it). */
#define CLI_DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_offline(int argc, char **argv); /* argv[1] is "offline" */
int cmd_bench_engine(int argc, char **argv);  /* argv[1] is "engine" */
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_tokenizer(int argc, char **argv); /* argv[1] is "tokenizer" */
int cmd_vocab_import(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv); /* argv[1] is "serve", "sweep" or "compare" */
int cmd_bench_vector(int argc, char **argv); /* argv[1] is "vector" */
int cmd_bench_grammar(int argc, char **argv); /* argv[1] is "grammar" */
int cmd_pull(int argc, char **argv);
int cmd_list(int argc, char **argv);

/* ---- shared helpers (cli_util.c) ---- */

/* Whole-string decimal in [lo, hi]; false on anything else. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *s, float lo, float hi, float *out);

/* What a flag handler of cli_parse_flags says about one flag and its value. */
enum cli_flag { CLI_FLAG_OK, CLI_FLAG_BAD_VALUE, CLI_FLAG_UNKNOWN };

/*
 * The argument loop of the bench subcommands over argv[from..argc):
 * "--help"/"-h" print usage on stdout; "--json" sets *json; every other
 * flag takes one value and goes to fn(user, flag, value). Returns -1 when
 * all were taken, else the exit status: 0 after --help, 2 after one line
 * on stderr ("kvik CMD: unknown argument ...", "... bad value ...").
 */
int cli_parse_flags(int argc, char **argv, int from, const char *cmd, void (*usage)(FILE *), bool *json,
                    enum cli_flag (*fn)(void *user, const char *flag, const char *value), void *user);

/* The model path: arg (-m), else $KVIK_MODEL, else the default model in
 * $KVIK_MODELS or ~/.cache/kvik/models. An arg or $KVIK_MODEL is a path
 * or a name (kvik_model_resolve: a registry name or a file in the cache),
 * resolved into buf; NULL after one line on stderr when it names nothing.
 * The default is its path in buf whether it exists or not. */
const char *cli_resolve_model(const char *arg, char *buf, size_t len);

/* True if path opens; false for a NULL path (cli_resolve_model has
 * printed why); else one line on stderr ("kvik CMD: model ... not
 * found", with a hint to `make model` when the default was used). */
bool cli_model_exists(const char *path, const char *arg, const char *cmd);

/* The whole file, NUL-terminated (malloc'd; *len excludes the NUL); NULL
 * with errno set on failure. */
char *cli_read_file(const char *path, size_t *len);


/* A JSON string literal of s[0..len): escaped, invalid UTF-8 as U+FFFD. */
void cli_json_str(FILE *f, const char *s, uint64_t len);
void cli_json_ids(FILE *f, const int32_t *ids, int64_t n);

#endif /* KVIK_CLI_H */
