/* posenc_crc32c: the CRC-32C of shared-memory segments (docs/shm-format.md, data checksum 1),
 * exported from libposenc for the Python writer and reader (posenc.shm.checksum, via ctypes).
 *
 * The implementation is the one in native/include/posenc_shm.h (VPCLMULQDQ folding with
 * AVX-512 or AVX2 when the CPU has it, else the SSE4.2 crc32 instruction in three interleaved lanes, else
 * slice-by-8 tables), so the C reader, the C server and Python compute the checksum with the
 * same code. posenc_crc32c_by runs one named kernel, so tests can check every kernel the CPU
 * has against the others and the benchmark can time them side by side; posenc_crc32c_pieces_by
 * feeds it the data piece by piece, as libposenc's sincos_rows_crc feeds it row tiles. */
#include "posenc_shm.h"

#define EXPORT __attribute__((visibility("default")))

/* CRC-32C of n bytes at buf continuing crc (0 to start), chaining like zlib's crc32(). */
EXPORT uint32_t posenc_crc32c(uint32_t crc, const void *buf, size_t n);
/* The kernel posenc_crc32c runs here: "vpclmulqdq", "vpclmulqdq256", "sse4.2" or "table". */
EXPORT const char *posenc_crc32c_kernel(void);
/* The same with the named kernel; 0, or -1 where this CPU or build lacks it. */
EXPORT int posenc_crc32c_by(const char *kernel, uint32_t crc, const void *buf, size_t n, uint32_t *out);
/* The same as a stream fed `piece` bytes at a time (the last piece shorter; piece >= 1). */
EXPORT int posenc_crc32c_pieces_by(const char *kernel, uint32_t crc, const void *buf, size_t n, size_t piece,
                                   uint32_t *out);

uint32_t posenc_crc32c(uint32_t crc, const void *buf, size_t n) { return posenc_shm_crc32c(crc, buf, n); }

const char *posenc_crc32c_kernel(void) { return posenc_shm_crc32c_kernel(); }

int posenc_crc32c_by(const char *kernel, uint32_t crc, const void *buf, size_t n, uint32_t *out)
{
    return posenc_shm_crc32c_by(kernel, crc, buf, n, out);
}

int posenc_crc32c_pieces_by(const char *kernel, uint32_t crc, const void *buf, size_t n, size_t piece, uint32_t *out)
{
    posenc_shm_crc32c_stream s;
    if (piece < 1 || posenc_shm_crc32c_begin_by(&s, kernel, crc) != 0) return -1;
    for (size_t at = 0; at < n; at += piece)
        posenc_shm_crc32c_update(&s, (const char *)buf + at, n - at < piece ? n - at : piece);
    *out = posenc_shm_crc32c_end(&s);
    return 0;
}
