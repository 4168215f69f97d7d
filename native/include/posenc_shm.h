/*
 * posenc_shm.h - header-only C reader for posenc shared-memory tables (segment format v1).
 *
 * The Python service (`posenc.shm.TableStore`, `posenc table build`) publishes tables as
 * files in a shm directory (default /dev/shm); this header attaches them read-only from
 * any C/C++ process. Format and protocol: docs/shm-format.md.
 *
 *     posenc_shm_table t;
 *     int rc = posenc_shm_attach(&t, "/dev/shm", "sin128", POSENC_SHM_VERIFY);
 *     if (rc != POSENC_SHM_OK) { fprintf(stderr, "%s\n", t.error); return 1; }
 *     const float *row = (const float *)posenc_shm_row(&t, 4096);  // NULL outside [t.start, t.stop)
 *     posenc_shm_detach(&t);
 *
 * A reader never writes, locks or unlinks anything; the mapping stays valid after the
 * service replaces or removes the table. Attaching makes every check of the doc's
 * "Validating a segment" list except parsing the spec JSON (posenc_shm__check_segment: it
 * does check the spec bytes against spec_hash, a SHA-256 of those bytes), with
 * the same words as the Python reader; the data checksum is CRC-32 or CRC-32C as the
 * header's `checksum` field says (CRC-32C with VPCLMULQDQ, 512-bit with AVX-512 or 256-bit
 * with AVX2, or the SSE4.2 instruction where available; posenc_shm_crc32c_begin/update/end compute it piece by piece, as a writer
 * producing the data can). Needs POSIX mmap, GCC/Clang __atomic builtins and
 * a little-endian host. All functions are static inline: include it in as many files as you like.
 */
#ifndef POSENC_SHM_H
#define POSENC_SHM_H

#if !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _DEFAULT_SOURCE /* O_CLOEXEC, MAP_POPULATE, nanosleep under -std=c11 (include this header first) */
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "posenc_shm.h reads little-endian files and assumes a little-endian host"
#endif

#define POSENC_SHM_MAGIC "POSENCTB"
#define POSENC_SHM_VERSION 1u
#define POSENC_SHM_HEADER_SIZE 256u
#define POSENC_SHM_NAME_MAX 64
#define POSENC_SHM_REGISTRY_FILE "posenc-registry"
#define POSENC_SHM_REGISTRY_MAGIC "POSENCRG"
#define POSENC_SHM_REGISTRY_VERSION 1u
#define POSENC_SHM_REGISTRY_CAPACITY 1024u
#define POSENC_SHM_REGISTRY_HEADER 128u
#define POSENC_SHM_REGISTRY_SLOT 128u
#define POSENC_SHM_REGISTRY_SIZE (POSENC_SHM_REGISTRY_HEADER + POSENC_SHM_REGISTRY_CAPACITY * POSENC_SHM_REGISTRY_SLOT)
#define POSENC_SHM_MAX_GENERATION 0x7fffffffffffffffull /* generations are 1..2^63-1 */
#define POSENC_SHM_RESERVED_AT 180u                      /* header bytes 180..255 are zero */

/* Segment states (header offset 12) and dtype codes (offset 24). */
enum { POSENC_SHM_EMPTY = 0, POSENC_SHM_BUILDING = 1, POSENC_SHM_READY = 2 };
enum { POSENC_SHM_FLOAT32 = 1, POSENC_SHM_FLOAT64 = 2 };
/* A named computed encoding (docs/shm-format.md, "Computed tables"): no rows are stored; the data is
 * a 32-byte prefix (i64 position_offset, 24 zero bytes) and the binary protocol's inline spec block,
 * from which a reader computes the rows of any position in [start, stop). itemsize 1. */
enum { POSENC_SHM_SPEC = 3 };
#define POSENC_SHM_SPEC_PREFIX 32u
/* Data checksum algorithms (header offset 176). */
enum { POSENC_SHM_CRC32 = 0, POSENC_SHM_CRC32C = 1 };

/* Flags for attach. */
#define POSENC_SHM_VERIFY 1 /* recompute the data checksum (one pass over the table) */

/* Return codes: 0 or a negative POSENC_SHM_E*. `t->error` holds the detailed message. */
enum {
    POSENC_SHM_OK = 0,
    POSENC_SHM_EBADNAME = -1,   /* name is not 1..64 of [A-Za-z0-9_.-], or contains ".." */
    POSENC_SHM_ENOTFOUND = -2,  /* no registry, or no table of that name */
    POSENC_SHM_EOS = -3,        /* open/fstat/mmap failed: see t->os_errno */
    POSENC_SHM_ETRUNCATED = -4, /* file shorter than its header says */
    POSENC_SHM_EMAGIC = -5,     /* not a posenc segment */
    POSENC_SHM_EVERSION = -6,   /* a format version this reader does not know */
    POSENC_SHM_ESTATE = -7,     /* not READY (BUILDING: being written, or its writer died) */
    POSENC_SHM_EHEADER = -8,    /* inconsistent header, trailing bytes, padding or header CRC mismatch */
    POSENC_SHM_ECHECKSUM = -9,  /* data checksum mismatch */
    POSENC_SHM_EREGISTRY = -10, /* registry file unreadable or of an unknown layout */
    POSENC_SHM_EBUSY = -11      /* a registry slot stayed busy (odd seqlock), or the table kept being replaced */
};

typedef struct posenc_shm_table {
    const uint8_t *base;   /* the whole mapped file */
    size_t map_size;
    const uint8_t *data;   /* rows * row_bytes bytes (a computed table: its spec block), 64-byte aligned */
    int64_t start;         /* position of row 0 */
    int64_t stop;          /* one past the last position */
    uint64_t rows, width;  /* values per row */
    uint32_t dtype;        /* POSENC_SHM_FLOAT32, POSENC_SHM_FLOAT64 or POSENC_SHM_SPEC */
    uint32_t itemsize;     /* 4 or 8 (1 for POSENC_SHM_SPEC) */
    size_t row_bytes;      /* 0 for POSENC_SHM_SPEC: no row is stored */
    uint64_t generation;
    uint32_t writer_pid;
    int64_t created_ns;    /* unix time, nanoseconds */
    uint32_t data_crc;
    uint32_t checksum;     /* POSENC_SHM_CRC32 or POSENC_SHM_CRC32C: what data_crc is */
    const char *spec_json; /* canonical spec JSON, NOT NUL-terminated */
    uint32_t spec_json_len;
    char spec_hash[17];
    char name[POSENC_SHM_NAME_MAX + 1];
    int os_errno;          /* errno of the failed call for POSENC_SHM_EOS */
    char error[320];       /* what went wrong, naming the file */
    uint64_t data_nbytes;  /* bytes at data: rows * row_bytes, or the computed table's spec block */
} posenc_shm_table;

