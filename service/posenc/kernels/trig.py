"""sin/cos tables: the core of sinusoidal and RoPE, batch-invariant and bit-identical to C.

Every value is a pure function of (p, w_i, amp_i): the same whatever else is in the call,
and the same bits as the native kernels on every ISA, because this file spells out the
operation sequence of native/src (posenc.h "Batch invariance", vsincos.h) step for step:

* sincos of the exact product a*w (a double-double, never rounded to one float64): reduction
  by pi/2 in three float64 parts with two_prod/two_sum (after losing a multiple of 2*pi first
  beyond 2^45), fdlibm's polynomials with the first-order term of the reduced angle's low
  part, quadrant by k mod 4; libm only for |a*w| > 2^62 (and NaN/inf).
* integer p: split at absolute boundaries p = coarse + mid + fine (coarse a multiple of
  1024, mid of 16, fine < 16) and combined by angle addition; the parts repeat across rows,
  so contiguous ranges cost one multiply-add pair per value (as fast as a recurrence, but
  nothing carries from row to row). Other positions: one direct sincos of the exact p*w.

`fma` is LLVM's llvm.fma (one rounding; a hardware FMA here, exact libm emulation where
there is none); everything else is plain float64 arithmetic, which numba compiles without
fast-math and LLVM does not contract, so no multiply-add is fused behind our back.

Stores go through per-row 1-D slices: numba/LLVM vectorises those, but not stores
through 2-D views or computed flat offsets (2.5x slower, measured).

float32 rows are correctly rounded as the native ones are (kernels/rounding.py, posenc.h): the
rounding of y - err is stored where it equals that of y + err; the kernel lists the other
values (row, frequency, sin or cos) and `sincos_rows` writes posenc.crmath.sincos_rounded's
exact value over each. Any correct rounding is the same number, so the bits match C's.
"""

import math

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np
from numba.core import types
from numba.extending import intrinsic

from ..crmath import sincos_rounded
from .rounding import SINCOS_ERROR

#: The absolute split of integer positions (POSENC_SPLIT_COARSE / _FINE in posenc.h).
SPLIT_COARSE = 1024
SPLIT_FINE = 16
MID_ROWS = SPLIT_COARSE // SPLIT_FINE
#: Above this many frequencies the part caches keep one row each (CACHE_MAX_FREQS in C).
CACHE_MAX_FREQS = 2048

SMALL_MAX = 2.0**45
EXACT_MAX = 2.0**62
TWO_OVER_PI = float.fromhex("0x1.45f306dc9c883p-1")
INV_TWO_PI = float.fromhex("0x1.45f306dc9c883p-3")
PIO2_1 = float.fromhex("0x1.921fb54442d18p+0")
PIO2_2 = float.fromhex("0x1.1a62633145c07p-54")
PIO2_3 = float.fromhex("-0x1.f1976b7ed8fbcp-110")
TWOPI_1 = float.fromhex("0x1.921fb54442d18p+2")
TWOPI_2 = float.fromhex("0x1.1a62633145c07p-52")
TWOPI_3 = float.fromhex("-0x1.f1976b7ed8fbcp-108")
ROUND_MAGIC = float.fromhex("0x1.8p52")
ROUND_MAGIC_2PI = float.fromhex("0x1.8p61")
S1, S2, S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
S4, S5, S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
C1, C2, C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
C4, C5, C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11


@intrinsic
def fma(typingctx, a, b, c):
    """a*b + c rounded once (llvm.fma.f64), as _mm256_fmadd_pd and C99 fma."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@nb.njit(nogil=True, cache=True, inline="always")
def _two_sum(a, b):
    """vsincos.h's v_two_sum: s + err == a + b exactly."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


@nb.njit(nogil=True, cache=True, inline="always")
def _sincos_small(a_hi, a_lo):
    """vsincos.h's v_sincos_small for one lane: sin and cos of a_hi + a_lo for
    |a_hi| <= SMALL_MAX; branch-free (selects only), so loops over frequencies vectorise."""
    t = fma(a_hi, TWO_OVER_PI, ROUND_MAGIC)
    k = t - ROUND_MAGIC
    d = fma(-k, PIO2_1, a_hi)
    h = k * -PIO2_2
    lo = fma(k, -PIO2_2, -h)
    s, e1 = _two_sum(d, h)
    r, e2 = _two_sum(s, a_lo)
    r_lo = (e1 + e2) + fma(-k, PIO2_3, lo)
    z = r * r
    w = z * z
    ps = fma(z, fma(z, S4, S3), S2)
    ps = fma(z * w, fma(z, S6, S5), ps)
    hz = z * 0.5
    one_minus_hz = 1.0 - hz
    sin_r = r + fma(z * r, fma(z, ps, S1), r_lo * one_minus_hz)
    pc = z * fma(z, fma(z, C3, C2), C1)
    pc = fma(w * w, fma(z, fma(z, C6, C5), C4), pc)
    tail = fma(z, pc, (1.0 - one_minus_hz) - hz)
    cos_r = one_minus_hz + fma(-r_lo, r, tail)
    q = np.int64(k)
    s = cos_r if q & 1 else sin_r
    c = sin_r if q & 1 else cos_r
    s = -s if q & 2 else s
    c = -c if (q + 1) & 2 else c
    return s, c


