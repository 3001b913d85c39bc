/*
 * test_kb.c — the knowledge base (retrieval/kb.h): files, stores, chunks
 * and search, per tenant; durability in a data folder (reopen, checkpoint
 * with graphs, a damaged graph, a torn or damaged journal, another model's
 * folder, a folder in use, a process killed mid-insert).
 *
 * Chunks are counted with all-MiniLM-L6-v2's WordPiece tokenizer; vectors
 * come from a stand-in embedder (each word hashed to a signed unit in 256
 * dimensions), so which chunk is nearest is known without a model.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/encoder.h"
#include "retrieval/bm25.h"
#include "retrieval/kb.h"
#include "test.h"

enum { DIM = 256 };

static struct encoder *g_enc;
static _Atomic int g_embed_calls;

static const struct tokenizer *minilm(void) {
    if (g_enc) return encoder_tokenizer(g_enc);
    char path[4096];
    if (!test_cached_model("all-MiniLM-L6-v2-F16.gguf", path, sizeof path)) return NULL;
    struct kvik_err err = {0};
    CHECK_MSG(encoder_load(path, &g_enc, &err) == KVIK_OK, "encoder_load: %s", err.msg);
    return g_enc ? encoder_tokenizer(g_enc) : NULL;
}

struct bag {
    float *v;
};

static void bag_word(const char *w, size_t n, void *ctx) {
    struct bag *b = ctx;
    uint64_t h = hash64(w, n, 5);
    b->v[1 + h % (DIM - 1)] += (h >> 32) & 1 ? 1.0f : -1.0f;
}

static kvik_status fake_embed(void *ctx, int n, const char *const *texts, const size_t *lens, float *out,
                              struct kvik_err *err) {
    (void)ctx;
    (void)err;
    atomic_fetch_add(&g_embed_calls, 1);
    for (int i = 0; i < n; i++) {
        struct bag b = {out + (size_t)i * DIM};
        memset(b.v, 0, DIM * sizeof *b.v);
        b.v[0] = 0.01f;
        bm25_words(texts[i], lens[i], bag_word, &b);
    }
    return KVIK_OK;
}

static struct kb_config config(const char *dir) {
    struct kb_config c = {.dir = dir, .dim = DIM, .tok = minilm(), .embed = fake_embed, .embed_batch = 4};
    snprintf(c.model.id, sizeof c.model.id, "fake-bag-of-words");
    snprintf(c.model.hash, sizeof c.model.hash, "00ff");
    return c;
}

static const struct kb_tenant T1 = {{1}}, T2 = {{2}};

static struct kb_attrs attrs1(const char *key, const char *val) {
    struct vec_attr a = {.key = key, .v = {.type = VEC_STR, .str = val, .len = strlen(val)}};
    struct kb_attrs out;
    kb_attrs_copy(&out, &a, 1);
    return out;
}

/* The file ids of a search's results, space-separated, into buf. */
static int search_ids(struct kb *kb, const struct kb_tenant *t, const char *store, const char *query, int ranker,
                      const struct vec_filter *f, float threshold, char *buf, size_t len) {
    struct kb_query q = {.text = query, .len = strlen(query), .filter = f, .k = 3, .threshold = threshold,
                         .ranker = ranker};
    struct kb_result *r;
    struct kvik_err err = {0};
    int n = kb_search(kb, t, store, &q, &r, &err);
    buf[0] = 0;
    size_t at = 0;
    for (int i = 0; i < n && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? " " : "", r[i].file_id);
    if (n >= 0) kb_results_free(r, n);
    return n;
}

static const char *DOCS[3] = {
    "The NV-TH220 thermometer measures from minus forty to one hundred and fifty degrees. Its battery lasts two years.",
    "Returns are accepted within thirty days of delivery in the European Union; the customer pays return shipping.",
    "Sourdough bread rises because wild yeast and lactic bacteria ferment the flour, making carbon dioxide gas.",
};

