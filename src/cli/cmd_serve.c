/*
 * cmd_serve.c — `kvik serve`: the OpenAI-compatible HTTP server
 * (src/server/server.h) over the serving engine. This file parses the
 * command line; everything else is in src/server.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "cli/cli.h"
#include "engine/spec.h"
#include "server/server.h"
#include "tensor/tensor.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik serve [-m MODEL] [options]\n"
            "  -m PATH             model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  --host ADDR         address to listen on (default 127.0.0.1)\n"
            "  --port N            TCP port (default 8080; 0: any free port, printed on stderr)\n"
            "  --api-key KEY       require 'Authorization: Bearer KEY' on /v1/*, /tokenize and\n"
            "                      /detokenize (default: $KVIK_API_KEY; /health and /metrics stay open);\n"
            "                      several keys: KEY1,KEY2,...\n"
            "  --no-prefix-cache   compute every prompt in full (default: reuse cached KV blocks)\n"
            "  --prefix-cache-shared  share cached blocks across API keys (default: per key; a\n"
            "                      cache hit shows in response time, see docs/server.md)\n"
            "  --model-name NAME   the model id clients see (default: the file name without .gguf)\n"
            "  --chat-template NAME  chatml, llama3, gemma, mistral or phi3 (default: the model's)\n"
            "  -t N                forward-pass threads (default: all CPUs)\n"
            "  -c N                longest sequence, prompt + output (default: the model's, at most 8192)\n"
            "  --kv-mem MiB        KV-cache pool size (default: room for max-seqs sequences of c/4 tokens)\n"
            "  --ctx-total N       KV-cache pool size in tokens, all sequences together (instead of --kv-mem)\n"
            "  --kv-type T         f16 (default), q8_0 or f32\n"
            "  --max-seqs N        running sequences at most (default 64)\n"
            "  --max-batch-tokens N  tokens per engine step (default 512)\n"
            "  --prefill-chunk N     prompt tokens per step while sequences decode (default 128; 0: no cap)\n"
            "  --max-queue N       waiting requests at most; beyond, 503 + Retry-After (default 256)\n"
            "  --max-body BYTES    request body limit (default 4194304)\n"
            "  --drain-timeout S   on SIGINT/SIGTERM, seconds running requests may finish (default 30)\n"
            "  --max-connections N concurrent HTTP connections (default 512)\n"
            "  --max-connections-per-ip N  concurrent connections from one address (default 128;\n"
            "                      0: no limit; behind a proxy every client has the proxy's address)\n"
            "  --header-timeout S  seconds a request's headers may take (default 10; also how long an\n"
            "                      idle kept-alive connection stays open)\n"
            "  --body-timeout S    seconds its body may take after the headers (default 30)\n"
            "  --spec MODE         speculative decoding: none (default), ngram (prompt lookup) or draft\n"
            "  --model-draft PATH  draft model with the model's vocabulary (implies --spec draft)\n"
            "  --spec-max N        longest draft, 1..16 (default 8; adapts per sequence)\n"
            "  --spec-ngram N      longest n-gram prompt lookup matches, 1..8 (default 3)\n"
            "  --embedding-model M an encoder (kvik pull all-minilm-l6-v2) served on /v1/embeddings\n"
            "                      beside the chat model; -m with an encoder serves embeddings alone\n"
            "  --rerank-model M    a cross-encoder GGUF (kvik convert of a BertForSequenceClassification)\n"
            "                      answers /v1/rerank instead of the chat model; -m with one reranks alone\n"
            "  --embedding-threads N  the encoders' threads (default 1)\n"
            "  --data-dir DIR      keep files and vector stores here (default: in memory, lost on exit);\n"
            "                      a folder made with another embedding model is refused\n"
            "  --max-file-size BYTES  the largest file upload (default 67108864)\n"
            "  --semantic-cache    answer chat requests from a cache of earlier answers to similar last\n"
            "                      user messages, keyed hard by API key, model, earlier messages and\n"
            "                      sampling (needs --embedding-model; greedy requests only unless a request\n"
            "                      sends X-Kvik-Cache: sampled; X-Kvik-Cache: off skips it)\n"
            "  --semantic-cache-threshold X  least cosine of a hit (default 0.80)\n"
            "  --semantic-cache-no-guard  hits by cosine alone, without the same-content-words check\n"
            "                      (to measure what the check saves: near misses get through)\n"
            "  --semantic-cache-ttl S  an entry's life in seconds (default 3600)\n"
            "  --semantic-cache-size N  entries at most (default 10000)\n"
            "Routes: POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/rerank, /tokenize,\n"
            "/detokenize;"
            "GET /v1/models, /health, /metrics; /v1/files and /v1/vector_stores (with an embedding model).\n"
            "See docs/server.md and docs/retrieval.md.\n");
}

static int bad_value(const char *a, const char *v) {
    fprintf(stderr, "kvik serve: bad value '%s' for %s\n", v, a);
    return 2;
}

int cmd_serve(int argc, char **argv) {
    struct server_config cfg = server_config_default();
    const char *model = NULL;
    long l;
    bool spec_given = false;
    cfg.n_threads = cpu_count();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--semantic-cache")) {
            cfg.semantic_cache = true;
            continue;
        }
        if (!strcmp(a, "--semantic-cache-no-guard")) {
            cfg.semcache_no_guard = true;
            continue;
        }
        if (!strcmp(a, "--no-prefix-cache") || !strcmp(a, "--prefix-cache-shared")) {
            if (a[2] == 'n') cfg.prefix_cache = false;
            else cfg.prefix_cache_shared = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "kvik serve: unknown argument or missing value: '%s' (try kvik serve --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-m")) model = v;
        else if (!strcmp(a, "--host")) cfg.host = v;
        else if (!strcmp(a, "--api-key")) cfg.api_key = v;
        else if (!strcmp(a, "--model-name")) cfg.model_name = v;
        else if (!strcmp(a, "--chat-template")) cfg.chat_template = v;
        else if (!strcmp(a, "--port")) {
            if (!cli_parse_long(v, 0, 65535, &l)) return bad_value(a, v);
            cfg.port = (int)l;
        } else if (!strcmp(a, "-t")) {
            if (!cli_parse_long(v, 1, 1024, &l)) return bad_value(a, v);
            cfg.n_threads = (int)l;
        } else if (!strcmp(a, "-c")) {
            if (!cli_parse_long(v, 16, 1 << 20, &l)) return bad_value(a, v);
            cfg.n_ctx = (int)l;
        } else if (!strcmp(a, "--kv-mem")) {
            if (!cli_parse_long(v, 1, 1 << 20, &l)) return bad_value(a, v);
            cfg.kv_mem_mib = l;
        } else if (!strcmp(a, "--ctx-total")) {
            if (!cli_parse_long(v, 16, 1L << 30, &l)) return bad_value(a, v);
            cfg.ctx_total = l;
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16")) cfg.kv_type = TENSOR_TYPE_F16;
            else if (!strcmp(v, "q8_0")) cfg.kv_type = TENSOR_TYPE_Q8_0;
            else if (!strcmp(v, "f32")) cfg.kv_type = TENSOR_TYPE_F32;
            else return bad_value(a, v);
        } else if (!strcmp(a, "--max-seqs")) {
            if (!cli_parse_long(v, 1, 4096, &l)) return bad_value(a, v);
            cfg.max_seqs = (int)l;
        } else if (!strcmp(a, "--max-batch-tokens")) {
            if (!cli_parse_long(v, 1, 1 << 16, &l)) return bad_value(a, v);
            cfg.max_batch_tokens = (int)l;
        } else if (!strcmp(a, "--prefill-chunk")) {
            if (!cli_parse_long(v, 0, 1 << 16, &l)) return bad_value(a, v);
            cfg.prefill_chunk = (int)l;
        } else if (!strcmp(a, "--max-queue")) {
            if (!cli_parse_long(v, 1, 1 << 20, &l)) return bad_value(a, v);
            cfg.max_queue = (int)l;
        } else if (!strcmp(a, "--max-body")) {
            if (!cli_parse_long(v, 1024, 1L << 30, &l)) return bad_value(a, v);
            cfg.max_body = (size_t)l;
        } else if (!strcmp(a, "--drain-timeout")) {
            float f;
            if (!cli_parse_float(v, 0, 86400, &f)) return bad_value(a, v);
            cfg.drain_timeout_s = f;
        } else if (!strcmp(a, "--spec")) {
            enum spec_mode m;
            if (!spec_mode_parse(v, &m)) return bad_value(a, v);
            cfg.spec_mode = m;
            spec_given = true;
        } else if (!strcmp(a, "--model-draft")) {
            cfg.model_draft = v;
        } else if (!strcmp(a, "--embedding-model")) {
            cfg.embedding_model = v;
        } else if (!strcmp(a, "--rerank-model")) {
            cfg.rerank_model = v;
        } else if (!strcmp(a, "--semantic-cache-threshold")) {
            float f;
            if (!cli_parse_float(v, -1, 1, &f)) return bad_value(a, v);
            cfg.semcache_threshold = f;
        } else if (!strcmp(a, "--semantic-cache-ttl")) {
            float f;
            if (!cli_parse_float(v, 1, 1e8f, &f)) return bad_value(a, v);
            cfg.semcache_ttl_s = f;
        } else if (!strcmp(a, "--semantic-cache-size")) {
            if (!cli_parse_long(v, 1, 1L << 30, &l)) return bad_value(a, v);
            cfg.semcache_max = l;
        } else if (!strcmp(a, "--data-dir")) {
            cfg.data_dir = v;
        } else if (!strcmp(a, "--max-file-size")) {
            if (!cli_parse_long(v, 1, 1L << 32, &l)) return bad_value(a, v);
            cfg.max_file = (size_t)l;
        } else if (!strcmp(a, "--embedding-threads")) {
            if (!cli_parse_long(v, 1, 1024, &l)) return bad_value(a, v);
            cfg.embedding_threads = (int)l;
        } else if (!strcmp(a, "--spec-max")) {
            if (!cli_parse_long(v, 1, SPEC_MAX_DRAFT, &l)) return bad_value(a, v);
            cfg.spec_max = (int)l;
        } else if (!strcmp(a, "--spec-ngram")) {
            if (!cli_parse_long(v, 1, 8, &l)) return bad_value(a, v);
            cfg.spec_ngram = (int)l;
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            if (!cli_parse_long(v, 0, 100000, &l)) return bad_value(a, v);
            cfg.max_connections_per_ip = (int)l;
        } else if (!strcmp(a, "--header-timeout") || !strcmp(a, "--body-timeout")) {
            float f;
            if (!cli_parse_float(v, 0.01f, 86400, &f)) return bad_value(a, v);
            if (a[2] == 'h') cfg.header_timeout_s = f;
            else cfg.body_timeout_s = f;
        } else if (!strcmp(a, "--max-connections")) {
            if (!cli_parse_long(v, 1, 100000, &l)) return bad_value(a, v);
            cfg.max_connections = (int)l;
        } else {
            fprintf(stderr, "kvik serve: unknown argument '%s' (try kvik serve --help)\n", a);
            return 2;
        }
    }
    if (cfg.model_draft && !spec_given) cfg.spec_mode = SPEC_DRAFT;
    if (cfg.spec_mode == SPEC_DRAFT && !cfg.model_draft) {
        fprintf(stderr, "kvik serve: --spec draft needs --model-draft PATH\n");
        return 2;
    }
    if (cfg.spec_mode != SPEC_DRAFT && cfg.model_draft) {
        fprintf(stderr, "kvik serve: --model-draft goes with --spec draft\n");
        return 2;
    }
    static char draft_path[4096];
    if (cfg.model_draft && !(cfg.model_draft = cli_resolve_model(cfg.model_draft, draft_path, sizeof draft_path)))
        return 1; /* a registry name, a cache file or a path; cli_resolve_model said why not */
    static char emb_path[4096];
    if (cfg.embedding_model &&
        !(cfg.embedding_model = cli_resolve_model(cfg.embedding_model, emb_path, sizeof emb_path)))
        return 1;
    static char rerank_path[4096];
    if (cfg.rerank_model && !(cfg.rerank_model = cli_resolve_model(cfg.rerank_model, rerank_path, sizeof rerank_path)))
        return 1;
    if (cfg.kv_mem_mib && cfg.ctx_total) {
        fprintf(stderr, "kvik serve: give --kv-mem or --ctx-total, not both\n");
        return 2;
    }
    if (!cfg.api_key) {
        const char *env = getenv("KVIK_API_KEY");
        if (env && *env) cfg.api_key = env;
    }
    if (cfg.api_key && (!*cfg.api_key || *cfg.api_key == ',' || strstr(cfg.api_key, ",,") ||
                        cfg.api_key[strlen(cfg.api_key) - 1] == ',')) {
        fprintf(stderr, "kvik serve: --api-key must not be empty (nor any key of a comma-separated list)\n");
        return 2;
    }
    char buf[4096];
    cfg.model_path = cli_resolve_model(model, buf, sizeof buf);
    if (!cli_model_exists(cfg.model_path, model, "serve")) return 1;
    return server_run(&cfg);
}
