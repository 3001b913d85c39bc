/*
 * cmd_bench_engine.c — `kvik bench engine`: throughput of the serving
 * engine (engine.h) at several batch sizes.
 *
 * For each batch size B: one engine with max_seqs = B, B requests of P
 * random prompt tokens and N generated tokens each (greedy, ignore_eos),
 * submitted together. Reported:
 *   prefill  B * P prompt tokens / (submit -> every request has its first
 *            token)
 *   decode   B * (N - 1) tokens / (every request has its first token ->
 *            the last one finishes): the steady decode rate at batch B,
 *            and per sequence
 * One untimed warm-up round at batch 1 faults the weights in.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tensor/tensor.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvik bench engine [-m MODEL] [-b LIST] [-p N] [-n N] [-t N] [--kv-type T] [--phases] [--json]\n"
            "  -m PATH   model: a path or a name (kvik list); default $KVIK_MODEL, else smollm2-135m\n"
            "  -b LIST   comma-separated batch sizes (default 1,8,32)\n"
            "  -p N      prompt tokens per request (default 32)\n"
            "  -n N      tokens generated per request (default 64)\n"
            "  -t N      threads (default: all CPUs)\n"
            "  --kv-type T  the cache's rows: f16 (default), q8_0 or f32, as kvik serve\n"
            "  --phases  also the forward pass's phases, ms per decode step of B tokens\n"
            "            (embeddings, Q/K/V with rope and the cache store, attention, output\n"
            "            projection, gate/up, silu (0 where down gates its input), down,\n"
            "            logits)\n"
            "  --json    one JSON object per batch size on stdout\n");
}

struct run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int firsts, finals, want;
    int64_t t_first, t_done;
    int errors;
};

static bool on_event(void *user, const struct engine_event *ev) {
    struct run *r = user;
    pthread_mutex_lock(&r->mu);
    if (ev->finish != ENGINE_FINISH_NONE) {
        if (ev->finish == ENGINE_FINISH_ERROR) r->errors++;
        if (++r->finals == r->want) {
            r->t_done = clock_ns();
            pthread_cond_signal(&r->cv);
        }
    } else if (ev->n_generated == 1 && ++r->firsts == r->want) {
        r->t_first = clock_ns();
    }
    pthread_mutex_unlock(&r->mu);
    return true;
}

struct result {
    double prefill_tok_s, decode_tok_s;
    uint64_t steps;
    struct model_profile prof; /* with --phases: the forward passes of `batch` tokens */
};

static bool run_batch(const struct model *m, int threads, int kv_type, int batch, int n_prompt, int n_gen,
                      bool phases, uint64_t *rng, struct result *res, struct kvik_err *err) {
    struct engine_config cfg = engine_config_default();
    cfg.kv_type = kv_type;
    cfg.profile_tokens = phases ? batch : 0;
    cfg.n_threads = threads;
    cfg.max_seqs = batch;
    cfg.max_batch_tokens = batch > 512 ? batch : 512;
    cfg.max_queue = batch;
    cfg.n_ctx = n_prompt + n_gen;
    int64_t per_seq = (cfg.n_ctx + cfg.block_tokens - 1) / cfg.block_tokens;
    cfg.kv_blocks = per_seq * batch;
    struct engine *e = engine_new(m, &cfg, err);
    if (!e) return false;
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    struct run r = {.want = batch};
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    bool ok = prompt != NULL;
    int64_t t0 = clock_ns();
    for (int i = 0; ok && i < batch; i++) {
        for (int t = 0; t < n_prompt; t++) {
            *rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
            prompt[t] = (int32_t)(*rng % (uint64_t)m->hp.n_vocab);
        }
        struct sampler_params sp = sampler_params_default();
        sp.temp = 0;
        struct engine_request rq = {.prompt = prompt, .n_prompt = n_prompt, .max_tokens = n_gen, .n = 1,
                                    .sampling = sp, .top_logprobs = -1, .ignore_eos = true,
                                    .on_event = on_event, .user = &r};
        uint64_t id;
        ok = engine_submit(e, &rq, &id, err) == KVIK_OK;
    }
    if (ok) {
        pthread_mutex_lock(&r.mu);
        while (r.finals < r.want) pthread_cond_wait(&r.cv, &r.mu);
        pthread_mutex_unlock(&r.mu);
        engine_drain(e, INT64_MAX); /* statistics then include the last step */
        struct engine_stats st;
        engine_stats(e, &st);
        res->steps = st.steps;
        engine_profile(e, &res->prof);
        res->prefill_tok_s = (double)batch * n_prompt / ((double)(r.t_first - t0) * 1e-9);
        res->decode_tok_s =
            n_gen > 1 ? (double)batch * (n_gen - 1) / ((double)(r.t_done - r.t_first) * 1e-9) : 0;
        if (r.errors) {
            err_set(err, KVIK_ERR_INVALID_ARG, "%d requests failed", r.errors);
            ok = false;
        }
    } else {
        engine_drain(e, clock_ns());
    }
    engine_free(e);
    free(prompt);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
    return ok;
}

/* Milliseconds per timed forward pass in phase i. */
static double phase_ms(const struct model_profile *p, int i) {
    return p->calls ? p->seconds[i] * 1e3 / (double)p->calls : 0.0;
}

/* Where cmd_bench_engine's flags go (its locals). */
struct engine_flags {
    const char **model, **list;
    long *n_prompt, *n_gen, *threads;
    int *kv_type;
};

