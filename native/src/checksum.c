/* posenc_crc32c: the CRC-32C of shared-memory segments (docs/shm-format.md, data checksum 1),
 * exported from libposenc for the Python writer and reader (posenc.shm.checksum, via ctypes).
 *
 * The implementation is the one in native/include/posenc_shm.h (SSE4.2 crc32 instruction in
 * three interleaved lanes when the CPU has it, slice-by-8 tables otherwise), so the C reader,
 * the C server and Python compute the checksum with the same code. */
#include "posenc_shm.h"

/* CRC-32C of n bytes at buf continuing crc (0 to start), chaining like zlib's crc32(). */
__attribute__((visibility("default"))) uint32_t posenc_crc32c(uint32_t crc, const void *buf, size_t n);

uint32_t posenc_crc32c(uint32_t crc, const void *buf, size_t n) { return posenc_shm_crc32c(crc, buf, n); }