/* ---- little helpers ------------------------------------------------------------------ */

static inline uint32_t posenc_shm__u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t posenc_shm__u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* True if n bytes at p are all zero. */
static inline int posenc_shm__zero(const uint8_t *p, size_t n)
{
    while (n--)
        if (*p++) return 0;
    return 1;
}

__attribute__((format(printf, 3, 4))) static inline int posenc_shm__fail(posenc_shm_table *t, int code,
                                                                          const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(t->error, sizeof t->error, fmt, args);
    va_end(args);
    return code;
}

/* CRC-32 (zlib / IEEE 802.3, reflected 0xEDB88320) and CRC-32C (Castagnoli, reflected
 * 0x82F63B78), slice-by-8 in software. Both start and end with ~crc, so chaining works like
 * zlib's crc32(crc, p, n). CRC-32 is the header checksum and data checksum 0; CRC-32C is
 * data checksum 1, computed with the SSE4.2 crc32 instruction where the CPU has it. */
typedef struct { uint32_t t[8][256]; } posenc_shm_crc_tables;

#define POSENC_SHM_CRC32_POLY 0xEDB88320u
#define POSENC_SHM_CRC32C_POLY 0x82F63B78u

static inline void posenc_shm_crc_init_poly(posenc_shm_crc_tables *c, uint32_t poly)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int k = 0; k < 8; k++) v = (v & 1u) ? (v >> 1) ^ poly : v >> 1;
        c->t[0][i] = v;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++) c->t[k][i] = (c->t[k - 1][i] >> 8) ^ c->t[0][c->t[k - 1][i] & 0xffu];
}

/* Tables of CRC-32 (zlib's). */
static inline void posenc_shm_crc_init(posenc_shm_crc_tables *c) { posenc_shm_crc_init_poly(c, POSENC_SHM_CRC32_POLY); }

