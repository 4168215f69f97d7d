/* The AVX-512 row writer of libposenc's float32 -> JSON printer: eight numbers per step, one float
 * per 64-bit lane, the same digits and notation as the scalar writer in json_f32.c (see there) by
 * the lane body shared with the AVX2 writer (json_lanes.h: Schubfach's three products split into
 * 32x32 multiplies, the interval tests as mask compares, 8 digits at a time, the notation case).
 *
 * What is AVX-512's own: the scale of each exponent (posenc_json_scales) and each number's 16-byte
 * shuffle (posenc_json_shuffles, a compile-time table: nothing here runs before dispatch picks this
 * writer) are gathered; zero digits are counted with lzcnt; each number's text is one byte shuffle
 * of its 16-byte source after the sources and shuffles are paired per 128-bit lane with two-source
 * permutes. The scalar tail of a step stores each 16-byte text and advances by its length. Zero and
 * non-finite lanes (rare) are written by the scalar special-case code.
 *
 * Needs AVX-512 F, BW (byte shuffles), DQ (64-bit conversions) and CD (lzcnt); json_f32.c only
 * calls it where the CPU has all four.
 *
 * Compiled a second time, for tests only, with -DPOSENC_SIMDE: the same intrinsics then resolve to
 * SIMDe's portable versions (its native aliases) and the writer is exported as
 * posenc_json_row_avx512_simde with its own copy of the tables, so tests/native/test_json_f32.py
 * checks this code against orjson on CPUs without AVX-512 too. */
#if defined(POSENC_SIMDE)
#include <immintrin.h> /* first: the AVX-512 types are then the compiler's own, as in the real build */
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include "simde_compat.h"

#include "json_f32.h"
#include "json_tables.h"

#define POSENC_JSON_ROW_AVX512 __attribute__((visibility("default"))) char *posenc_json_row_avx512_simde
#elif defined(__x86_64__)
#include <immintrin.h>

#include "json_f32.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl"))), \
                             apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl")
#endif
#define POSENC_JSON_ROW_AVX512 char *posenc_json_row_avx512
#endif

#if defined(POSENC_SIMDE) || defined(__x86_64__)
/* json_lanes.h's layer: 8 lanes, masks in k registers. */
typedef __m512i jv;
typedef __mmask8 jm;
static inline jv j1(uint64_t v) { return _mm512_set1_epi64((long long)v); }
static inline jv jadd(jv a, jv b) { return _mm512_add_epi64(a, b); }
static inline jv jsub(jv a, jv b) { return _mm512_sub_epi64(a, b); }
static inline jv jand(jv a, jv b) { return _mm512_and_si512(a, b); }
static inline jv jor(jv a, jv b) { return _mm512_or_si512(a, b); }
#define JSHL(a, n) _mm512_slli_epi64((a), (n))
#define JSHR(a, n) _mm512_srli_epi64((a), (n))
#define JSHR16(a, n) _mm512_srli_epi16((a), (n))
#define JSHL16(a, n) _mm512_slli_epi16((a), (n))
#define JSHL32(a, n) _mm512_slli_epi32((a), (n))
static inline jv jshrv(jv a, jv n) { return _mm512_srlv_epi64(a, n); }
static inline jv jmul32(jv a, jv b) { return _mm512_mul_epu32(a, b); }
static inline jv jmin32(jv a, jv b) { return _mm512_min_epu32(a, b); }
static inline jv jmulhi16(jv a, jv b) { return _mm512_mulhi_epu16(a, b); }
static inline jv jmullo16(jv a, jv b) { return _mm512_mullo_epi16(a, b); }
static inline jv jsub16(jv a, jv b) { return _mm512_sub_epi16(a, b); }
static inline jv jset16(short v) { return _mm512_set1_epi16(v); }
static inline jm jgt(jv a, jv b) { return _mm512_cmpgt_epi64_mask(a, b); }
static inline jm jeq(jv a, jv b) { return _mm512_cmpeq_epi64_mask(a, b); }
static inline jm jmand(jm a, jm b) { return (jm)(a & b); }
static inline jm jmor(jm a, jm b) { return (jm)(a | b); }
static inline jm jmxor(jm a, jm b) { return (jm)(a ^ b); }
static inline jm jmandnot(jm a, jm b) { return (jm)(~a & b); }
static inline jv jsel(jm m, jv a, jv b) { return _mm512_mask_blend_epi64(m, a, b); }
static inline jv jadd_if(jv a, jm m, jv b) { return _mm512_mask_add_epi64(a, m, a, b); }
static inline jv jlow32s(jv a) { return _mm512_srai_epi64(_mm512_slli_epi64(a, 32), 32); }

