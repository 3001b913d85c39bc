/*
 * generate.c — the smallest program over libkvik: `generate MODEL PROMPT [N]`
 * prints a greedy continuation of PROMPT (N tokens at most, default 32) on
 * stdout, the text `kvik run -m MODEL -p PROMPT -n N --temp 0` prints.
 * MODEL is a path or a name of the model cache ("smollm2-135m").
 *
 *   cc generate.c $(pkg-config --cflags --libs kvik) -o generate
 */
#include <stdio.h>
#include <stdlib.h>

#include <kvik.h>

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: generate MODEL PROMPT [N]\n");
        return 2;
    }
    char err[512];
    kvik_model *model = NULL;
    kvik_engine *engine = NULL;
    char *text = NULL;
    int rc = 1;

    if (kvik_model_open(argv[1], NULL, &model, err, sizeof err) != KVIK_OK) goto fail;

    /* one sequence in a 128 MiB KV cache of F32 rows, as `kvik run` keeps
       them (the engine's default is F16) */
    struct kvik_engine_params ep = kvik_engine_default_params();
    ep.max_seqs = 1;
    ep.kv_mem_mib = 128;
    ep.kv_type = KVIK_KV_F32;
    if (kvik_engine_new(model, &ep, &engine, err, sizeof err) != KVIK_OK) goto fail;

    struct kvik_sampling_params sp = kvik_sampling_default_params();
    sp.temperature = 0; /* greedy */
    struct kvik_request_params rp = kvik_request_default_params();
    rp.sampling = &sp;
    rp.max_tokens = argc == 4 ? atoi(argv[3]) : 32;

    kvik_finish finish;
    if (kvik_generate(engine, argv[2], &rp, &text, &finish, err, sizeof err) != KVIK_OK) goto fail;
    printf("%s\n", text);
    fprintf(stderr, "generate: finished (%s)\n", kvik_finish_string(finish));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "generate: %s\n", err);
done:
    kvik_free(text);
    kvik_engine_free(engine);
    kvik_model_close(model);
    return rc;
}
