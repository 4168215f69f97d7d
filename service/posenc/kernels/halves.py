"""Which rows of float32 values hold a midpoint of a 16-bit float grid (dtypes.midpoint_rows)."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb


@nb.njit(nogil=True, cache=True)
def half_midpoint_rows(bits, mant, emin, out):
    """out[r] = whether row r of the 2-D `bits` (float32 values viewed as uint32) holds a value
    exactly halfway between two neighbours of the 16-bit grid with `mant` mantissa bits and least
    exponent `emin` (subnormals and the overflow threshold included); returns how many rows do.
    dtypes.half_midpoints, reduced per row in one pass on the bit patterns (the numpy version
    makes eight passes of ~1 us each, and frexp/ldexp a value cost ~15 ns: more than a row).
    A float32 is M * 2^(E - 23) with M its 24-bit significand (no implicit bit for subnormals,
    E = -126 there); the grid step at it is 2^(max(E, emin) - mant), so `sh` = 23 + max(E, emin)
    - E - mant of M's bits lie below the step, and the value is a midpoint exactly when those
    bits are 1 followed by zeros. inf and NaN are never midpoints."""
    hits = 0
    for r in range(bits.shape[0]):
        hit = False
        for j in range(bits.shape[1]):
            b = bits[r, j]
            field = (b >> 23) & 0xFF
            if field == 0xFF:
                continue
            significand = b & 0x7FFFFF
            exponent = -126
            if field:
                significand |= 0x800000
                exponent = field - 127
            sh = 23 + max(exponent, emin) - exponent - mant
            if 1 <= sh <= 24 and significand & ((1 << sh) - 1) == 1 << (sh - 1):
                hit = True
                break
        out[r] = hit
        hits += hit
    return hits