/* A store of the three documents for t, their file ids in fid[3]. */
static void make_store(struct kb *kb, const struct kb_tenant *t, char *store, char fid[3][KB_ID]) {
    struct kvik_err err = {0};
    struct kb_store st;
    REQUIRE_MSG(kb_store_create(kb, t, "docs", NULL, 0, &st, &err) == KVIK_OK, "%s", err.msg);
    strcpy(store, st.id);
    kb_store_free(&st);
    const char *region[3] = {"global", "eu", "global"};
    for (int i = 0; i < 3; i++) {
        struct kb_file f;
        char name[32];
        snprintf(name, sizeof name, "doc%d.txt", i);
        REQUIRE_MSG(kb_file_add(kb, t, name, "assistants", DOCS[i], strlen(DOCS[i]), &f, &err) == KVIK_OK, "%s",
                    err.msg);
        strcpy(fid[i], f.id);
        struct kb_attrs a = attrs1("region", region[i]);
        struct kb_sfile sf;
        REQUIRE_MSG(kb_store_add_file(kb, t, store, f.id, &a, NULL, &sf, &err) == KVIK_OK, "%s", err.msg);
        CHECK(sf.status == KB_SFILE_COMPLETED && sf.chunks == 1);
        kb_sfile_free(&sf);
        kb_attrs_free(&a);
    }
}