@nb.njit(nogil=True, cache=True, inline="always")
def _reduce_two_pi(a_hi, a_lo):
    """vsincos.h's v_reduce_two_pi: a_hi + a_lo less an exact multiple of 2*pi."""
    n = fma(a_hi, INV_TWO_PI, ROUND_MAGIC_2PI) - ROUND_MAGIC_2PI
    m1 = n * TWOPI_1
    minus_m1_lo = fma(-n, TWOPI_1, m1)
    m2 = n * -TWOPI_2
    m2_lo = fma(n, -TWOPI_2, -m2)
    s, e1 = _two_sum(a_hi - m1, a_lo)
    s, e2 = _two_sum(s, minus_m1_lo)
    b_hi, e3 = _two_sum(s, m2)
    return b_hi, ((e1 + e2) + e3) + fma(-n, TWOPI_3, m2_lo)


@nb.njit(nogil=True, cache=True, inline="always")
def _sincos_of(a, freqs, s, c):
    """s, c = sin/cos of the exact a * w for every frequency (vsincos.h's v_sincos_product):
    a vectorisable pass, then the lanes beyond SMALL_MAX again, after losing a multiple of
    2*pi, and those beyond EXACT_MAX (or NaN) through libm."""
    for i in range(freqs.shape[0]):
        a_hi = a * freqs[i]
        s[i], c[i] = _sincos_small(a_hi, fma(a, freqs[i], -a_hi))
    for i in range(freqs.shape[0]):
        a_hi = a * freqs[i]
        if not abs(a_hi) <= SMALL_MAX:
            a_lo = fma(a, freqs[i], -a_hi)
            if abs(a_hi) <= EXACT_MAX:
                b_hi, b_lo = _reduce_two_pi(a_hi, a_lo)
                s[i], c[i] = _sincos_small(b_hi, b_lo)
            else:
                sin_hi, cos_hi = math.sin(a_hi), math.cos(a_hi)
                sin_lo, cos_lo = math.sin(a_lo), math.cos(a_lo)
                s[i] = fma(sin_hi, cos_lo, cos_hi * sin_lo)
                c[i] = fma(cos_hi, cos_lo, -(sin_hi * sin_lo))


@nb.njit(nogil=True, cache=True, inline="always")
def _part_row(cache, tags, j, unit, freqs):
    """Slot holding sincos(j*unit*w) (the product exact), computed on first use (one slot for wide tables)."""
    slot = j if tags.shape[0] > 1 else 0
    if tags[slot] != j:
        _sincos_of(float(j) * unit, freqs, cache[slot, 0], cache[slot, 1])
        tags[slot] = j
    return slot


#: Undecided float32 values one kernel call lists before it returns for them to be written (or a
#: row's worth, 2 per frequency, if that is more).
UNDECIDED_CAPACITY = 4096


def sincos_rows(positions, freqs, amp, flat, row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi):
    """For rows r in lo..hi and frequency i (n_sin = len(freqs) >= n_cos):

    blocks:      flat[r*row_stride + sin_base + i] = amp_i sin(p_r w_i),  cos at cos_base + i
    interleaved: flat[r*row_stride + 2i] = amp_i sin(p_r w_i),  flat[r*row_stride + 2i + 1] = amp_i cos(p_r w_i)

    float64: the kernel's value y; float32: the exact value rounded once."""
    f32 = flat.dtype == np.float32
    err = SINCOS_ERROR * np.abs(amp) if f32 else amp
    capacity = max(UNDECIDED_CAPACITY, 2 * freqs.shape[0]) if f32 else 0  # a whole row fits; float64 lists none
    undecided = np.empty((capacity, 3), dtype=np.int64)
    sin_col = 2 if interleaved else 1
    while lo < hi:
        count, lo = _sincos_rows(positions, freqs, amp, flat, row_stride, sin_base, cos_base, interleaved, n_cos,
                                 lo, hi, f32, err, undecided)
        for r, i, cosine in undecided[:count].tolist():
            column = (2 * i + 1 if interleaved else cos_base + i) if cosine else sin_base + sin_col * i
            flat[r * row_stride + column] = sincos_rounded(float(positions[r]), float(freqs[i]), float(amp[i]),
                                                           "cos" if cosine else "sin")


