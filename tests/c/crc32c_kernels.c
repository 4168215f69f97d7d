/* Every CRC-32C kernel of posenc_shm.h this CPU runs, against a bitwise CRC-32C: lengths around
 * each kernel's block edges (256-byte folds from 512 bytes on, 3 x 32 KiB crc32 lanes), every
 * start offset modulo 8 and a few more, chaining across a split, and streams fed in pieces
 * across those edges (as sincos_rows_crc feeds row tiles). Prints one "kernel NAME: N checks"
 * or "kernel NAME: not runnable" line per kernel and "M mismatches"; exits 1 on any mismatch.
 *
 * Built with -DPOSENC_TEST_EMULATE_VPCLMUL256 (tests/test_crc32c_kernels.py, on an AVX2 host
 * without VPCLMULQDQ, like this project's Zen 2 machine; qemu 7.2 does not emulate VPCLMULQDQ
 * either): the 256-bit carry-less multiply comes from SIMDe (two 128-bit PCLMULQDQs) and the
 * CPU check reports VPCLMULQDQ, so "vpclmulqdq256" runs every other instruction of its own
 * code, and is the kernel posenc_shm_crc32c picks. */
#ifdef POSENC_TEST_EMULATE_VPCLMUL256
#define _DEFAULT_SOURCE /* what posenc_shm.h sets when it is included first */
#include <simde/x86/clmul.h>
#include <string.h>
static int posenc_test_cpu_supports(const char *feature)
{
    if (!strcmp(feature, "vpclmulqdq")) return 1;
    if (!strcmp(feature, "avx512f")) return 0;
    __builtin_cpu_init();
    if (!strcmp(feature, "avx2")) return __builtin_cpu_supports("avx2");
    return __builtin_cpu_supports("sse4.2") && !strcmp(feature, "sse4.2");
}
#define __builtin_cpu_supports(feature) posenc_test_cpu_supports(feature)
#include <immintrin.h> /* first, so the name below replaces only posenc_shm.h's use of it */
#define _mm256_clmulepi64_epi128 simde_mm256_clmulepi64_epi128
#endif
#include "posenc_shm.h"

#include <stdlib.h>

static uint32_t crc32c_bitwise(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

int main(void)
{
    static const char *kernels[] = {"table", "sse4.2", "vpclmulqdq256", "vpclmulqdq"};
    static const size_t lengths[] = {0,    1,    3,    15,   16,          255,         256,   257,  511,
                                     512,  513,  767,  768,  1023,        1024,        1025,  4113, 8192,
                                     8447, 8448, 8449, 65537, 3 * 32768 - 1, 3 * 32768 + 255, 200001};
    static const size_t pieces[] = {1, 7, 64, 255, 256, 257, 511, 513, 8192};
    const size_t size = 200001 + 64;
    unsigned char *data = malloc(size);
    if (!data) return 2;
    uint32_t x = 12345;
    for (size_t i = 0; i < size; i++) data[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
    printf("best: %s\n", posenc_shm_crc32c_kernel());
    /* the constants written out in the header: the three-lane join's and the folds' */
    int failures = (posenc_shm__crc32c_shift(POSENC_SHM__CRC32C_LANE) != POSENC_SHM__CRC32C_LANE_SHIFT1) +
                   (posenc_shm__crc32c_shift(2 * POSENC_SHM__CRC32C_LANE) != POSENC_SHM__CRC32C_LANE_SHIFT2) +
                   ((uint64_t)posenc_shm__crc32c_shift(POSENC_SHM__CRC32C_FOLD + 4) << 1 !=
                    (uint64_t)POSENC_SHM__CRC32C_FOLD_K_LO) +
                   ((uint64_t)posenc_shm__crc32c_shift(POSENC_SHM__CRC32C_FOLD - 4) << 1 !=
                    (uint64_t)POSENC_SHM__CRC32C_FOLD_K_HI);
    if (failures) printf("mismatch: the constants written out in posenc_shm.h\n");
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        uint32_t probe;
        if (posenc_shm_crc32c_by(kernels[k], 0, "", 0, &probe) != 0) {
            printf("kernel %s: not runnable\n", kernels[k]);
            continue;
        }
        int checks = 0;
        for (size_t offset = 0; offset < 64; offset += offset < 8 ? 1 : 13)
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
                size_t n = lengths[li];
                const unsigned char *p = data + offset;
                uint32_t seed = (uint32_t)(n * 2654435761u + offset), want = crc32c_bitwise(seed, p, n);
                uint32_t whole = 0, head = 0, chained = 0;
                posenc_shm_crc32c_by(kernels[k], seed, p, n, &whole);
                posenc_shm_crc32c_by(kernels[k], seed, p, n / 3, &head);
                posenc_shm_crc32c_by(kernels[k], head, p + n / 3, n - n / 3, &chained);
                failures += (whole != want) + (chained != want);
                checks += 2;
                if (whole != want || chained != want)
                    printf("mismatch %s offset %zu length %zu: %08x / %08x, expected %08x\n", kernels[k], offset, n,
                           whole, chained, want);
                if (offset % 4 || n > 70000) continue; /* pieces: fewer offsets, the shorter lengths */
                for (size_t pi = 0; pi < sizeof pieces / sizeof pieces[0]; pi++) {
                    posenc_shm_crc32c_stream s;
                    posenc_shm_crc32c_begin_by(&s, kernels[k], seed);
                    for (size_t at = 0; at < n; at += pieces[pi])
                        posenc_shm_crc32c_update(&s, p + at, n - at < pieces[pi] ? n - at : pieces[pi]);
                    uint32_t got = posenc_shm_crc32c_end(&s);
                    failures += got != want;
                    checks++;
                    if (got != want)
                        printf("mismatch %s offset %zu length %zu in pieces of %zu: %08x, expected %08x\n", kernels[k],
                               offset, n, pieces[pi], got, want);
                }
            }
        printf("kernel %s: %d checks\n", kernels[k], checks);
    }
    printf("%d mismatches\n", failures);
    free(data);
    return failures ? 1 : 0;
}