#include "json_lanes.h"

/* Eight numbers (n of them real, 1..8) and their separators at p. */
static inline char *put8(char *p, const uint32_t *bits, int n)
{
    __m512i raw = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32((__mmask8)((1u << n) - 1), bits));
    __m512i magnitude = _mm512_and_si512(raw, j1(0x7FFFFFFF));
    __mmask8 special = jl_special(magnitude);     /* the lanes past n too: they read as zero */
    __m512i c;
    __mmask8 irregular;
    __m512i entry = jl_decode(magnitude, &c, &irregular);
    const long long *table = (const long long *)(const void *)posenc_json_scales;
    __m512i g = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), (__mmask8)~special, entry, table, 8);
    __m512i kh = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), (__mmask8)~special, jadd(entry, j1(1)),
                                             table, 8);
    __m512i top, digits = jl_digits(jl_shortest(c, irregular, g, kh), &top);

    /* zero digits: after the last significant one (lzcnt of the word, the last digit in its top
     * byte), and before the first (0 where the top digit is one, else 1 + the word's low zero bytes) */
    __m512i trail = _mm512_srli_epi64(_mm512_lzcnt_epi64(digits), 3);
    __m512i lowest = _mm512_and_si512(digits, _mm512_sub_epi64(_mm512_setzero_si512(), digits));
    __m512i zeros_before = _mm512_srli_epi64(_mm512_sub_epi64(j1(63), _mm512_lzcnt_epi64(lowest)), 3);
    __m512i lead = _mm512_maskz_add_epi64(_mm512_testn_epi64_mask(top, top), zeros_before, j1(1));
    jl_layout out = jl_lay_out(special, top, digits, lead, trail, jlow32s(kh));

    const long long *shuffle_table = (const long long *)(const void *)posenc_json_shuffles;
    __m512i shuffle_lo = _mm512_i64gather_epi64(_mm512_slli_epi64(out.which, 1), shuffle_table, 8);
    __m512i shuffle_hi = _mm512_i64gather_epi64(_mm512_add_epi64(_mm512_slli_epi64(out.which, 1), j1(1)),
                                                shuffle_table, 8);
    const __m512i first4 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i last4 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    __m512i text0 = _mm512_shuffle_epi8(_mm512_permutex2var_epi64(out.src_lo, first4, out.src_hi),
                                        _mm512_permutex2var_epi64(shuffle_lo, first4, shuffle_hi));
    __m512i text1 = _mm512_shuffle_epi8(_mm512_permutex2var_epi64(out.src_lo, last4, out.src_hi),
                                        _mm512_permutex2var_epi64(shuffle_lo, last4, shuffle_hi));
    const __m128i texts[8] = {
        _mm512_castsi512_si128(text0), _mm512_extracti32x4_epi32(text0, 1),
        _mm512_extracti32x4_epi32(text0, 2), _mm512_extracti32x4_epi32(text0, 3),
        _mm512_castsi512_si128(text1), _mm512_extracti32x4_epi32(text1, 1),
        _mm512_extracti32x4_epi32(text1, 2), _mm512_extracti32x4_epi32(text1, 3),
    };
    uint64_t lengths = (uint64_t)_mm_cvtsi128_si64(_mm512_cvtepi64_epi8(out.length));
    return jl_put_texts(p, bits, n, special, _mm512_test_epi64_mask(raw, j1(0x80000000u)), texts, lengths);
}

POSENC_JSON_ROW_AVX512(char *p, const uint32_t *bits, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) p = put8(p, bits + i, 8);
    if (i < n) p = put8(p, bits + i, (int)(n - i));
    return p;
}

#if defined(__clang__) && !defined(POSENC_SIMDE)
#pragma clang attribute pop
#endif
#else
typedef int posenc_no_avx512_json_on_this_architecture;
#endif
