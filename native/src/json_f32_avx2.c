/* The AVX2 row writer of libposenc's float32 -> JSON printer: four numbers per step, one float per
 * 64-bit lane, the same digits and notation as the scalar writer in json_f32.c (see there) by the
 * lane body shared with the AVX-512 writer (json_lanes.h).
 *
 * What is AVX2's own, chosen for the AMD Zen 2 the README's AVX2 figures come from: the scales and
 * shuffles are fetched with scalar-indexed 16-byte loads (AVX2's gathers are microcoded there, a
 * dozen uops each, and a lane's json_scale is one 16-byte load anyway); the zero digits before the
 * first and after the last significant one are counted without lzcnt (AVX2 has none for lanes): a
 * byte compare marks the nonzero digits, shifts smear the marks toward one end of the word, and a
 * byte sum (psadbw) counts the bytes left unmarked. Each number's text is one byte shuffle of its
 * 16-byte source; unpacking the sources' low and high halves puts two numbers' sources in the two
 * 128-bit lanes of a register, where the shuffle works. Zero and non-finite lanes (rare) are
 * written by the scalar special-case code.
 *
 * Needs AVX2 only (the OS saving YMM state included); json_f32.c calls it only where the CPU has it. */
#if defined(__x86_64__)
#include <immintrin.h>

#include "json_f32.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif

/* json_lanes.h's layer: 4 lanes, masks as all-ones lanes. */
typedef __m256i jv;
typedef __m256i jm;
static inline jv j1(uint64_t v) { return _mm256_set1_epi64x((long long)v); }
static inline jv jadd(jv a, jv b) { return _mm256_add_epi64(a, b); }
static inline jv jsub(jv a, jv b) { return _mm256_sub_epi64(a, b); }
static inline jv jand(jv a, jv b) { return _mm256_and_si256(a, b); }
static inline jv jor(jv a, jv b) { return _mm256_or_si256(a, b); }
#define JSHL(a, n) _mm256_slli_epi64((a), (n))
#define JSHR(a, n) _mm256_srli_epi64((a), (n))
#define JSHR16(a, n) _mm256_srli_epi16((a), (n))
#define JSHL16(a, n) _mm256_slli_epi16((a), (n))
#define JSHL32(a, n) _mm256_slli_epi32((a), (n))
static inline jv jshrv(jv a, jv n) { return _mm256_srlv_epi64(a, n); }
static inline jv jmul32(jv a, jv b) { return _mm256_mul_epu32(a, b); }
static inline jv jmin32(jv a, jv b) { return _mm256_min_epu32(a, b); }
static inline jv jmulhi16(jv a, jv b) { return _mm256_mulhi_epu16(a, b); }
static inline jv jmullo16(jv a, jv b) { return _mm256_mullo_epi16(a, b); }
static inline jv jsub16(jv a, jv b) { return _mm256_sub_epi16(a, b); }
static inline jv jset16(short v) { return _mm256_set1_epi16(v); }
static inline jm jgt(jv a, jv b) { return _mm256_cmpgt_epi64(a, b); }
static inline jm jeq(jv a, jv b) { return _mm256_cmpeq_epi64(a, b); }
static inline jm jmand(jm a, jm b) { return _mm256_and_si256(a, b); }
static inline jm jmor(jm a, jm b) { return _mm256_or_si256(a, b); }
static inline jm jmxor(jm a, jm b) { return _mm256_xor_si256(a, b); }
static inline jm jmandnot(jm a, jm b) { return _mm256_andnot_si256(a, b); }
static inline jv jsel(jm m, jv a, jv b) { return _mm256_blendv_epi8(a, b, m); }
static inline jv jadd_if(jv a, jm m, jv b) { return _mm256_add_epi64(a, _mm256_and_si256(m, b)); }
/* no 64-bit arithmetic shift: flip the sign bit of the zero-extended half and subtract it back */
static inline jv jlow32s(jv a)
{
    return jsub(_mm256_xor_si256(jand(a, j1(0xFFFFFFFFu)), j1(0x80000000u)), j1(0x80000000u));
}

#include "json_lanes.h"

/* The 16 bytes at `table` + 8 * index_a in the low 128-bit lane, at + 8 * index_b in the high one. */
static inline __m256i load_pair(const void *table, uint64_t index_a, uint64_t index_b)
{
    const __m128i *a = (const __m128i *)(const void *)((const char *)table + 8 * index_a);
    const __m128i *b = (const __m128i *)(const void *)((const char *)table + 8 * index_b);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(a)), _mm_loadu_si128(b), 1);
}

