/* The vector writers' shared body: one float32 per 64-bit lane, from bits to the 16-byte source of
 * its text, the same steps as the scalar writer in json_f32.c (see there for the method) written
 * once for json_f32_avx512.c (8 lanes, k-register masks) and json_f32_avx2.c (4 lanes, vector
 * masks). Included only under each file's target pragma, after it defines the layer:
 *
 *   jv, jm               a vector of 64-bit lanes and a per-lane mask
 *   j1(u64)              broadcast
 *   jadd jsub jand jor   64-bit lane arithmetic and bitwise; JSHL(a, n) JSHR(a, n) by an immediate
 *   jshrv(a, n)          logical right shift by per-lane counts
 *   jmul32(a, b)         low 32 bits of each lane times low 32 bits: a 64-bit product
 *   jmin32(a, b)         unsigned minimum of each 32-bit half
 *   jmulhi16 jmullo16 jsub16 jset16 JSHR16 JSHL16 JSHL32   16- and 32-bit lane steps of the digits
 *   jgt(a, b) jeq(a, b)  signed 64-bit compares -> mask (every value compared here is below 2^62)
 *   jmand jmor jmxor jmandnot(a, b) = ~a & b   on masks
 *   jsel(m, a, b)        b where m, else a
 *   jadd_if(a, m, b)     a + b where m, else a
 *   jlow32s(a)           the low 32 bits of each lane, sign-extended
 *
 * What differs between the writers stays in their files: how the per-exponent scales and the
 * shuffles are fetched (gathers vs scalar loads), how zero digits are counted (lzcnt vs byte sums)
 * and how the 16-byte texts are assembled. Lanes that hold zero or a non-finite value ("special")
 * compute garbage that no store uses; only their shuffle index is forced in range. */
#ifndef POSENC_JSON_LANES_H
#define POSENC_JSON_LANES_H

#include <stdint.h>

#include "json_f32.h"

static inline jv jl_zero(void) { return j1(0); }
/* Small multiples by shifts (a 64-bit lane multiply is several uops, and mul_epu32 drops the top). */
static inline jv jl_times10(jv x) { return jadd(JSHL(x, 3), JSHL(x, 1)); }
static inline jv jl_times9(jv x) { return jadd(JSHL(x, 3), x); }

/* Zero and non-finite values: written by posenc_json_special, not from their lane. */
static inline jm jl_special(jv magnitude)
{
    return jmor(jeq(magnitude, jl_zero()), jgt(magnitude, j1(0x7F7FFFFF)));
}

/* The significand c and, in 8-byte units, where its exponent's json_scale is in posenc_json_scales
 * (biased * 4, + 2 for the narrower interval of a power of two above the smallest normal). */
static inline jv jl_decode(jv magnitude, jv *c, jm *irregular)
{
    jv biased = JSHR(magnitude, 23), fraction = jand(magnitude, j1(0x7FFFFF));
    *irregular = jmand(jeq(fraction, jl_zero()), jgt(biased, j1(1)));
    *c = jadd_if(fraction, jgt(biased, jl_zero()), j1(0x800000));
    return jadd_if(JSHL(biased, 2), *irregular, j1(2));
}

/* floor(G * c4 / 2^(64 - h)) rounded to odd below bit 31, as the scalar round_odd. G is 63 bits and
 * 4c 26, and only bits 28 and up of G * 4c matter: hi(G) * 4c * 16 + (lo(G) * 4c >> 28), exactly.
 * The sticky bit is min(low 32 bits, 1) (the high half's minimum with 0 is 0). */
static inline jv jl_round_odd(jv g_hi, jv g, jv c4, jv shift)
{
    jv x = jshrv(jadd(JSHL(jmul32(g_hi, c4), 4), JSHR(jmul32(g, c4), 28)), shift);
    return jor(JSHR(x, 31), jmin32(x, j1(1)));
}

/* The shortest decimal's digits d (value d * 10^k) of each lane, Schubfach as json_f32.c's shortest:
 * g and kh are the lane's json_scale (G; k in the low half of kh, h in the high half). */
static inline jv jl_shortest(jv c, jm irregular, jv g, jv kh)
{
    jv shift = jsub(j1(36), JSHR(kh, 32)), g_hi = JSHR(g, 32);
    jv c4 = JSHL(c, 2), odd = jand(c, j1(1));
    jv below = jadd_if(jsub(c4, j1(2)), irregular, j1(1));
    jv vb = jl_round_odd(g_hi, g, c4, shift);
    jv vl = jadd(jl_round_odd(g_hi, g, below, shift), odd);         /* an odd c: the ends are out */
    jv vr = jsub(jl_round_odd(g_hi, g, jadd(c4, j1(2)), shift), odd);
    jv s = JSHR(vb, 2);
    jv down10 = jl_times10(JSHR(jmul32(s, j1(0xCCCCCCCDu)), 35)), up10 = jadd(down10, j1(10));
    jm down10_out = jgt(vl, JSHL(down10, 2)), up10_out = jgt(JSHL(up10, 2), vr);
    jv s4 = JSHL(s, 2);
    jm s_out = jgt(vl, s4), t_out = jgt(jadd(s4, j1(4)), vr);
    /* above s + 1/2, or at it with s odd: vb > 4s + 2 - (s & 1) */
    jm closer_t = jgt(vb, jsub(jadd(s4, j1(2)), jand(s, j1(1))));
    jv nearest = jadd_if(s, jmor(s_out, jmandnot(t_out, closer_t)), j1(1));
    /* a multiple of ten in the interval is the only shortest one */
    return jsel(jmxor(down10_out, up10_out), nearest, jsel(down10_out, down10, up10));
}