/* Continue `crc` (0 to start) over n bytes with the CRC whose tables `c` holds. */
static inline uint32_t posenc_shm_crc32(const posenc_shm_crc_tables *c, uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = (const uint8_t *)buf;
    crc = ~crc;
    while (n >= 8) {
        uint64_t v = posenc_shm__u64(p) ^ crc;
        crc = c->t[7][v & 0xff] ^ c->t[6][(v >> 8) & 0xff] ^ c->t[5][(v >> 16) & 0xff] ^
              c->t[4][(v >> 24) & 0xff] ^ c->t[3][(v >> 32) & 0xff] ^ c->t[2][(v >> 40) & 0xff] ^
              c->t[1][(v >> 48) & 0xff] ^ c->t[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = c->t[0][(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* a * b modulo the CRC-32C polynomial, both reflected (x^0 is bit 31): zlib's multmodp,
 * without branches (with them, each bit of a was a coin-flip branch: ~290 ns a call on Zen 2,
 * a tenth of the crc32 instructions' time on a 96 KiB block; 2.5x faster so). */
static inline uint32_t posenc_shm__crc32c_mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (int i = 0; i < 32; i++, a <<= 1) {
        p ^= b & (0u - (a >> 31));
        b = (b >> 1) ^ (POSENC_SHM_CRC32C_POLY & (0u - (b & 1u)));
    }
    return p;
}

/* x^(8n) modulo the polynomial: appending n zero bytes to a message multiplies its CRC
 * register by this. The kernels' constants are its values, written out (tests check them). */
static inline uint32_t posenc_shm__crc32c_shift(uint64_t n)
{
    uint32_t power = 1u << 31, square = 1u << 30; /* x^0, x^1 */
    for (uint64_t e = n << 3; e; e >>= 1) {
        if (e & 1u) power = posenc_shm__crc32c_mulmod(square, power);
        square = posenc_shm__crc32c_mulmod(square, square);
    }
    return power;
}

/* Bytes per lane: three lanes run at once (the crc32 instruction has a latency of 3 cycles
 * and a throughput of 1), then are joined with two multiplications modulo the polynomial, by
 * x^(8*LANE) and x^(16*LANE) mod P: posenc_shm__crc32c_shift(LANE) and (2*LANE), written out
 * (computing them cost ~2 us a call; tests/c/crc32c_kernels.c checks them). */
#define POSENC_SHM__CRC32C_LANE 32768u
#define POSENC_SHM__CRC32C_LANE_SHIFT1 0xE2EA32DCu
#define POSENC_SHM__CRC32C_LANE_SHIFT2 0xFE7740E6u

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define POSENC_SHM_HAVE_CRC32C_HW 1

__attribute__((target("sse4.2"))) static inline uint32_t posenc_shm__crc32c_hw(uint32_t crc, const uint8_t *p,
                                                                               size_t n)
{
    uint64_t r = (uint32_t)~crc;
    for (; n && ((uintptr_t)p & 7u); n--) r = __builtin_ia32_crc32qi((uint32_t)r, *p++);
    if (n >= 3 * (size_t)POSENC_SHM__CRC32C_LANE) {
        const uint32_t one = POSENC_SHM__CRC32C_LANE_SHIFT1, two = POSENC_SHM__CRC32C_LANE_SHIFT2;
        const size_t lane = POSENC_SHM__CRC32C_LANE;
        for (; n >= 3 * lane; n -= 3 * lane, p += 3 * lane) {
            uint64_t a = r, b = 0, c = 0;
            for (size_t i = 0; i < lane; i += 8) {
                a = __builtin_ia32_crc32di(a, posenc_shm__u64(p + i));
                b = __builtin_ia32_crc32di(b, posenc_shm__u64(p + lane + i));
                c = __builtin_ia32_crc32di(c, posenc_shm__u64(p + 2 * lane + i));
            }
            r = posenc_shm__crc32c_mulmod(two, (uint32_t)a) ^ posenc_shm__crc32c_mulmod(one, (uint32_t)b) ^ (uint32_t)c;
        }
    }
    for (; n >= 8; n -= 8, p += 8) r = __builtin_ia32_crc32di(r, posenc_shm__u64(p));
    for (; n; n--) r = __builtin_ia32_crc32qi((uint32_t)r, *p++);
    return ~(uint32_t)r;
}
#endif

#if defined(POSENC_SHM_HAVE_CRC32C_HW) && defined(__x86_64__) && \
    ((defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10) || (defined(__clang__) && __clang_major__ >= 8))
#define POSENC_SHM_HAVE_CRC32C_VPCLMUL 1
#include <immintrin.h>
#endif

/* Bytes folded per iteration by the carry-less multiplication kernels: 256, as four 512-bit
 * or eight 256-bit accumulators; and their folding constants (below), x^(2048+32) and
 * x^(2048-32) mod P, reflected and shifted left by one: posenc_shm__crc32c_shift(256 + 4) << 1
 * and (256 - 4) << 1, written out (computing them cost each stream ~2 us; tests/c/crc32c_kernels.c
 * checks them). */
#define POSENC_SHM__CRC32C_FOLD 256u
#define POSENC_SHM__CRC32C_FOLD_K_LO 0xDCB17AA4ll
#define POSENC_SHM__CRC32C_FOLD_K_HI 0xB9E02B86ll

/* A CRC-32C computed piece by piece (posenc_shm_crc32c_begin / _update / _end): the value is
 * the CRC-32C of all the pieces in order, whatever their sizes, so a writer can checksum
 * data while it is still in cache, as it produces it (libposenc's sincos_rows_crc folds each
 * 8 KiB tile of rows in before streaming it out). With a folding kernel the accumulators and
 * the bytes short of a whole 256-byte block are kept here between pieces; the other kernels
 * keep a CRC register. */
typedef struct posenc_shm_crc32c_stream {
    uint8_t fold[POSENC_SHM__CRC32C_FOLD];    /* folding kernels: the accumulators, once `folding` */
    uint8_t pending[POSENC_SHM__CRC32C_FOLD]; /* folding kernels: bytes waiting for a whole block */
    uint32_t crc;       /* the CRC so far (other kernels), or the one to continue (before any fold) */
    uint32_t n_pending;
    int kernel;         /* POSENC_SHM__K_* */
    int folding;
    posenc_shm_crc_tables tables; /* "table" kernel only */
} posenc_shm_crc32c_stream;

/* Kernel codes; the folding ones (VPCLMUL and up) share everything but the fold loop. */
enum {
    POSENC_SHM__K_TABLE = 0,
    POSENC_SHM__K_SSE42 = 1,
    POSENC_SHM__K_VPCLMUL = 2,    /* "vpclmulqdq": AVX-512, 512-bit accumulators */
    POSENC_SHM__K_VPCLMUL256 = 3, /* "vpclmulqdq256": AVX2 + VPCLMULQDQ (Zen 3, Alder Lake), 256-bit */
};

#ifdef POSENC_SHM_HAVE_CRC32C_VPCLMUL
/* CRC-32C by carry-less multiplication, 256 or 512 bits per instruction. The data is folded into 256 bytes of accumulators,
 * 256 bytes at a time. A 128-bit lane L followed by 256 bytes D has the same CRC as
 * (L * x^2048 mod P) xor D's first 16 bytes, and in the bit-reflected domain that product is
 * clmul(L.lo, x^(2048+32) mod P) xor clmul(L.hi, x^(2048-32) mod P), each constant reflected
 * and shifted left by one (Intel's "Fast CRC computation using PCLMULQDQ"). At the end the 256
 * accumulator bytes stand in for everything folded so far, so the crc32 instruction finishes
 * them and the bytes left over: no Barrett reduction is needed. The initial register is xored
 * into the first four bytes.
 *
 * Every lane folds onto the lane 256 bytes on, whatever the register width, so the 512- and
 * 256-bit kernels compute the same accumulator bytes with the same constants and differ only
 * in how many lanes one instruction carries: POSENC_SHM__CRC32C_FOLD_BODY is the one loop,
 * stamped per width with that width's load, store, seed and fold. Each fold kernel folds n
 * bytes (a multiple of 256) at p into the stream's accumulators. (A 128-bit PCLMULQDQ stamp
 * ran at 0.4x the three-lane crc32 kernel on Zen 2 and is not kept.) */
#define POSENC_SHM__CRC32C_FOLD_BODY(V, K, LOAD, STORE, SEED, FOLD)                                       \
    enum { lanes = POSENC_SHM__CRC32C_FOLD / sizeof(V) };                                                  \
    const uint8_t *from = s->fold;                                                                         \
    if (!s->folding) {                                                                                     \
        from = p;                                                                                          \
        p += POSENC_SHM__CRC32C_FOLD;                                                                      \
        n -= POSENC_SHM__CRC32C_FOLD;                                                                      \
    }                                                                                                      \
    V x[lanes];                                                                                            \
    for (int i = 0; i < lanes; i++) x[i] = LOAD(from + sizeof(V) * i);                                     \
    if (!s->folding) x[0] = SEED(x[0], ~s->crc);                                                           \
    s->folding = 1;                                                                                        \
    for (; n >= POSENC_SHM__CRC32C_FOLD; n -= POSENC_SHM__CRC32C_FOLD, p += POSENC_SHM__CRC32C_FOLD)       \
        for (int i = 0; i < lanes; i++) x[i] = FOLD(x[i], K, LOAD(p + sizeof(V) * i));                     \
    for (int i = 0; i < lanes; i++) STORE(s->fold + sizeof(V) * i, x[i]);

#define POSENC_SHM__TARGET_512 __attribute__((target("avx512f,vpclmulqdq,sse4.2")))
POSENC_SHM__TARGET_512 static inline __m512i posenc_shm__load512_vpclmul(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}
POSENC_SHM__TARGET_512 static inline void posenc_shm__store512_vpclmul(uint8_t *p, __m512i x)
{
    _mm512_storeu_si512((void *)p, x);
}
POSENC_SHM__TARGET_512 static inline __m512i posenc_shm__seed512_vpclmul(__m512i x, uint32_t r)
{
    return _mm512_xor_si512(x, _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)r), 0));
}
POSENC_SHM__TARGET_512 static inline __m512i posenc_shm__fold512_vpclmul(__m512i x, __m512i k, __m512i d)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), d,
                                     0x96); /* 0x96: a ^ b ^ c */
}
POSENC_SHM__TARGET_512 static inline void posenc_shm__crc32c_fold_vpclmul(posenc_shm_crc32c_stream *s,
                                                                          const uint8_t *p, size_t n)
{
    const __m512i k = _mm512_broadcast_i32x4(_mm_set_epi64x(POSENC_SHM__CRC32C_FOLD_K_HI, POSENC_SHM__CRC32C_FOLD_K_LO));
    POSENC_SHM__CRC32C_FOLD_BODY(__m512i, k, posenc_shm__load512_vpclmul, posenc_shm__store512_vpclmul,
                                 posenc_shm__seed512_vpclmul, posenc_shm__fold512_vpclmul)
}