/* The number of bytes of each lane not marked (0xFF) in `marks`, 0..8. */
static inline __m256i unmarked_bytes(__m256i marks)
{
    return _mm256_sad_epu8(_mm256_andnot_si256(marks, _mm256_set1_epi8(1)), _mm256_setzero_si256());
}

/* Four numbers (n of them real, 1..4) and their separators at p. */
static inline char *put4(char *p, const uint32_t *bits, int n)
{
    __m128i loaded = _mm_maskload_epi32((const int *)(const void *)bits,
                                        _mm_cmpgt_epi32(_mm_set1_epi32(n), _mm_setr_epi32(0, 1, 2, 3)));
    __m256i magnitude = _mm256_and_si256(_mm256_cvtepu32_epi64(loaded), j1(0x7FFFFFFF));
    __m256i special = jl_special(magnitude);      /* the lanes past n too: they read as zero */
    __m256i c, irregular;
    /* special lanes read entry 0 (an exponent of 255 has none) */
    __m256i entry = _mm256_andnot_si256(special, jl_decode(magnitude, &c, &irregular));
    uint64_t at[4];
    _mm256_storeu_si256((__m256i *)(void *)at, entry);
    __m256i scale02 = load_pair(posenc_json_scales, at[0], at[2]);   /* {G, k | h << 32} of lanes 0, 2 */
    __m256i scale13 = load_pair(posenc_json_scales, at[1], at[3]);
    __m256i g = _mm256_unpacklo_epi64(scale02, scale13), kh = _mm256_unpackhi_epi64(scale02, scale13);
    __m256i top, digits = jl_digits(jl_shortest(c, irregular, g, kh), &top);

    /* zero digits: after the last significant one (the marks smeared down from the top byte's end
     * leave those bytes unmarked), and before the first (0 where the top digit is one, else 1 + the
     * bytes the marks smeared up from the low end leave unmarked) */
    __m256i nonzero = _mm256_cmpgt_epi8(digits, _mm256_setzero_si256());
    __m256i down = _mm256_or_si256(nonzero, JSHR(nonzero, 8));
    down = _mm256_or_si256(down, JSHR(down, 16));
    __m256i trail = unmarked_bytes(_mm256_or_si256(down, JSHR(down, 32)));
    __m256i up = _mm256_or_si256(nonzero, JSHL(nonzero, 8));
    up = _mm256_or_si256(up, JSHL(up, 16));
    __m256i zeros_before = unmarked_bytes(_mm256_or_si256(up, JSHL(up, 32)));
    __m256i lead = _mm256_and_si256(jeq(top, _mm256_setzero_si256()), jadd(zeros_before, j1(1)));
    jl_layout out = jl_lay_out(special, top, digits, lead, trail, jlow32s(kh));

    uint64_t which[4];
    _mm256_storeu_si256((__m256i *)(void *)which, JSHL(out.which, 1));
    /* lanes 0, 2 and 1, 3: the two numbers of each register in its 128-bit lanes */
    __m256i text02 = _mm256_shuffle_epi8(_mm256_unpacklo_epi64(out.src_lo, out.src_hi),
                                         load_pair(posenc_json_shuffles, which[0], which[2]));
    __m256i text13 = _mm256_shuffle_epi8(_mm256_unpackhi_epi64(out.src_lo, out.src_hi),
                                         load_pair(posenc_json_shuffles, which[1], which[3]));
    const __m128i texts[4] = {
        _mm256_castsi256_si128(text02), _mm256_castsi256_si128(text13),
        _mm256_extracti128_si256(text02, 1), _mm256_extracti128_si256(text13, 1),
    };
    /* lane i's length into byte i, then the four lanes or-ed together */
    __m256i placed = _mm256_sllv_epi64(out.length, _mm256_setr_epi64x(0, 8, 16, 24));
    __m128i half = _mm_or_si128(_mm256_castsi256_si128(placed), _mm256_extracti128_si256(placed, 1));
    uint64_t lengths = (uint64_t)_mm_cvtsi128_si64(_mm_or_si128(half, _mm_unpackhi_epi64(half, half)));
    unsigned negative = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(loaded));
    unsigned special_lanes = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(special));
    return jl_put_texts(p, bits, n, special_lanes, negative, texts, lengths);
}

char *posenc_json_row_avx2(char *p, const uint32_t *bits, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) p = put4(p, bits + i, 4);
    if (i < n) p = put4(p, bits + i, (int)(n - i));
    return p;
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
typedef int posenc_no_avx2_json_on_this_architecture;
#endif
