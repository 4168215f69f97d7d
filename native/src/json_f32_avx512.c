/* The AVX-512 row writer of libposenc's float32 -> JSON printer: eight numbers per step, the same
 * digits and notation as the scalar writer in json_f32.c (see there), computed lane by lane.
 *
 * Per eight floats (one float per 64-bit lane): the scale of each exponent is gathered from
 * posenc_json_scales; the three products of Schubfach are split into 32x32-bit multiplies (G is
 * 63 bits, 4c is 26, and only bits 28 and up of G * 4c matter: hi(G) * 4c * 16 + (lo(G) * 4c >> 28),
 * exactly); the interval tests are mask compares; the digits come out 8 at a time in each lane as
 * in the scalar digits8. The text of each number is then one byte shuffle of a 16-byte source
 * (its 9 digits, '.', '0', 'e', the exponent's sign and digits) by a shuffle chosen from a table
 * of 333 by the notation case, the decimal point's position, the leading zeros and the digit
 * count (posenc_json_shuffles, a compile-time table: nothing here runs before dispatch picks this
 * writer). The scalar tail of a step stores each 16-byte text and advances by its length.
 * Zero and non-finite lanes (rare) are written by the scalar special-case code.
 *
 * Needs AVX-512 F, BW (byte shuffles), DQ (64-bit multiplies, conversions) and CD (lzcnt);
 * json_f32.c only calls it where the CPU has all four. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "json_f32.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl"))), \
                             apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512cd,avx512vl")
#endif

static inline __m512i set1(uint64_t v) { return _mm512_set1_epi64((long long)v); }
/* Small multiples by shifts (a 64-bit multiply is three slow uops). */
static inline __m512i times10(__m512i x) { return _mm512_add_epi64(_mm512_slli_epi64(x, 3), _mm512_slli_epi64(x, 1)); }
static inline __m512i times9(__m512i x) { return _mm512_add_epi64(_mm512_slli_epi64(x, 3), x); }

/* floor(G * c4 / 2^(64 - h)) rounded to odd below bit 31, as the scalar round_odd. */
static inline __m512i round_odd8(__m512i g_hi, __m512i g_lo, __m512i c4, __m512i shift)
{
    __m512i q = _mm512_add_epi64(_mm512_slli_epi64(_mm512_mul_epu32(g_hi, c4), 4),
                                 _mm512_srli_epi64(_mm512_mul_epu32(g_lo, c4), 28));
    __m512i x = _mm512_srlv_epi64(q, shift);
    __mmask8 sticky = _mm512_test_epi64_mask(x, set1(0xFFFFFFFFu));
    return _mm512_mask_or_epi64(_mm512_srli_epi64(x, 31), sticky, _mm512_srli_epi64(x, 31), set1(1));
}