#define POSENC_SHM__TARGET_256 __attribute__((target("avx2,vpclmulqdq,sse4.2")))
POSENC_SHM__TARGET_256 static inline __m256i posenc_shm__load256_vpclmul(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}
POSENC_SHM__TARGET_256 static inline void posenc_shm__store256_vpclmul(uint8_t *p, __m256i x)
{
    _mm256_storeu_si256((__m256i *)p, x);
}
POSENC_SHM__TARGET_256 static inline __m256i posenc_shm__seed256_vpclmul(__m256i x, uint32_t r)
{
    return _mm256_xor_si256(x, _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_cvtsi32_si128((int)r), 0));
}
POSENC_SHM__TARGET_256 static inline __m256i posenc_shm__fold256_vpclmul(__m256i x, __m256i k, __m256i d)
{
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)),
                            d);
}
POSENC_SHM__TARGET_256 static inline void posenc_shm__crc32c_fold256_vpclmul(posenc_shm_crc32c_stream *s,
                                                                             const uint8_t *p, size_t n)
{
    const __m256i k = _mm256_broadcastsi128_si256(_mm_set_epi64x(POSENC_SHM__CRC32C_FOLD_K_HI, POSENC_SHM__CRC32C_FOLD_K_LO));
    POSENC_SHM__CRC32C_FOLD_BODY(__m256i, k, posenc_shm__load256_vpclmul, posenc_shm__store256_vpclmul,
                                 posenc_shm__seed256_vpclmul, posenc_shm__fold256_vpclmul)
}

/* The stream's fold kernel over n bytes (a multiple of 256). */
static inline void posenc_shm__crc32c_fold(posenc_shm_crc32c_stream *s, const uint8_t *p, size_t n)
{
    if (s->kernel == POSENC_SHM__K_VPCLMUL)
        posenc_shm__crc32c_fold_vpclmul(s, p, n);
    else
        posenc_shm__crc32c_fold256_vpclmul(s, p, n);
}

/* Whole blocks go to the accumulators, the rest waits in `pending` for the next piece. */
static inline void posenc_shm__crc32c_fold_update(posenc_shm_crc32c_stream *s, const uint8_t *p, size_t n)
{
    const size_t block = POSENC_SHM__CRC32C_FOLD;
    if (s->n_pending) {
        size_t take = block - s->n_pending < n ? block - s->n_pending : n;
        memcpy(s->pending + s->n_pending, p, take);
        s->n_pending += (uint32_t)take;
        p += take;
        n -= take;
        if (s->n_pending < block) return;
        posenc_shm__crc32c_fold(s, s->pending, block);
        s->n_pending = 0;
    }
    size_t whole = n / block * block;
    if (whole) posenc_shm__crc32c_fold(s, p, whole);
    memcpy(s->pending, p + whole, n - whole);
    s->n_pending = (uint32_t)(n - whole);
}
#endif

/* The name of a POSENC_SHM__K_* code (NULL past the last). */
static inline const char *posenc_shm__crc32c_name(int code)
{
    static const char *const names[] = {"table", "sse4.2", "vpclmulqdq", "vpclmulqdq256"};
    return code >= 0 && code < (int)(sizeof names / sizeof names[0]) ? names[code] : NULL;
}

/* Whether this CPU and build run a kernel: its CPUID features, with the OS saving the
 * registers it uses (__builtin_cpu_supports checks both). */
static inline int posenc_shm__crc32c_runs(int code)
{
    switch (code) {
#ifdef POSENC_SHM_HAVE_CRC32C_VPCLMUL
    case POSENC_SHM__K_VPCLMUL:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
               __builtin_cpu_supports("sse4.2");
    case POSENC_SHM__K_VPCLMUL256:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
               __builtin_cpu_supports("sse4.2");
#endif
#ifdef POSENC_SHM_HAVE_CRC32C_HW
    case POSENC_SHM__K_SSE42:
        return __builtin_cpu_supports("sse4.2");
#endif
    case POSENC_SHM__K_TABLE:
        return 1;
    default:
        return 0;
    }
}

/* Which CRC-32C code posenc_shm_crc32c runs on this CPU, the fastest it has: "vpclmulqdq"
 * (AVX-512), "vpclmulqdq256" (AVX2 with VPCLMULQDQ), "sse4.2" or "table". */
static inline const char *posenc_shm_crc32c_kernel(void)
{
    static const int fastest_first[] = {POSENC_SHM__K_VPCLMUL, POSENC_SHM__K_VPCLMUL256, POSENC_SHM__K_SSE42};
    for (size_t i = 0; i < sizeof fastest_first / sizeof fastest_first[0]; i++)
        if (posenc_shm__crc32c_runs(fastest_first[i])) return posenc_shm__crc32c_name(fastest_first[i]);
    return "table";
}

/* The POSENC_SHM__K_* of a kernel name, or -1 if this CPU or build lacks it. */
static inline int posenc_shm__crc32c_kernel_code(const char *kernel)
{
    for (int code = 0; posenc_shm__crc32c_name(code); code++)
        if (!strcmp(kernel, posenc_shm__crc32c_name(code))) return posenc_shm__crc32c_runs(code) ? code : -1;
    return -1;
}

/* Start a stream continuing `crc` (0 to start) with the named kernel; -1 if unavailable. */
static inline int posenc_shm_crc32c_begin_by(posenc_shm_crc32c_stream *s, const char *kernel, uint32_t crc)
{
    int code = posenc_shm__crc32c_kernel_code(kernel);
    if (code < 0) return -1;
    s->crc = crc;
    s->kernel = code;
    s->n_pending = 0;
    s->folding = 0;
    if (code == POSENC_SHM__K_TABLE) posenc_shm_crc_init_poly(&s->tables, POSENC_SHM_CRC32C_POLY);
    return 0;
}