TEST(kb_files_stores_search_and_tenants) {
    struct kb_config c = config(NULL);
    if (!c.tok) return;
    struct kb *kb;
    struct kvik_err err = {0};
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    char store[KB_ID], fid[3][KB_ID], ids[256];
    make_store(kb, &T1, store, fid);
    /* each ranker finds the document that shares the query's words */
    for (int r = KB_DENSE; r <= KB_HYBRID; r++) {
        CHECK(search_ids(kb, &T1, store, "NV-TH220 thermometer battery", r, NULL, -INFINITY, ids,
                         sizeof ids) >= 1);
        CHECK_MSG(!strncmp(ids, fid[0], strlen(fid[0])), "ranker %d: %s", r, ids);
        CHECK(search_ids(kb, &T1, store, "sourdough bread yeast flour", r, NULL, -INFINITY, ids, sizeof ids) >= 1);
        CHECK_MSG(!strncmp(ids, fid[2], strlen(fid[2])), "ranker %d: %s", r, ids);
    }
    /* a filter applies before ranking: only the EU document may come back */
    struct vec_filter f = {.op = VEC_EQ, .key = "region", .v = {.type = VEC_STR, .str = "eu", .len = 2}};
    CHECK(search_ids(kb, &T1, store, "sourdough bread", KB_HYBRID, &f, -INFINITY, ids, sizeof ids) == 1);
    CHECK(!strcmp(ids, fid[1]));
    CHECK(search_ids(kb, &T1, store, "sourdough bread", KB_DENSE, &f, -INFINITY, ids, sizeof ids) == 1);
    /* a threshold above every cosine: no context is an answer */
    CHECK(search_ids(kb, &T1, store, "sourdough bread", KB_DENSE, NULL, 0.99f, ids, sizeof ids) == 0);
    CHECK(search_ids(kb, &T1, store, "sourdough bread", KB_HYBRID, NULL, 0.99f, ids, sizeof ids) == 0);
    /* another tenant sees nothing of T1's */
    struct kb_file fi;
    struct kb_store si;
    CHECK(kb_file_get(kb, &T2, fid[0], &fi, &err) == KVIK_ERR_NOT_FOUND);
    CHECK(kb_store_get(kb, &T2, store, &si, &err) == KVIK_ERR_NOT_FOUND);
    CHECK(search_ids(kb, &T2, store, "sourdough", KB_DENSE, NULL, -INFINITY, ids, sizeof ids) == KVIK_ERR_NOT_FOUND);
    CHECK(kb_store_add_file(kb, &T2, store, fid[0], NULL, NULL, NULL, &err) == KVIK_ERR_NOT_FOUND);
    CHECK(kb_file_delete(kb, &T2, fid[0], &err) == KVIK_ERR_NOT_FOUND);
    CHECK(kb_store_delete(kb, &T2, store, &err) == KVIK_ERR_NOT_FOUND);
    struct kb_file *fl;
    CHECK(kb_file_list(kb, &T2, NULL, &fl, &err) == 0);
    free(fl);
    CHECK(kb_file_list(kb, &T1, "assistants", &fl, &err) == 3);
    free(fl);
    /* T2 cannot add T1's file to a store of its own either */
    struct kb_store s2;
    REQUIRE(kb_store_create(kb, &T2, "mine", NULL, 0, &s2, &err) == KVIK_OK);
    CHECK(kb_store_add_file(kb, &T2, s2.id, fid[0], NULL, NULL, NULL, &err) == KVIK_ERR_NOT_FOUND);
    kb_store_free(&s2);
    /* removing a document from the store removes it from every ranking */
    CHECK(kb_store_file_delete(kb, &T1, store, fid[2], &err) == KVIK_OK);
    for (int r = KB_DENSE; r <= KB_HYBRID; r++) {
        search_ids(kb, &T1, store, "sourdough bread rises", r, NULL, -INFINITY, ids, sizeof ids);
        CHECK_MSG(!strstr(ids, fid[2]), "ranker %d: %s", r, ids);
    }
    /* the file itself is still there, and its store entry can be made again */
    CHECK(kb_file_get(kb, &T1, fid[2], &fi, &err) == KVIK_OK && fi.bytes == (int64_t)strlen(DOCS[2]));
    struct kb_store info;
    REQUIRE(kb_store_get(kb, &T1, store, &info, &err) == KVIK_OK);
    CHECK(info.n_completed == 2 && info.chunks == 2);
    kb_store_free(&info);
    /* attributes change in place: the filter follows */
    struct kb_attrs eu = attrs1("region", "eu");
    CHECK(kb_store_file_update(kb, &T1, store, fid[0], &eu, NULL, &err) == KVIK_OK);
    kb_attrs_free(&eu);
    CHECK(search_ids(kb, &T1, store, "thermometer battery", KB_DENSE, &f, -INFINITY, ids, sizeof ids) == 2);
    /* bytes that are not text: recorded as failed, with the reason */
    struct kb_file bin;
    const char binary[] = "abc\0\xff\xfe";
    REQUIRE(kb_file_add(kb, &T1, "x.bin", "assistants", binary, sizeof binary, &bin, &err) == KVIK_OK);
    struct kb_sfile sf;
    REQUIRE(kb_store_add_file(kb, &T1, store, bin.id, NULL, NULL, &sf, &err) == KVIK_OK);
    CHECK(sf.status == KB_SFILE_FAILED && !strcmp(sf.error_code, "unsupported_file") && sf.chunks == 0);
    kb_sfile_free(&sf);
    /* bad arguments are refused with a reason */
    struct kb_chunking bad = {50, 10};
    CHECK(kb_store_add_file(kb, &T1, store, fid[0], NULL, &bad, NULL, &err) == KVIK_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "max_chunk_size_tokens") != NULL);
    CHECK(kb_file_add(kb, &T1, "", "assistants", "x", 1, NULL, &err) == KVIK_ERR_INVALID_ARG);
    char long_key[80];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    struct kb_attrs lk = attrs1(long_key, "v");
    CHECK(kb_store_file_update(kb, &T1, store, fid[0], &lk, NULL, &err) == KVIK_ERR_INVALID_ARG);
    kb_attrs_free(&lk);
    struct kb_store gone;
    CHECK(kb_store_delete(kb, &T1, store, &err) == KVIK_OK);
    CHECK(kb_store_get(kb, &T1, store, &gone, &err) == KVIK_ERR_NOT_FOUND);
    kb_close(kb);
}

/* Everything a tenant holds, as one line per object, for comparing two
 * opens of a folder. */