@nb.njit(nogil=True, cache=True, inline="always")
def _store(out, j, y, f32, err, undecided, count, r, i, cosine):
    """out[j] = y (float64), or the rounding of y - err where it equals that of y + err (float32;
    bit for bit, as C's vf_differ: -0 and +0 differ, a NaN is decided); else the value is listed
    in `undecided` (and the rounding of y - err stays until it is replaced). Returns the count."""
    if not f32:
        out[j] = y
        return count
    low, high = np.float32(y - err), np.float32(y + err)
    out[j] = low
    if (low != high and low == low) or (low == 0 and high == 0 and math.copysign(1.0, low) != math.copysign(1.0, high)):
        undecided[count, 0] = r
        undecided[count, 1] = i
        undecided[count, 2] = cosine
        count += 1
    return count


@nb.njit(nogil=True, cache=True)
def _sincos_rows(positions, freqs, amp, flat, row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi, f32, err,
                 undecided):
    """sincos_rows' rows from lo, listing the undecided float32 values in `undecided`; returns
    (their count, the row it stopped before): hi, or earlier when the list could overflow."""
    n_sin = freqs.shape[0]
    wide = n_sin > CACHE_MAX_FREQS
    mid = np.empty((1 if wide else MID_ROWS, 2, n_sin))
    fine = np.empty((1 if wide else SPLIT_FINE, 2, n_sin))
    mid_tags = np.full(mid.shape[0], -1, dtype=np.int64)
    fine_tags = np.full(fine.shape[0], -1, dtype=np.int64)
    coarse_s = np.empty(n_sin)
    coarse_c = np.empty(n_sin)
    anchor_s = np.empty(n_sin)
    anchor_c = np.empty(n_sin)
    s = np.empty(n_sin)
    c = np.empty(n_sin)
    coarse_at = math.nan
    anchor_coarse = math.nan
    anchor_mid = -1
    sin_col = 2 if interleaved else 1
    count = 0
    for r in range(lo, hi):
        if f32 and count + 2 * n_sin > undecided.shape[0]:
            return count, r
        p = positions[r]
        if abs(p) < 2.0**53 and p == math.floor(p):
            coarse = math.floor(p * (1.0 / SPLIT_COARSE)) * SPLIT_COARSE
            rest = p - coarse
            m = np.int64(rest * (1.0 / SPLIT_FINE))
            f = np.int64(rest) - m * SPLIT_FINE
            if coarse != anchor_coarse or m != anchor_mid:
                if coarse != coarse_at:
                    _sincos_of(coarse, freqs, coarse_s, coarse_c)
                    coarse_at = coarse
                k = _part_row(mid, mid_tags, m, float(SPLIT_FINE), freqs)
                for i in range(n_sin):
                    hs, hc, ms, mc = coarse_s[i], coarse_c[i], mid[k, 0, i], mid[k, 1, i]
                    anchor_s[i] = amp[i] * fma(hs, mc, hc * ms)
                    anchor_c[i] = amp[i] * fma(hc, mc, -(hs * ms))
                anchor_coarse = coarse
                anchor_mid = m
            k = _part_row(fine, fine_tags, f, 1.0, freqs)
            for i in range(n_sin):
                a, b, fs, fc = anchor_s[i], anchor_c[i], fine[k, 0, i], fine[k, 1, i]
                s[i] = fma(a, fc, b * fs)
                c[i] = fma(b, fc, -(a * fs))
        else:
            _sincos_of(p, freqs, s, c)
            for i in range(n_sin):
                s[i] *= amp[i]
                c[i] *= amp[i]
        if interleaved:
            row = flat[r * row_stride: (r + 1) * row_stride]
            for i in range(n_cos):
                count = _store(row, 2 * i, s[i], f32, err[i], undecided, count, r, i, 0)
                count = _store(row, 2 * i + 1, c[i], f32, err[i], undecided, count, r, i, 1)
        else:
            sin_row = flat[r * row_stride + sin_base: r * row_stride + sin_base + n_cos]
            cos_row = flat[r * row_stride + cos_base: r * row_stride + cos_base + n_cos]
            for i in range(n_cos):
                count = _store(sin_row, i, s[i], f32, err[i], undecided, count, r, i, 0)
                count = _store(cos_row, i, c[i], f32, err[i], undecided, count, r, i, 1)
        # odd widths: the one sin column without a cos partner
        for i in range(n_cos, n_sin):
            count = _store(flat, r * row_stride + sin_base + sin_col * i, s[i], f32, err[i], undecided, count, r, i, 0)
    return count, hi