/* Start a stream continuing `crc` with the fastest kernel this CPU has. */
static inline void posenc_shm_crc32c_begin(posenc_shm_crc32c_stream *s, uint32_t crc)
{
    posenc_shm_crc32c_begin_by(s, posenc_shm_crc32c_kernel(), crc);
}

/* The piece size a writer feeding the stream should use where it can choose (sincos_rows_crc
 * sizes its row tiles by it): whole 3 x 32 KiB blocks for the crc32 instruction's three lanes
 * (anything shorter runs in one lane, at a third of the speed); 256 bytes for the folding
 * kernels, which carry partial blocks between pieces; 1 for the table kernel. */
static inline size_t posenc_shm_crc32c_piece(const posenc_shm_crc32c_stream *s)
{
    if (s->kernel == POSENC_SHM__K_SSE42) return 3 * (size_t)POSENC_SHM__CRC32C_LANE;
    return s->kernel >= POSENC_SHM__K_VPCLMUL ? POSENC_SHM__CRC32C_FOLD : 1;
}

/* Continue the stream over the next n bytes at buf. */
static inline void posenc_shm_crc32c_update(posenc_shm_crc32c_stream *s, const void *buf, size_t n)
{
    const uint8_t *p = (const uint8_t *)buf;
#ifdef POSENC_SHM_HAVE_CRC32C_VPCLMUL
    if (s->kernel >= POSENC_SHM__K_VPCLMUL) {
        if (s->folding || s->n_pending || n >= 2 * POSENC_SHM__CRC32C_FOLD)
            posenc_shm__crc32c_fold_update(s, p, n);
        else /* short pieces before any fold: the register takes them */
            s->crc = posenc_shm__crc32c_hw(s->crc, p, n);
        return;
    }
#endif
#ifdef POSENC_SHM_HAVE_CRC32C_HW
    if (s->kernel == POSENC_SHM__K_SSE42) {
        s->crc = posenc_shm__crc32c_hw(s->crc, p, n);
        return;
    }
#endif
    s->crc = posenc_shm_crc32(&s->tables, s->crc, p, n);
}

/* The CRC-32C of everything the stream was given (continuing the `crc` it began with). */
static inline uint32_t posenc_shm_crc32c_end(posenc_shm_crc32c_stream *s)
{
#ifdef POSENC_SHM_HAVE_CRC32C_VPCLMUL
    if (s->kernel >= POSENC_SHM__K_VPCLMUL && s->folding) {
        /* ~0 in: the hw routine starts from register 0, as the folded bytes already hold the initial register */
        s->crc = posenc_shm__crc32c_hw(posenc_shm__crc32c_hw(0xFFFFFFFFu, s->fold, sizeof s->fold), s->pending,
                                       s->n_pending);
        s->folding = 0;
        s->n_pending = 0;
    }
#endif
    return s->crc;
}

/* CRC-32C continuing `crc` (0 to start) with the named kernel (one posenc_shm_crc32c_kernel
 * may return, or a slower one the CPU also has); -1 if this CPU or build lacks it. */
static inline int posenc_shm_crc32c_by(const char *kernel, uint32_t crc, const void *buf, size_t n, uint32_t *out)
{
    posenc_shm_crc32c_stream s;
    if (posenc_shm_crc32c_begin_by(&s, kernel, crc) != 0) return -1;
    posenc_shm_crc32c_update(&s, buf, n);
    *out = posenc_shm_crc32c_end(&s);
    return 0;
}

/* CRC-32C continuing `crc` (0 to start), by the fastest kernel this CPU has. "123456789" gives 0xE3069283. */
static inline uint32_t posenc_shm_crc32c(uint32_t crc, const void *buf, size_t n)
{
    uint32_t out = 0;
    posenc_shm_crc32c_by(posenc_shm_crc32c_kernel(), crc, buf, n, &out);
    return out;
}

/* The data checksum `algorithm` (POSENC_SHM_CRC32 or POSENC_SHM_CRC32C) of n bytes. */
static inline uint32_t posenc_shm_checksum(uint32_t algorithm, const void *buf, size_t n)
{
    if (algorithm == POSENC_SHM_CRC32C) return posenc_shm_crc32c(0, buf, n);
    posenc_shm_crc_tables c;
    posenc_shm_crc_init(&c);
    return posenc_shm_crc32(&c, 0, buf, n);
}

/* ---- SHA-256 of the spec JSON ---------------------------------------------------------- */

/* SHA-256 (FIPS 180-4) of n bytes into out[32]. The header's spec_hash is the first 16 hex
 * digits of the SHA-256 of the spec_len stored spec bytes exactly (docs/shm-format.md), so a
 * reader with no JSON parser still checks the spec against its hash. Specs are small (a few
 * hundred bytes): a plain implementation is fast enough for one pass per attach. */
static inline void posenc_shm__sha256(const uint8_t *msg, size_t n, uint8_t out[32])
{
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t blocks = (n + 9 + 63) / 64; /* the message, 0x80, zeros, the 64-bit bit length */
    for (size_t blk = 0; blk < blocks; blk++) {
        uint8_t chunk[64];
        for (size_t i = 0; i < 64; i++) {
            size_t at = blk * 64 + i;
            chunk[i] = at < n ? msg[at] : at == n ? 0x80 : 0;
        }
        if (blk == blocks - 1)
            for (int i = 0; i < 8; i++) chunk[63 - i] = (uint8_t)(((uint64_t)n * 8u) >> (8 * i));
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)chunk[4 * i] << 24 | (uint32_t)chunk[4 * i + 1] << 16 | (uint32_t)chunk[4 * i + 2] << 8 |
                   chunk[4 * i + 3];
#define POSENC_SHM__ROR(x, r) (((x) >> (r)) | ((x) << (32 - (r))))
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = POSENC_SHM__ROR(w[i - 15], 7) ^ POSENC_SHM__ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = POSENC_SHM__ROR(w[i - 2], 17) ^ POSENC_SHM__ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 = hh + (POSENC_SHM__ROR(e, 6) ^ POSENC_SHM__ROR(e, 11) ^ POSENC_SHM__ROR(e, 25)) +
                          ((e & f) ^ (~e & g)) + k[i] + w[i];
            uint32_t t2 = (POSENC_SHM__ROR(a, 2) ^ POSENC_SHM__ROR(a, 13) ^ POSENC_SHM__ROR(a, 22)) +
                          ((a & b) ^ (a & c) ^ (b & c));
            hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
        }