static void describe(struct kb *kb, const struct kb_tenant *t, char *buf, size_t len) {
    size_t at = 0;
    struct kvik_err err = {0};
    struct kb_file *fl;
    int64_t nf = kb_file_list(kb, t, NULL, &fl, &err);
    for (int64_t i = 0; i < nf; i++)
        at += (size_t)snprintf(buf + at, len - at, "file %s %s %lld\n", fl[i].id, fl[i].filename,
                               (long long)fl[i].bytes);
    free(fl);
    struct kb_store *sl;
    int64_t ns = kb_store_list(kb, t, &sl, &err);
    for (int64_t i = 0; i < ns; i++) {
        at += (size_t)snprintf(buf + at, len - at, "store %s %s %lld %lld\n", sl[i].id, sl[i].name,
                               (long long)sl[i].chunks, (long long)sl[i].usage_bytes);
        struct kb_sfile *sf;
        int64_t k = kb_store_file_list(kb, t, sl[i].id, &sf, &err);
        for (int64_t j = 0; j < k; j++) {
            at += (size_t)snprintf(buf + at, len - at, " sfile %s %d %lld attrs %d\n", sf[j].file_id, sf[j].status,
                                   (long long)sf[j].chunks, sf[j].attrs.n);
            kb_sfile_free(&sf[j]);
        }
        free(sf);
        char ids[256];
        search_ids(kb, t, sl[i].id, "thermometer battery years", KB_HYBRID, NULL, -INFINITY, ids, sizeof ids);
        at += (size_t)snprintf(buf + at, len - at, " search %s\n", ids);
        kb_store_free(&sl[i]);
    }
    free(sl);
}

static int count_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

