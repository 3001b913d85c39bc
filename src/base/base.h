/*
 * base.h — the ground floor every other module stands on: error reporting,
 * logging, clocks, memory-mapped files, aligned allocation, half-precision
 * conversions, CPU feature detection and the persistent thread pool.
 *
 * Nothing here knows about models or tensors.
 */
#ifndef KVIK_BASE_H
#define KVIK_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kvik.h"

/* ---- errors ---------------------------------------------------------- */

/* One error: a status code and one line of text saying what went wrong and
 * where. Library functions take a `struct kvik_err *` that may be NULL. */
struct kvik_err {
    kvik_status code;
    char msg[320];
};

/* Records code and a printf-style message in err (if non-NULL); returns code
 * so callers can write `return err_set(err, KVIK_ERR_FORMAT, ...)`. */
kvik_status err_set(struct kvik_err *err, kvik_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies err's message into a caller buffer (public-API helper). */
void err_copy_out(const struct kvik_err *err, char *buf, size_t len);

/* ---- UTF-8 ------------------------------------------------------------ */

/* Length (1-4) of the well-formed UTF-8 sequence at p (n bytes left): no
 * overlong forms, surrogates or code points above U+10FFFF; 0 if there is
 * none there (or n is 0). */
size_t utf8_valid_seq(const uint8_t *p, size_t n);

/* Writes cp (<= U+10FFFF) as UTF-8 into out[4]; returns the byte count (1-4). */
int utf8_encode(uint32_t cp, uint8_t *out);

/* ---- growing strings -------------------------------------------------- */

/* A byte string that grows: p holds n bytes and a NUL (p is NULL until the
 * first put). After a failed growth oom is set and later puts do nothing;
 * the caller frees p. */
struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
};
void strbuf_put(struct strbuf *b, const char *s, size_t n);
void strbuf_puts(struct strbuf *b, const char *s);
/* s (NUL-terminated) as a JSON string: quoted, '"', '\\' and control
 * characters escaped. */
void strbuf_json(struct strbuf *b, const char *s);