#undef POSENC_SHM__ROR
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
    for (int i = 0; i < 32; i++) out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* True if the 16 hex digits at `hex` are the first 8 bytes of the SHA-256 of the n bytes at p. */
static inline int posenc_shm__spec_hash_matches(const uint8_t *p, size_t n, const uint8_t *hex)
{
    static const char digits[] = "0123456789abcdef";
    uint8_t digest[32];
    posenc_shm__sha256(p, n, digest);
    for (int i = 0; i < 8; i++)
        if (hex[2 * i] != digits[digest[i] >> 4] || hex[2 * i + 1] != digits[digest[i] & 15]) return 0;
    return 1;
}

/* ---- names and the registry ------------------------------------------------------------ */

static inline int posenc_shm_valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 1 || n > POSENC_SHM_NAME_MAX || strstr(name, "..") || strcmp(name, ".") == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '.' || ch == '-'))
            return 0;
    }
    return 1;
}

/* Seqlock read of one slot: generation + 64 name bytes. Returns 0, or -1 if it stayed busy (odd counter). */
static inline int posenc_shm__read_slot(const uint8_t *slot, uint64_t *generation, uint64_t name[8])
{
    const uint64_t *w = (const uint64_t *)slot;
    for (int spin = 0; spin < 100000; spin++) {
        uint64_t before = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
        if (before & 1u) continue;
        *generation = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
        for (int k = 0; k < 8; k++) name[k] = __atomic_load_n(&w[2 + k], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&w[0], __ATOMIC_RELAXED) == before) return 0;
    }
    return -1;
}

