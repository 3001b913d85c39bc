/*
 * crc32c.c — CRC-32C (Castagnoli: the reflected polynomial 0x82F63B78,
 * initial value and final xor 0xFFFFFFFF), the checksum of iSCSI, ext4
 * and SSE4.2's crc32 instruction. A byte-at-a-time table, built once.
 */
#include <pthread.h>

#include "base/base.h"

static uint32_t g_table[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        g_table[i] = c;
    }
}

uint32_t crc32c_update(uint32_t crc, const void *p, size_t n) {
    pthread_once(&g_once, build_table);
    const uint8_t *b = p;
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) c = g_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return ~c;
}

uint32_t crc32c(const void *p, size_t n) { return crc32c_update(0, p, n); }