/* ---- logging --------------------------------------------------------- */

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };
void log_set_level(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* ---- clock ----------------------------------------------------------- */

/* Monotonic time in nanoseconds. */
int64_t clock_ns(void);

/* ---- memory ---------------------------------------------------------- */

/* 64-byte aligned allocation, zero-filled; free with mem_free. NULL on
 * failure or on a size that overflows. From 8 MiB on, 2 MiB aligned and
 * advised to use transparent huge pages (MADV_HUGEPAGE). */
void *mem_alloc_aligned(size_t size);
void mem_free(void *p);

/* a * b with overflow detection: returns false if it does not fit. */
static inline bool mul_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline bool add_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

/* ---- hashing --------------------------------------------------------- */

/* A 64-bit hash of p[0..n) started from seed (not cryptographic: eight
 * bytes at a time, multiply-rotate, a full avalanche at the end). Equal
 * input and seed give equal output on every run and machine. */
uint64_t hash64(const void *p, size_t n, uint64_t seed);

/* Two 64-bit words mixed into one (order matters). */
static inline uint64_t hash64_pair(uint64_t a, uint64_t b) {
    uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
    x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27, x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* SHA-256 (FIPS 180-4), streamed: sha256_init, any number of
 * sha256_update calls, then sha256_final writes the 32-byte digest. */
struct sha256 {
    uint32_t h[8];    // chaining state
    uint64_t n;       // bytes hashed so far
    uint8_t buf[64];  // the block being filled: n % 64 bytes of it
};
void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *p, size_t n);
void sha256_final(struct sha256 *s, uint8_t out[32]);
/* The digest of a whole file as 64 lowercase hex digits plus NUL into hex;
 * false with errno set when it cannot be read. */
bool sha256_file(const char *path, char hex[65]);

/* CRC-32C (Castagnoli) of p[0..n): crc32c("123456789", 9) == 0xE3069283.
 * crc32c_update continues a checksum over more bytes (start from 0). */
uint32_t crc32c(const void *p, size_t n);
uint32_t crc32c_update(uint32_t crc, const void *p, size_t n);

/* ---- maps ------------------------------------------------------------ */

/* A map from 64-bit keys to values >= 0 (open addressing; zeroed is
 * empty). put replaces a key's value; false only when out of memory. */
struct map64 {
    uint64_t *key; /* [cap] */
    int64_t *val;  /* [cap]; -1: an empty slot */
    size_t cap, n; /* cap: 0 or a power of two; n: keys held */
};
int64_t map64_get(const struct map64 *m, uint64_t key); /* -1 when absent */
bool map64_put(struct map64 *m, uint64_t key, int64_t val);
bool map64_del(struct map64 *m, uint64_t key); /* whether key was there */
void map64_free(struct map64 *m);

/* ---- random numbers -------------------------------------------------- */

/* xoshiro256** (Blackman and Vigna), seeded with four outputs of
 * splitmix64: fast, 256 bits of state, not cryptographic. A seed gives the
 * same stream on every run and machine (the sampler's draws and the load
 * generator's arrivals depend on it). */
struct prng {
    uint64_t s[4]; /* xoshiro256** state */
};

/* One splitmix64 output; advances *x. */
uint64_t prng_splitmix64(uint64_t *x);
void prng_seed(struct prng *r, uint64_t seed);
uint64_t prng_next(struct prng *r);
/* Uniform in [0, 1) with 53 random bits. */
double prng_uniform(struct prng *r);

/* Peak resident set size of this process in bytes (0 if unknown). */
uint64_t mem_peak_rss(void);

/* ---- files ----------------------------------------------------------- */

/* A read-only memory map of a whole file. An empty file maps to
 * data == NULL, size == 0. */
struct mapped_file {
    const uint8_t *data;
    size_t size;
};

kvik_status file_map(struct mapped_file *mf, const char *path, struct kvik_err *err);
void file_unmap(struct mapped_file *mf);

/* ---- half precision -------------------------------------------------- */

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN). */
static inline float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            uint32_t e = 113; /* 127 - 15 + 1 */
            while (!(mant & 0x400u)) {
                mant <<= 1;
                e--;
            }
            bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    return f32_from_bits(bits);
}

/* binary32 -> binary16, round to nearest even; NaN stays NaN. */
static inline uint16_t fp32_to_fp16(float f) {
    uint32_t x = f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf */
    if (ax < 0x38800000u) {                                   /* half subnormal or 0 */
        uint32_t e = ax >> 23;
        if (e < 102) return (uint16_t)sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = (ax >> 13) - (112u << 10);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

static inline float bf16_to_fp32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

/* binary32 -> bfloat16, round to nearest even; NaN stays (quiet) NaN. */
static inline uint16_t fp32_to_bf16(float f) {
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- CPU features ---------------------------------------------------- */

struct cpu_features {
    bool avx2, fma, f16c;                  /* Haswell and later */
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    bool os_avx, os_avx512;                /* the OS saves the register state */
    bool amx_int8; /* AMX tiles with int8 products, and Linux granted this process the tile state */
    bool amx_bf16; /* and with bf16 products */
};

/* Detected once (CPUID + XGETBV); thread-safe after the first call. */
const struct cpu_features *cpu_features_get(void);

/* Number of online CPUs (at least 1). */
int cpu_count(void);

/* ---- thread pool ----------------------------------------------------- */

/*
 * A persistent pool of n threads (the caller counts as thread 0). pool_run
 * calls fn(arg, ith, nth) once on every thread and returns when all are done.
 * Workers wait by spinning briefly and then sleeping on a futex: a call
 * creates no thread, allocates nothing and takes no lock.
 * pool_run must not be called concurrently on one pool.
 */
struct pool;
typedef void (*pool_fn)(void *arg, int ith, int nth);

struct pool *pool_create(int n_threads, struct kvik_err *err);
void pool_free(struct pool *pool);
/* A spin-wait hint for loops that poll a flag another thread sets. */
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

int pool_size(const struct pool *pool);
void pool_run(struct pool *pool, pool_fn fn, void *arg);

#endif /* KVIK_BASE_H */