/* Current generation of `name` in `dir`'s registry (0 if no such table). */
static inline int posenc_shm__lookup(posenc_shm_table *t, const char *dir, const char *name, uint64_t *generation)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, POSENC_SHM_REGISTRY_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return posenc_shm__fail(t, POSENC_SHM_ENOTFOUND, "%s: no registry (no table named '%s')", path, name);
        t->os_errno = errno;
        return posenc_shm__fail(t, POSENC_SHM_EOS, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        t->os_errno = errno;
        close(fd);
        return posenc_shm__fail(t, POSENC_SHM_EOS, "%s: cannot stat: %s", path, strerror(errno));
    }
    if ((size_t)st.st_size < POSENC_SHM_REGISTRY_SIZE) {
        /* Being created (its magic is stored last), unless it has a magic: then it was cut short. */
        uint8_t magic[8] = {0};
        ssize_t got = pread(fd, magic, sizeof magic, 0);
        close(fd);
        if (got > 0 && !posenc_shm__zero(magic, (size_t)got))
            return posenc_shm__fail(t, POSENC_SHM_EREGISTRY, "%s: truncated registry (%lld bytes, expected %u)", path,
                                    (long long)st.st_size, POSENC_SHM_REGISTRY_SIZE);
        return posenc_shm__fail(t, POSENC_SHM_ENOTFOUND, "%s: registry not initialised yet (no table named '%s')",
                                path, name);
    }
    const uint8_t *reg = (const uint8_t *)mmap(NULL, POSENC_SHM_REGISTRY_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (reg == MAP_FAILED) {
        t->os_errno = errno;
        return posenc_shm__fail(t, POSENC_SHM_EOS, "%s: cannot map: %s", path, strerror(errno));
    }
    int rc = POSENC_SHM_OK;
    if (posenc_shm__zero(reg, 8)) {
        rc = posenc_shm__fail(t, POSENC_SHM_ENOTFOUND, "%s: registry not initialised yet (no table named '%s')", path,
                              name);
    } else if (memcmp(reg, POSENC_SHM_REGISTRY_MAGIC, 8) != 0) {
        rc = posenc_shm__fail(t, POSENC_SHM_EREGISTRY, "%s: bad magic: corrupted registry", path);
    } else if (posenc_shm__u32(reg + 8) != POSENC_SHM_REGISTRY_VERSION ||
               posenc_shm__u32(reg + 12) != POSENC_SHM_REGISTRY_CAPACITY ||
               posenc_shm__u32(reg + 16) != POSENC_SHM_REGISTRY_SLOT) {
        rc = posenc_shm__fail(t, POSENC_SHM_EREGISTRY, "%s: unknown registry layout", path);
    } else {
        uint64_t want[8] = {0}, got[8];
        memcpy(want, name, strlen(name));
        *generation = 0;
        for (uint32_t s = 0; s < POSENC_SHM_REGISTRY_CAPACITY; s++) {
            uint64_t gen = 0;
            const uint8_t *slot = reg + POSENC_SHM_REGISTRY_HEADER + (size_t)s * POSENC_SHM_REGISTRY_SLOT;
            int attempt = 0;
            while (posenc_shm__read_slot(slot, &gen, got) != 0) {
                if (++attempt == 2000) {
                    rc = posenc_shm__fail(t, POSENC_SHM_EBUSY, "%s: a slot stayed busy (a writer is stuck mid-update)",
                                          path);
                    break;
                }
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
            if (rc != POSENC_SHM_OK) break;
            if (gen != 0 && memcmp(want, got, sizeof want) == 0) { /* the first slot naming it wins */
                if (gen > POSENC_SHM_MAX_GENERATION)
                    rc = posenc_shm__fail(t, POSENC_SHM_EREGISTRY, "%s: corrupted slot: '%s' has generation %llu",
                                          path, name, (unsigned long long)gen);
                *generation = gen;
                break;
            }
        }
    }
    munmap((void *)reg, POSENC_SHM_REGISTRY_SIZE);
    return rc;
}

/* ---- segments ------------------------------------------------------------------------- */

/* True if the n bytes at p are all of [0-9a-f]. */
static inline int posenc_shm__lower_hex(const uint8_t *p, size_t n)
{
    while (n--) {
        uint8_t ch = *p++;
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
    }
    return 1;
}

/* True if the 64 name bytes are a valid table name followed by NUL padding only. */
static inline int posenc_shm__valid_name_field(const uint8_t *field)
{
    char name[POSENC_SHM_NAME_MAX + 1];
    size_t n = 0;
    while (n < POSENC_SHM_NAME_MAX && field[n]) n++;
    memcpy(name, field, n);
    name[n] = 0;
    return posenc_shm_valid_name(name) && posenc_shm__zero(field + n, POSENC_SHM_NAME_MAX - n);
}

/* The checks of docs/shm-format.md "Validating a segment", in its order (steps 2-8 and the
 * spec hash of step 9: SHA-256 of the stored spec bytes; a reader parses no JSON), on a
 * mapped file of `size` bytes whose state was read with an acquire load. */
static inline int posenc_shm__check_segment(posenc_shm_table *t, const uint8_t *b, size_t size, uint32_t state,
                                            const char *path)
{
    uint32_t dtype = posenc_shm__u32(b + 24), itemsize = posenc_shm__u32(b + 28), spec_len = posenc_shm__u32(b + 92);
    uint64_t rows = posenc_shm__u64(b + 32), width = posenc_shm__u64(b + 40), start = posenc_shm__u64(b + 48);
    uint64_t data_offset = posenc_shm__u64(b + 56), data_nbytes = posenc_shm__u64(b + 64);
    uint64_t generation = posenc_shm__u64(b + 72);
    uint32_t checksum = posenc_shm__u32(b + 176);
    uint64_t aligned = (POSENC_SHM_HEADER_SIZE + (uint64_t)spec_len + 63u) / 64u * 64u;
    const char *bad = NULL;
    if (memcmp(b, POSENC_SHM_MAGIC, 8) != 0)
        return posenc_shm__fail(t, POSENC_SHM_EMAGIC, "%s: bad magic: not a posenc table", path);
    if (posenc_shm__u32(b + 8) != POSENC_SHM_VERSION)
        return posenc_shm__fail(t, POSENC_SHM_EVERSION, "%s: unknown format version %u (this reader knows %u)", path,
                                posenc_shm__u32(b + 8), POSENC_SHM_VERSION);
    if (!((dtype == POSENC_SHM_FLOAT32 && itemsize == 4) || (dtype == POSENC_SHM_FLOAT64 && itemsize == 8) ||
          (dtype == POSENC_SHM_SPEC && itemsize == 1)))
        bad = "unknown dtype code or itemsize";
    else if (rows == 0 || width == 0)
        bad = "rows and width must be >= 1";
    else if (dtype == POSENC_SHM_SPEC && (data_nbytes < POSENC_SHM_SPEC_PREFIX + 32u || data_nbytes % 8u))
        bad = "a computed table's data_nbytes is not 32 + an inline spec block";
    else if (dtype != POSENC_SHM_SPEC && (width > UINT64_MAX / itemsize / rows || data_nbytes != rows * width * itemsize))
        bad = "data_nbytes is not rows * width * itemsize";
    else if (rows > (uint64_t)INT64_MAX || (int64_t)start > INT64_MAX - (int64_t)rows)
        bad = "start + rows overflows int64";
    else if (spec_len == 0 || data_offset != aligned)
        bad = "data_offset does not follow spec_len";
    else if (generation == 0 || generation > POSENC_SHM_MAX_GENERATION)
        bad = "generation outside 1..2^63-1";
    else if (checksum != POSENC_SHM_CRC32 && checksum != POSENC_SHM_CRC32C)
        bad = "unknown checksum algorithm";
    else if (!posenc_shm__lower_hex(b + 96, 16))
        bad = "spec_hash is not 16 lowercase hex digits";
    else if (!posenc_shm__valid_name_field(b + 112))
        bad = "name is not a valid NUL-padded table name";
    else if (!posenc_shm__zero(b + POSENC_SHM_RESERVED_AT, POSENC_SHM_HEADER_SIZE - POSENC_SHM_RESERVED_AT))
        bad = "reserved bytes are not zero";
    if (bad) return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: inconsistent header: %s", path, bad);
    if (state == POSENC_SHM_EMPTY || state == POSENC_SHM_BUILDING)
        return posenc_shm__fail(t, POSENC_SHM_ESTATE, "%s: not READY (state %s): being written, or its writer died",
                                path, state == POSENC_SHM_BUILDING ? "BUILDING" : "EMPTY");
    if (state != POSENC_SHM_READY)
        return posenc_shm__fail(t, POSENC_SHM_ESTATE, "%s: not READY (state %u): being written, or its writer died",
                                path, state);
    if (data_nbytes > size || data_offset > size - data_nbytes)
        return posenc_shm__fail(t, POSENC_SHM_ETRUNCATED, "%s: truncated: %zu bytes, the header says %llu", path, size,
                                (unsigned long long)(data_offset + data_nbytes));
    if (size != data_offset + data_nbytes)
        return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: trailing bytes: %zu bytes, the header says %llu", path,
                                size, (unsigned long long)(data_offset + data_nbytes));
    posenc_shm_crc_tables crc;
    posenc_shm_crc_init(&crc);
    uint8_t header[POSENC_SHM_HEADER_SIZE];
    memcpy(header, b, sizeof header);
    memset(header + 12, 0, 8); /* state and header_crc are not covered */
    uint32_t h = posenc_shm_crc32(&crc, posenc_shm_crc32(&crc, 0, header, sizeof header), b + POSENC_SHM_HEADER_SIZE,
                                  spec_len);
    if (h != posenc_shm__u32(b + 16))
        return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: header checksum mismatch", path);
    if (!posenc_shm__zero(b + POSENC_SHM_HEADER_SIZE + spec_len, data_offset - POSENC_SHM_HEADER_SIZE - spec_len))
        return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: non-zero padding after the spec JSON", path);
    if (!posenc_shm__spec_hash_matches(b + POSENC_SHM_HEADER_SIZE, spec_len, b + 96))
        return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: spec JSON does not match its hash %.16s", path,
                                (const char *)(b + 96));
    return POSENC_SHM_OK;
}

/* Map `path` read-only and validate it (posenc_shm__check_segment; the data checksum too
 * with POSENC_SHM_VERIFY). On success fills *t; on failure *t holds only
 * the error. */
