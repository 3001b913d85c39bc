/*
 * cpu.c — what the processor can do, read once from CPUID and XGETBV.
 *
 * A feature counts only if the OS also saves its register state (XCR0), so a
 * kernel built for AVX-512 is never chosen where the OS would fault on it.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux hands out the 8 KiB AMX tile state only to processes that ask
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it the
 * first tile instruction faults. */
static bool amx_request_permission(void) {
#ifdef __linux__
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return false;
#endif
}

static void detect(struct cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    if (osxsave) {
        uint64_t xcr0 = read_xcr0();
        f->os_avx = avx && (xcr0 & 0x6) == 0x6;          /* SSE + AVX state */
        f->os_avx512 = f->os_avx && (xcr0 & 0xe0) == 0xe0; /* opmask + ZMM */
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    f->avx2 = f->os_avx && ((b >> 5) & 1);
    if (f->os_avx512) {
        f->avx512f = (b >> 16) & 1;
        f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f->avx512bf16 = (a >> 5) & 1;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && f->avx512f && ((d >> 24) & 1) && ((d >> 25) & 1) &&
        (read_xcr0() & 0x60000) == 0x60000)
        f->amx_int8 = amx_request_permission();
    f->amx_bf16 = f->amx_int8 && ((d >> 22) & 1);
    if (!f->os_avx) f->fma = f->f16c = false;
}
#else
static void detect(struct cpu_features *f) { (void)f; }
#endif

static struct cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect_once(void) { detect(&g_features); }

const struct cpu_features *cpu_features_get(void) {
    pthread_once(&g_once, detect_once);
    return &g_features;
}

int cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