/* Eight numbers (n of them real, 1..8) and their separators at p. */
static inline char *put8(char *p, const uint32_t *bits, int n)
{
    __mmask8 live = (__mmask8)((1u << n) - 1);
    __m512i raw = _mm512_cvtepu32_epi64(_mm256_maskz_loadu_epi32(live, bits));
    __m512i magnitude = _mm512_and_si512(raw, set1(0x7FFFFFFF));
    __mmask8 special = _mm512_mask_cmpeq_epi64_mask(live, magnitude, _mm512_setzero_si512())
                       | _mm512_mask_cmpge_epu64_mask(live, magnitude, set1(0x7F800000));

    /* the significand c, its exponent's scale, and the interval (Schubfach, as json_f32.c) */
    __m512i biased = _mm512_srli_epi64(magnitude, 23);
    __m512i c = _mm512_and_si512(magnitude, set1(0x7FFFFF));
    __mmask8 normal = _mm512_test_epi64_mask(biased, biased);
    __mmask8 irregular = _mm512_cmpeq_epi64_mask(c, _mm512_setzero_si512())
                         & _mm512_cmpgt_epu64_mask(biased, set1(1));
    c = _mm512_mask_or_epi64(c, normal, c, set1(0x800000));
    __m512i entry = _mm512_mask_add_epi64(_mm512_slli_epi64(biased, 2), irregular,
                                          _mm512_slli_epi64(biased, 2), set1(2));
    const long long *table = (const long long *)(const void *)posenc_json_scales;
    __mmask8 finite = live & (__mmask8)~special;  /* lanes with a scale (no gather past the table) */
    __m512i g = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), finite, entry, table, 8);
    __m512i kh = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), finite, _mm512_add_epi64(entry, set1(1)),
                                             table, 8);
    __m512i k = _mm512_srai_epi64(_mm512_slli_epi64(kh, 32), 32);
    __m512i shift = _mm512_sub_epi64(set1(36), _mm512_srli_epi64(kh, 32));
    __m512i g_hi = _mm512_srli_epi64(g, 32);
    __m512i c4 = _mm512_slli_epi64(c, 2);
    __m512i odd = _mm512_and_si512(c, set1(1));
    __m512i below = _mm512_mask_add_epi64(_mm512_sub_epi64(c4, set1(2)), irregular,
                                          _mm512_sub_epi64(c4, set1(2)), set1(1));
    __m512i vb = round_odd8(g_hi, g, c4, shift);
    __m512i vl = _mm512_add_epi64(round_odd8(g_hi, g, below, shift), odd);
    __m512i vr = _mm512_sub_epi64(round_odd8(g_hi, g, _mm512_add_epi64(c4, set1(2)), shift), odd);
    __m512i s = _mm512_srli_epi64(vb, 2);
    __m512i down10 = times10(_mm512_srli_epi64(_mm512_mul_epu32(s, set1(0xCCCCCCCDu)), 35));
    __m512i up10 = _mm512_add_epi64(down10, set1(10));
    __mmask8 down10_in = _mm512_cmple_epu64_mask(vl, _mm512_slli_epi64(down10, 2));
    __mmask8 up10_in = _mm512_cmple_epu64_mask(_mm512_slli_epi64(up10, 2), vr);
    __m512i s4 = _mm512_slli_epi64(s, 2);
    __mmask8 s_in = _mm512_cmple_epu64_mask(vl, s4);
    __mmask8 t_in = _mm512_cmple_epu64_mask(_mm512_add_epi64(s4, set1(4)), vr);
    __m512i mid = _mm512_add_epi64(s4, set1(2));
    __mmask8 closer_t = _mm512_cmpgt_epu64_mask(vb, mid)
                        | (_mm512_cmpeq_epi64_mask(vb, mid) & _mm512_test_epi64_mask(s, set1(1)));
    __mmask8 take_t = (__mmask8)(~s_in | (t_in & closer_t));
    __m512i d = _mm512_mask_add_epi64(s, take_t, s, set1(1));
    d = _mm512_mask_blend_epi64(down10_in ^ up10_in, d, _mm512_mask_blend_epi64(down10_in, up10, down10));

    /* 9 digit slots: top (d / 10^8) and eight more in a word, most significant byte first; the
     * splits into 2-digit groups and digits run in 16-bit lanes (each value then fits in one) */
    __m512i top = _mm512_srli_epi64(_mm512_mul_epu32(d, set1(720575941)), 56);
    __m512i low = _mm512_sub_epi64(d, _mm512_mul_epu32(top, set1(100000000)));
    __m512i hi4 = _mm512_srli_epi64(_mm512_mul_epu32(low, set1(109951163)), 40);
    __m512i v = _mm512_or_si512(hi4, _mm512_slli_epi64(_mm512_sub_epi64(low, _mm512_mul_epu32(hi4, set1(10000))), 32));
    __m512i q = _mm512_srli_epi16(_mm512_mulhi_epu16(v, _mm512_set1_epi16(5243)), 3);          /* / 100 */
    v = _mm512_or_si512(q, _mm512_slli_epi32(_mm512_sub_epi16(v, _mm512_mullo_epi16(q, _mm512_set1_epi16(100))), 16));
    q = _mm512_mulhi_epu16(v, _mm512_set1_epi16(6554));                                          /* / 10 */
    __m512i digits = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_sub_epi16(v, _mm512_mullo_epi16(q, _mm512_set1_epi16(10))), 8));

    /* leading and trailing zero digits, digit count, decimal point */
    __m512i trail = _mm512_srli_epi64(_mm512_lzcnt_epi64(digits), 3);
    __m512i lowest = _mm512_and_si512(digits, _mm512_sub_epi64(_mm512_setzero_si512(), digits));
    __m512i zeros_before = _mm512_srli_epi64(_mm512_sub_epi64(set1(63), _mm512_lzcnt_epi64(lowest)), 3);
    __mmask8 has_top = _mm512_test_epi64_mask(top, top);
    __m512i lead = _mm512_mask_blend_epi64(has_top, _mm512_add_epi64(zeros_before, set1(1)), _mm512_setzero_si512());
    __m512i count = _mm512_sub_epi64(_mm512_sub_epi64(set1(9), lead), trail);
    __m512i point = _mm512_add_epi64(_mm512_sub_epi64(set1(9), lead), k);

    /* the case, its shuffle and the text's length */
    __mmask8 plain = _mm512_cmpge_epi64_mask(point, set1((uint64_t)-5)) & _mm512_cmple_epi64_mask(point, set1(13));
    __m512i x = _mm512_sub_epi64(point, set1(1));
    __m512i size = _mm512_abs_epi64(x);
    __mmask8 wide = _mm512_cmpge_epi64_mask(size, set1(10));
    __m512i case_plain = _mm512_add_epi64(times9(_mm512_add_epi64(point, set1(5))), lead);
    __m512i case_sci = _mm512_add_epi64(
        times9(_mm512_mask_add_epi64(_mm512_sub_epi64(count, set1(1)), wide, _mm512_sub_epi64(count, set1(1)), set1(9))),
        _mm512_add_epi64(lead, set1(JSON_PLAIN_CASES)));
    __m512i which = _mm512_mask_blend_epi64(plain, case_sci, case_plain);
    which = _mm512_maskz_mov_epi64(finite, which); /* other lanes: any valid case */
    const long long *shuffle_table = (const long long *)(const void *)posenc_json_shuffles;
    __m512i shuffle_lo = _mm512_i64gather_epi64(_mm512_slli_epi64(which, 1), shuffle_table, 8);
    __m512i shuffle_hi = _mm512_i64gather_epi64(_mm512_add_epi64(_mm512_slli_epi64(which, 1), set1(1)),
                                                shuffle_table, 8);
    __mmask8 inside = _mm512_cmplt_epi64_mask(point, count);
    __m512i length_plain = _mm512_mask_blend_epi64(
        _mm512_cmple_epi64_mask(point, _mm512_setzero_si512()),
        _mm512_mask_blend_epi64(inside, _mm512_add_epi64(point, set1(2)), _mm512_add_epi64(count, set1(1))),
        _mm512_sub_epi64(_mm512_add_epi64(count, set1(2)), point));
    __m512i at = _mm512_mask_blend_epi64(_mm512_cmpgt_epi64_mask(count, set1(1)), set1(1),
                                         _mm512_add_epi64(count, set1(1)));
    __m512i length_sci = _mm512_mask_add_epi64(_mm512_add_epi64(at, set1(3)), wide, _mm512_add_epi64(at, set1(3)),
                                               set1(1));
    __m512i length = _mm512_mask_blend_epi64(plain, length_sci, length_plain);

    /* the 16-byte sources: digits (ASCII), '.', '0', 'e', exponent sign and digits */
    __m512i ascii = _mm512_or_si512(digits, set1(0x3030303030303030ull));
    __m512i src_lo = _mm512_or_si512(_mm512_add_epi64(top, set1('0')), _mm512_slli_epi64(ascii, 8));
    __m512i tens = _mm512_srli_epi64(_mm512_mul_epu32(size, set1(205)), 11);
    __m512i units = _mm512_sub_epi64(size, times10(tens));
    __m512i x1 = _mm512_mask_blend_epi64(wide, units, tens);
    __m512i sign_char = _mm512_mask_blend_epi64(_mm512_cmplt_epi64_mask(x, _mm512_setzero_si512()), set1('+'),
                                                set1('-'));
    __m512i src_hi = _mm512_or_si512(
        _mm512_or_si512(_mm512_srli_epi64(ascii, 56), set1((uint64_t)'.' << 8 | (uint64_t)'0' << 16 | (uint64_t)'e' << 24)),
        _mm512_or_si512(_mm512_slli_epi64(sign_char, 32),
                        _mm512_or_si512(_mm512_slli_epi64(_mm512_add_epi64(x1, set1('0')), 40),
                                        _mm512_slli_epi64(_mm512_add_epi64(units, set1('0')), 48))));
    const __m512i first4 = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i last4 = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    __m512i text0 = _mm512_shuffle_epi8(_mm512_permutex2var_epi64(src_lo, first4, src_hi),
                                        _mm512_permutex2var_epi64(shuffle_lo, first4, shuffle_hi));
    __m512i text1 = _mm512_shuffle_epi8(_mm512_permutex2var_epi64(src_lo, last4, src_hi),
                                        _mm512_permutex2var_epi64(shuffle_lo, last4, shuffle_hi));

    /* lengths and signs, one byte each, into a word */
    uint64_t lengths = (uint64_t)_mm_cvtsi128_si64(_mm512_cvtepi64_epi8(length));
    uint32_t negative = _mm512_test_epi64_mask(raw, set1(0x80000000u));
    __m128i texts[8] = {
        _mm512_castsi512_si128(text0), _mm512_extracti32x4_epi32(text0, 1),
        _mm512_extracti32x4_epi32(text0, 2), _mm512_extracti32x4_epi32(text0, 3),
        _mm512_castsi512_si128(text1), _mm512_extracti32x4_epi32(text1, 1),
        _mm512_extracti32x4_epi32(text1, 2), _mm512_extracti32x4_epi32(text1, 3),
    };
    for (int i = 0; i < n; i++) {
        if (special >> i & 1) {
            p = posenc_json_special(p, bits[i]);
        } else {
            *p = '-';
            p += negative >> i & 1;
            _mm_storeu_si128((__m128i *)(void *)p, texts[i]);
            p += lengths >> (8 * i) & 0xFF;
        }
        *p++ = ',';
    }
    return p;
}

char *posenc_json_row_avx512(char *p, const uint32_t *bits, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) p = put8(p, bits + i, 8);
    if (i < n) p = put8(p, bits + i, (int)(n - i));
    return p;
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
typedef int posenc_no_avx512_json_on_this_architecture;
#endif