static inline int posenc_shm_attach_path(posenc_shm_table *t, const char *path, int flags)
{
    memset(t, 0, sizeof *t);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        t->os_errno = errno;
        return posenc_shm__fail(t, errno == ENOENT ? POSENC_SHM_ENOTFOUND : POSENC_SHM_EOS, "%s: cannot open: %s",
                                path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        t->os_errno = errno;
        close(fd);
        return posenc_shm__fail(t, POSENC_SHM_EOS, "%s: cannot stat: %s", path, strerror(errno));
    }
    size_t size = (size_t)st.st_size;
    if (size < POSENC_SHM_HEADER_SIZE) {
        close(fd);
        return posenc_shm__fail(t, POSENC_SHM_ETRUNCATED, "%s: truncated: %zu bytes, a header needs %u", path, size,
                                POSENC_SHM_HEADER_SIZE);
    }
    int map_flags = MAP_SHARED;
#ifdef MAP_POPULATE
    map_flags |= MAP_POPULATE; /* fault every page in now, not on the first lookups */
#endif
    const uint8_t *b = (const uint8_t *)mmap(NULL, size, PROT_READ, map_flags, fd, 0);
    close(fd);
    if (b == MAP_FAILED) {
        t->os_errno = errno;
        return posenc_shm__fail(t, POSENC_SHM_EOS, "%s: cannot map: %s", path, strerror(errno));
    }
    /* Acquire: everything the writer stored before READY is visible after this load. */
    uint32_t state = __atomic_load_n((const uint32_t *)(b + 12), __ATOMIC_ACQUIRE);
    int rc = posenc_shm__check_segment(t, b, size, state, path);
    uint64_t data_offset = posenc_shm__u64(b + 56), data_nbytes = posenc_shm__u64(b + 64);
    uint32_t checksum = posenc_shm__u32(b + 176);
    if (rc == POSENC_SHM_OK && (flags & POSENC_SHM_VERIFY) &&
        posenc_shm_checksum(checksum, b + data_offset, (size_t)data_nbytes) != posenc_shm__u32(b + 20))
        rc = posenc_shm__fail(t, POSENC_SHM_ECHECKSUM,
                              "%s: data checksum mismatch: the table was modified or corrupted", path);
    if (rc != POSENC_SHM_OK) {
        munmap((void *)b, size);
        return rc;
    }
    t->base = b;
    t->map_size = size;
    t->data = b + data_offset;
    uint64_t rows = posenc_shm__u64(b + 32), width = posenc_shm__u64(b + 40);
    uint32_t itemsize = posenc_shm__u32(b + 28), spec_len = posenc_shm__u32(b + 92);
    t->rows = rows;
    t->width = width;
    t->dtype = posenc_shm__u32(b + 24);
    t->itemsize = itemsize;
    t->row_bytes = t->dtype == POSENC_SHM_SPEC ? 0 : (size_t)(width * itemsize);
    t->data_nbytes = data_nbytes;
    t->start = (int64_t)posenc_shm__u64(b + 48);
    t->stop = t->start + (int64_t)rows; /* checked: no overflow */
    t->data_crc = posenc_shm__u32(b + 20);
    t->checksum = checksum;
    t->generation = posenc_shm__u64(b + 72);
    t->created_ns = (int64_t)posenc_shm__u64(b + 80);
    t->writer_pid = posenc_shm__u32(b + 88);
    t->spec_json = (const char *)b + POSENC_SHM_HEADER_SIZE;
    t->spec_json_len = spec_len;
    memcpy(t->spec_hash, b + 96, 16);
    memcpy(t->name, b + 112, POSENC_SHM_NAME_MAX); /* NUL-padded; t->name[64] stays 0 */
    return POSENC_SHM_OK;
}

/* Attach the current generation of table `name` in `dir` (e.g. "/dev/shm"). Retries when
 * the table is replaced between reading the registry and opening the file. */
static inline int posenc_shm_attach(posenc_shm_table *t, const char *dir, const char *name, int flags)
{
    memset(t, 0, sizeof *t);
    if (!posenc_shm_valid_name(name))
        return posenc_shm__fail(t, POSENC_SHM_EBADNAME, "name '%s': must be 1..64 of [A-Za-z0-9_.-], no '/' or '..'",
                                name);
    for (int attempt = 0; attempt < 32; attempt++) {
        uint64_t generation = 0, again = 0;
        int rc = posenc_shm__lookup(t, dir, name, &generation);
        if (rc != POSENC_SHM_OK) return rc;
        if (generation == 0) return posenc_shm__fail(t, POSENC_SHM_ENOTFOUND, "%s: no table named '%s'", dir, name);
        char path[4096];
        snprintf(path, sizeof path, "%s/posenc.%s.%llu", dir, name, (unsigned long long)generation);
        rc = posenc_shm_attach_path(t, path, flags);
        if (rc == POSENC_SHM_ENOTFOUND) {
            if (posenc_shm__lookup(t, dir, name, &again) == POSENC_SHM_OK && again != generation) continue;
            return posenc_shm__fail(t, POSENC_SHM_ENOTFOUND, "%s: the registry names it but the file is gone", path);
        }
        if (rc == POSENC_SHM_OK && (t->generation != generation || strcmp(t->name, name) != 0)) {
            munmap((void *)t->base, t->map_size);
            memset(t, 0, sizeof *t);
            return posenc_shm__fail(t, POSENC_SHM_EHEADER, "%s: header names another table or generation", path);
        }
        return rc;
    }
    return posenc_shm__fail(t, POSENC_SHM_EBUSY, "table '%s' in %s kept being replaced while attaching", name, dir);
}

/* Pointer to the row of `position` (width values of t->dtype), NULL outside [start, stop) and for a
 * computed table (POSENC_SHM_SPEC: its rows are computed, e.g. by posenc-server's ENCODE_TABLE). */
static inline const void *posenc_shm_row(const posenc_shm_table *t, int64_t position)
{
    uint64_t row = (uint64_t)position - (uint64_t)t->start;
    return row < t->rows && t->row_bytes ? t->data + row * t->row_bytes : NULL;
}

/* Recompute the data checksum of an attached table: POSENC_SHM_OK or POSENC_SHM_ECHECKSUM. */
static inline int posenc_shm_verify(const posenc_shm_table *t)
{
    return posenc_shm_checksum(t->checksum, t->data, t->data_nbytes) == t->data_crc ? POSENC_SHM_OK
                                                                                         : POSENC_SHM_ECHECKSUM;
}

static inline void posenc_shm_detach(posenc_shm_table *t)
{
    if (t->base) munmap((void *)t->base, t->map_size);
    memset(t, 0, sizeof *t);
}

#endif /* POSENC_SHM_H */
