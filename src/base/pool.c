/*
 * pool.c — a persistent thread pool for data-parallel kernels.
 *
 * pool_run publishes (fn, arg) and bumps a generation counter; workers that
 * see a new generation run fn and count themselves out on `pending`. Waiting
 * is a short spin (the next call usually arrives within microseconds during
 * a forward pass) followed by a futex sleep, so idle pools cost no CPU. No
 * mutex, allocation or thread creation happens per call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/base.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex_wait(atomic_uint *addr, unsigned expected) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void futex_wake_all(atomic_uint *addr) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}
#else
#include <sched.h>
static void futex_wait(atomic_uint *addr, unsigned expected) {
    (void)addr;
    (void)expected;
    sched_yield();
}
static void futex_wake_all(atomic_uint *addr) { (void)addr; }
#endif

enum { SPIN_ITERS = 1 << 14 };

struct worker {
    struct pool *pool;
    int ith;
    pthread_t thread;
};

struct pool {
    int n;
    struct worker *workers; /* [n - 1] */
    pool_fn fn;
    void *arg;
    _Alignas(64) atomic_uint generation;
    atomic_int gen_sleepers; /* workers asleep on `generation` */
    _Alignas(64) atomic_uint pending;
    atomic_int pending_sleepers; /* 0 or 1: the caller asleep on `pending` */
    atomic_bool stop;
};

/* Waits until *addr != value: spin first, then sleep on the futex. The
 * sleeper count is raised before the final check (sequentially consistent on
 * both sides), so a waker that sees no sleeper can skip the system call. */
static unsigned wait_change(atomic_uint *addr, atomic_int *sleepers, unsigned value) {
    unsigned cur;
    for (int i = 0; i < SPIN_ITERS; i++) {
        cur = atomic_load_explicit(addr, memory_order_acquire);
        if (cur != value) return cur;
        cpu_relax();
    }
    atomic_fetch_add(sleepers, 1);
    while ((cur = atomic_load(addr)) == value) futex_wait(addr, value);
    atomic_fetch_sub(sleepers, 1);
    return cur;
}

static void wake(atomic_uint *addr, atomic_int *sleepers) {
    if (atomic_load(sleepers) > 0) futex_wake_all(addr);
}

static void *worker_main(void *p) {
    struct worker *w = p;
    struct pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_change(&pool->generation, &pool->gen_sleepers, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        pool->fn(pool->arg, w->ith, pool->n);
        if (atomic_fetch_sub(&pool->pending, 1) == 1) wake(&pool->pending, &pool->pending_sleepers);
    }
    return NULL;
}

struct pool *pool_create(int n_threads, struct kvik_err *err) {
    if (n_threads < 1 || n_threads > 1024) {
        err_set(err, KVIK_ERR_INVALID_ARG, "thread count %d out of range 1..1024", n_threads);
        return NULL;
    }
    struct pool *pool = calloc(1, sizeof *pool);
    if (!pool) goto nomem;
    pool->n = n_threads;
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) goto nomem;
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker *w = &pool->workers[i - 1];
        w->pool = pool;
        w->ith = i;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            pool->n = i; /* only join the threads that exist */
            pool_free(pool);
            err_set(err, KVIK_ERR_NOMEM, "pthread_create: %s", strerror(rc));
            return NULL;
        }
    }
    return pool;
nomem:
    if (pool) free(pool->workers);
    free(pool);
    err_set(err, KVIK_ERR_NOMEM, "out of memory creating thread pool");
    return NULL;
}

void pool_free(struct pool *pool) {
    if (!pool) return;
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_acq_rel);
    futex_wake_all(&pool->generation);
    for (int i = 1; i < pool->n; i++) pthread_join(pool->workers[i - 1].thread, NULL);
    free(pool->workers);
    free(pool);
}

int pool_size(const struct pool *pool) { return pool->n; }

void pool_run(struct pool *pool, pool_fn fn, void *arg) {
    if (pool->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, (unsigned)pool->n - 1, memory_order_relaxed);
    atomic_fetch_add(&pool->generation, 1);
    wake(&pool->generation, &pool->gen_sleepers);
    fn(arg, 0, pool->n);
    unsigned left;
    while ((left = atomic_load(&pool->pending)) != 0)
        wait_change(&pool->pending, &pool->pending_sleepers, left);
}