TEST(kb_folder_reopens_checkpoints_and_refuses) {
    struct kb_config c0 = config(NULL);
    if (!c0.tok) return;
    char dir[] = "/tmp/kvik-kb-XXXXXX";
    REQUIRE(mkdtemp(dir));
    struct kb_config c = config(dir);
    struct kb *kb;
    struct kvik_err err = {0};
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    char store[KB_ID], fid[3][KB_ID];
    make_store(kb, &T1, store, fid);
    /* a second process's open of the same folder is refused */
    struct kb *other;
    CHECK(kb_open(&c, &other, &err) == KVIK_ERR_BUSY);
    static char before[8192], after[8192];
    describe(kb, &T1, before, sizeof before);
    kb_close(kb);
    /* replayed from the journal */
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    describe(kb, &T1, after, sizeof after);
    CHECK_MSG(!strcmp(before, after), "before:\n%s\nafter:\n%s", before, after);
    /* a checkpoint, then more changes after it */
    CHECK_MSG(kb_checkpoint(kb, &err) == KVIK_OK, "%s", err.msg);
    CHECK(count_files(dir, "graph-1-") == 1 && count_files(dir, "journal-") == 1);
    CHECK(kb_store_file_delete(kb, &T1, store, fid[1], &err) == KVIK_OK);
    struct kb_attrs a = attrs1("k", "v");
    CHECK(kb_store_file_update(kb, &T1, store, fid[0], &a, NULL, &err) == KVIK_OK);
    kb_attrs_free(&a);
    CHECK(kb_store_add_file(kb, &T1, store, fid[1], NULL, NULL, NULL, &err) == KVIK_OK);
    describe(kb, &T1, before, sizeof before);
    kb_close(kb);
    /* the graph is loaded, not built: no chunk is embedded again on open */
    atomic_store(&g_embed_calls, 0);
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    CHECK(atomic_load(&g_embed_calls) == 0);
    describe(kb, &T1, after, sizeof after);
    CHECK_MSG(!strcmp(before, after), "before:\n%s\nafter:\n%s", before, after);
    kb_close(kb);
    /* a damaged graph file: the vectors are indexed again from the journal */
    char path[4200];
    snprintf(path, sizeof path, "%s/graph-1-%s.kvec", dir, store);
    FILE *f = fopen(path, "r+b");
    REQUIRE(f);
    fseek(f, 200, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    describe(kb, &T1, after, sizeof after);
    CHECK_MSG(!strcmp(before, after), "before:\n%s\nafter:\n%s", before, after);
    kb_close(kb);
    /* another embedding model is refused, naming both */
    struct kb_config c2 = c;
    snprintf(c2.model.id, sizeof c2.model.id, "another-model");
    CHECK(kb_open(&c2, &kb, &err) == KVIK_ERR_INVALID_ARG);
    CHECK_MSG(strstr(err.msg, "fake-bag-of-words") && strstr(err.msg, "another-model"), "%s", err.msg);
    c2 = c;
    c2.dim = 32;
    CHECK(kb_open(&c2, &kb, &err) == KVIK_ERR_INVALID_ARG);
    /* a torn last record is dropped; a damaged record in the middle is refused */
    snprintf(path, sizeof path, "%s/journal-1", dir);
    const char *seeds = getenv("KVIK_WRITE_FUZZ_SEEDS");
    if (seeds) { /* the fuzz target's seed: a checkpoint and changes after it */
        char cmd[8400];
        snprintf(cmd, sizeof cmd, "cp %s %s/seed-0", path, seeds);
        CHECK(system(cmd) == 0);
    }
    size_t n;
    char *j = test_slurp(path, &n);
    REQUIRE(j && n > 100);
    f = fopen(path, "ab");
    fwrite("\x40\x00\x00\x00\x01\x02\x03\x04partial", 1, 15, f);
    fclose(f);
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    describe(kb, &T1, after, sizeof after);
    CHECK(!strcmp(before, after));
    kb_close(kb);
    size_t n2;
    char *j2 = test_slurp(path, &n2);
    CHECK(j2 && n2 == n); /* cut back */
    free(j2);
    j[n / 2] ^= 0x10;
    f = fopen(path, "wb");
    fwrite(j, 1, n, f);
    fclose(f);
    CHECK(kb_open(&c, &kb, &err) == KVIK_ERR_FORMAT);
    CHECK_MSG(strstr(err.msg, "checksum") != NULL, "%s", err.msg);
    free(j);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A child adds files and store entries in a loop and writes each id to a
 * pipe once the call has returned; it is killed with SIGKILL mid-way.
 * Every id it reported is in the reopened folder. */
TEST(kb_killed_mid_insert_loses_nothing_acknowledged) {
    struct kb_config c0 = config(NULL);
    if (!c0.tok) return;
    char dir[] = "/tmp/kvik-kb-XXXXXX";
    REQUIRE(mkdtemp(dir));
    struct kb_config c = config(dir);
    struct kvik_err err = {0};
    struct kb *kb;
    REQUIRE(kb_open(&c, &kb, &err) == KVIK_OK);
    struct kb_store st;
    REQUIRE(kb_store_create(kb, &T1, "s", NULL, 0, &st, &err) == KVIK_OK);
    kb_close(kb);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct kb *k;
        if (kb_open(&c, &k, NULL)) _exit(3);
        char text[600];
        for (int i = 0;; i++) {
            int len = snprintf(text, sizeof text, "document %d. %s %s", i, DOCS[i % 3], DOCS[(i + 1) % 3]);
            struct kb_file f;
            if (kb_file_add(k, &T1, "d.txt", "assistants", text, (size_t)len, &f, NULL)) _exit(4);
            if (kb_store_add_file(k, &T1, st.id, f.id, NULL, NULL, NULL, NULL)) _exit(5);
            char line[64];
            int m = snprintf(line, sizeof line, "%s\n", f.id);
            if (write(fds[1], line, (size_t)m) != m) _exit(6);
        }
    }
    close(fds[1]);
    static char acked[1 << 16];
    size_t got = 0;
    while (got < 30 * 30) { /* some 30 acknowledged documents */
        ssize_t r = read(fds[0], acked + got, sizeof acked - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    for (ssize_t r; (r = read(fds[0], acked + got, sizeof acked - 1 - got)) > 0;) got += (size_t)r;
    close(fds[0]);
    acked[got] = 0;
    REQUIRE_MSG(WIFSIGNALED(status), "the child ended by itself (status %d)", status);
    REQUIRE_MSG(kb_open(&c, &kb, &err) == KVIK_OK, "%s", err.msg);
    int n = 0, missing = 0;
    for (char *line = strtok(acked, "\n"); line; line = strtok(NULL, "\n")) {
        struct kb_sfile sf;
        if (kb_store_file_get(kb, &T1, st.id, line, &sf, &err) != KVIK_OK) missing++;
        else kb_sfile_free(&sf);
        n++;
    }
    CHECK(n >= 30);
    CHECK_MSG(missing == 0, "%d of %d acknowledged documents lost", missing, n);
    kb_store_free(&st);
    kb_close(kb);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}