/* d (< 10^9) as a top digit and eight more in a word, the most significant in its low byte, as the
 * scalar digits8; the splits into 2-digit groups and digits run in 16-bit lanes. */
static inline jv jl_digits(jv d, jv *top)
{
    *top = JSHR(jmul32(d, j1(720575941)), 56);
    jv low = jsub(d, jmul32(*top, j1(100000000)));
    jv hi4 = JSHR(jmul32(low, j1(109951163)), 40);
    jv v = jor(hi4, JSHL(jsub(low, jmul32(hi4, j1(10000))), 32));                     /* two 4-digit halves */
    jv q = JSHR16(jmulhi16(v, jset16(5243)), 3);                                      /* / 100 */
    v = jor(q, JSHL32(jsub16(v, jmullo16(q, jset16(100))), 16));
    q = jmulhi16(v, jset16(6554));                                                    /* / 10 */
    return jor(q, JSHL16(jsub16(v, jmullo16(q, jset16(10))), 8));
}

/* The notation of each lane from its digits (lead: zero digits before the first significant one of
 * the nine; trail: zero digits after the last), as json_f32.c's finite_text: the index of its
 * shuffle in posenc_json_shuffles, its text's length (without the sign) and the shuffle's 16-byte
 * source, low and high 8 bytes: the nine ASCII digits, '.', '0', 'e', the exponent's sign and digits
 * (the layout gen_json_tables.py's SRC_* name). */
typedef struct {
    jv which, length, src_lo, src_hi;
} jl_layout;

static inline jl_layout jl_lay_out(jm special, jv top, jv digits, jv lead, jv trail, jv k)
{
    jl_layout out;
    jv count = jsub(jsub(j1(9), lead), trail);
    jv point = jadd(jsub(j1(9), lead), k);                     /* value = 0.d1..dn * 10^point */
    jm plain = jmand(jgt(point, j1((uint64_t)-6)), jgt(j1(14), point));
    jv x = jsub(point, j1(1));                                  /* the scientific exponent */
    jm negative = jgt(jl_zero(), x);
    jv size = jsel(negative, x, jsub(jl_zero(), x));
    jm wide = jgt(size, j1(9));
    jv case_plain = jadd(jl_times9(jadd(point, j1(5))), lead);
    jv case_sci = jadd(jl_times9(jadd_if(jsub(count, j1(1)), wide, j1(9))), jadd(lead, j1(JSON_PLAIN_CASES)));
    out.which = jsel(special, jsel(plain, case_sci, case_plain), jl_zero());
    jv length_plain = jsel(jgt(point, jl_zero()), jsub(jadd(count, j1(2)), point),     /* 0.000ddd */
                           jsel(jgt(count, point), jadd(point, j1(2)), jadd(count, j1(1))));
    jv at = jsel(jgt(count, j1(1)), j1(1), jadd(count, j1(1)));                     /* d[.ddd] then e */
    jv length_sci = jadd_if(jadd(at, j1(3)), wide, j1(1));
    out.length = jsel(plain, length_sci, length_plain);

    jv ascii = jor(digits, j1(0x3030303030303030ull));
    out.src_lo = jor(jadd(top, j1('0')), JSHL(ascii, 8));
    jv tens = JSHR(jmul32(size, j1(205)), 11), units = jsub(size, jl_times10(tens));
    jv exponent = jadd(jor(JSHL(jsel(wide, units, tens), 40), JSHL(units, 48)),
                       j1((uint64_t)'.' << 8 | (uint64_t)'0' << 16 | (uint64_t)'e' << 24 | (uint64_t)'+' << 32
                          | (uint64_t)'0' << 40 | (uint64_t)'0' << 48));
    out.src_hi = jor(JSHR(ascii, 56), jadd_if(exponent, negative, j1((uint64_t)('-' - '+') << 32)));
    return out;
}

/* The texts of up to 8 numbers and their separators at p: lane i's 16-byte text (its length in byte
 * i of lengths) after a '-' where bit i of negative is set; special lanes by the scalar code. */
static inline char *jl_put_texts(char *p, const uint32_t *bits, int n, unsigned special, unsigned negative,
                                 const __m128i *texts, uint64_t lengths)
{
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

#endif