static enum cli_flag engine_flag(void *user, const char *a, const char *v) {
    struct engine_flags *f = user;
    bool ok = true;
    if (!strcmp(a, "-m")) *f->model = v;
    else if (!strcmp(a, "-b")) *f->list = v;
    else if (!strcmp(a, "-p")) ok = cli_parse_long(v, 1, 1 << 16, f->n_prompt);
    else if (!strcmp(a, "-n")) ok = cli_parse_long(v, 1, 1 << 16, f->n_gen);
    else if (!strcmp(a, "-t")) ok = cli_parse_long(v, 1, 1024, f->threads);
    else if (!strcmp(a, "--kv-type")) {
        int t = !strcmp(v, "f16") ? TENSOR_TYPE_F16 : !strcmp(v, "q8_0") ? TENSOR_TYPE_Q8_0
              : !strcmp(v, "f32") ? TENSOR_TYPE_F32 : -1;
        if (t < 0) ok = false;
        else *f->kv_type = t;
    } else return CLI_FLAG_UNKNOWN;
    return ok ? CLI_FLAG_OK : CLI_FLAG_BAD_VALUE;
}

int cmd_bench_engine(int argc, char **argv) {
    const char *model_arg = NULL, *list = "1,8,32";
    long n_prompt = 32, n_gen = 64, threads = cpu_count();
    bool json = false, phases = false;
    /* --phases takes no value: taken out before the flag loop */
    int kept = 2;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--phases")) phases = true;
        else argv[kept++] = argv[i];
    }
    argc = kept;
    int kv_type = TENSOR_TYPE_F16;
    struct engine_flags f = {&model_arg, &list, &n_prompt, &n_gen, &threads, &kv_type};
    int st = cli_parse_flags(argc, argv, 2, "bench engine", usage, &json, engine_flag, &f);
    if (st >= 0) return st;
    long batches[16];
    int n_batches = 0;
    for (const char *p = list; *p;) {
        char num[16];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof num || n_batches == 16) {
            fprintf(stderr, "kvik bench engine: bad batch list '%s'\n", list);
            return 2;
        }
        memcpy(num, p, len);
        num[len] = 0;
        if (!cli_parse_long(num, 1, 4096, &batches[n_batches++])) {
            fprintf(stderr, "kvik bench engine: bad batch size '%s'\n", num);
            return 2;
        }
        p += len + (p[len] == ',');
    }
    char pathbuf[4096];
    const char *path = cli_resolve_model(model_arg, pathbuf, sizeof pathbuf);
    if (!cli_model_exists(path, model_arg, "bench engine")) return 1;
    struct kvik_err err = {0};
    struct model *m = NULL;
    if (model_load(path, &m, &err)) {
        fprintf(stderr, "kvik bench engine: %s\n", err.msg);
        return 1;
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    struct result warm;
    int rc = 0;
    if (!run_batch(m, (int)threads, kv_type, 1, (int)n_prompt, n_gen < 8 ? (int)n_gen : 8, false, &rng, &warm, &err)) rc = 1;
    if (!json && !rc)
        printf("model %s, %ld threads, %s, %s cache, prompt %ld, generate %ld\n", base, threads,
               tensor_kernels_best()->name, tensor_type_name(kv_type), n_prompt, n_gen);
    for (int b = 0; b < n_batches && !rc; b++) {
        struct result res;
        if (!run_batch(m, (int)threads, kv_type, (int)batches[b], (int)n_prompt, (int)n_gen, phases, &rng, &res, &err)) {
            rc = 1;
            break;
        }
        if (json) {
            printf("{\"model\":\"%s\",\"threads\":%ld,\"kv_type\":\"%s\",\"batch\":%ld,\"n_prompt\":%ld,"
                   "\"n_gen\":%ld,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,\"decode_tok_s_per_seq\":%.2f,"
                   "\"steps\":%llu",
                   base, threads, tensor_type_name(kv_type), batches[b], n_prompt, n_gen, res.prefill_tok_s,
                   res.decode_tok_s,
                   res.decode_tok_s / (double)batches[b], (unsigned long long)res.steps);
            if (phases) {
                printf(",\"phase_steps\":%lld,\"phases_ms\":{", (long long)res.prof.calls);
                for (int i = 0; i < MODEL_PHASE_COUNT; i++)
                    printf("%s\"%s\":%.4f", i ? "," : "", model_phase_name(i), phase_ms(&res.prof, i));
                printf("}");
            }
            printf("}\n");
        } else {
            printf("batch %-4ld prefill %9.1f tok/s   decode %9.1f tok/s (%.1f per sequence)   %llu steps\n",
                   batches[b], res.prefill_tok_s, res.decode_tok_s, res.decode_tok_s / (double)batches[b],
                   (unsigned long long)res.steps);
            if (phases) {
                double sum = 0;
                printf("  phases, ms per step of %ld tokens (%lld steps):", batches[b], (long long)res.prof.calls);
                for (int i = 0; i < MODEL_PHASE_COUNT; i++) {
                    printf(" %s %.3f", model_phase_name(i), phase_ms(&res.prof, i));
                    sum += phase_ms(&res.prof, i);
                }
                printf(" (sum %.3f)\n", sum);
            }
        }
    }
    if (rc) fprintf(stderr, "kvik bench engine: %s\n", err.msg);
    model_free(m);
    return rc;
}
