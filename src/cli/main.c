/*
 * main.c — the `kvik` command: dispatches to subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik COMMAND [ARGS]\n"
            "\n"
            "commands:\n"
            "  run [-m MODEL] -p TEXT      generate text (kvik run --help)\n"
            "  chat [-m MODEL]             chat on stdin/stdout, one message a line (kvik chat --help)\n"
            "  info FILE [--json]          print a GGUF file's metadata and tensors\n"
            "  perplexity [-m MODEL] -f TEXT  perplexity and KL divergence (kvik perplexity --help)\n"
            "  imatrix [-m MODEL] -f TEXT  importance matrix for the quantizer (kvik imatrix --help)\n"
            "  eval [-m MODEL] --tasks F   the task regression gate (kvik eval --help)\n"
            "  quantize IN OUT TYPE        convert a GGUF's weights to another type (kvik quantize --help)\n"
            "  embed -m MODEL -p TEXT      text embeddings from an encoder (kvik embed --help)\n"
            "  convert DIR OUT [TYPE]      a Hugging Face model directory to GGUF (kvik convert --help)\n"
            "  bench offline [-m MODEL]    prefill and decode speed (like llama-bench)\n"
            "  bench engine [-m MODEL]     serving-engine throughput at batch 1, 8, 32\n"
            "  bench kernels [-t N] [--json]  memory bandwidth and kernel throughput\n"
            "  synth --shape NAME --type TYPE -o FILE  random-weight GGUF of a real model shape\n"
            "  tokenize -m MODEL -p TEXT   text to token ids (kvik tokenize --help)\n"
            "  template -m MODEL --messages F  the chat template rendered (kvik template --help)\n"
            "  detokenize -m MODEL ID...   token ids to text\n"
            "  bench tokenizer -f CORPUS   tokenizer speed against Hugging Face tokenizers\n"
            "  serve [-m MODEL] [--port N] OpenAI-compatible HTTP server (kvik serve --help)\n"
            "  bench serve --url URL       load-test an OpenAI-compatible server (also bench sweep, compare)\n"
            "  vocab-import --tiktoken F   a GGUF vocabulary from a tiktoken ranks file\n"
            "  pull NAME                   fetch a registry model into the model cache (kvik pull --help)\n"
            "  list                        the registry's models and the model cache\n"
            "\n"
            "  --help, --version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("kvik %s (%s)\n", kvik_version(), kvik_cpu_isa());
        return 0;
    }
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "imatrix")) return cmd_imatrix(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed")) return cmd_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return cmd_convert(argc - 1, argv + 1);
    if (!strcmp(cmd, "synth")) return cmd_synth(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "template")) return cmd_template(argc - 1, argv + 1);
    if (!strcmp(cmd, "detokenize")) return cmd_detokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "vocab-import")) return cmd_vocab_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "pull")) return cmd_pull(argc - 1, argv + 1);
    if (!strcmp(cmd, "list")) return cmd_list(argc - 1, argv + 1);
    fprintf(stderr, "kvik: unknown command '%s' (try kvik --help)\n", cmd);
    return 2;
}
