"""CRC-32C in numba, slice-by-8 in software: what checksum.crc32c computes without the native
library (and the oracle the tests hold the native kernels to)."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np

_CASTAGNOLI = 0x82F63B78  # reflected polynomial 0x1EDC6F41


def _slice_by_8_tables(poly: int) -> np.ndarray:
    """The 8 x 256 tables of a reflected CRC: t[k][b] is byte b's CRC followed by k zero bytes."""
    t = np.zeros((8, 256), np.uint32)
    for b in range(256):
        v = b
        for _ in range(8):
            v = (v >> 1) ^ poly if v & 1 else v >> 1
        t[0, b] = v
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


_TABLES = _slice_by_8_tables(_CASTAGNOLI)


@nb.njit(nogil=True, cache=True)
def _crc32c_numba(data, crc, t):
    """CRC-32C of a uint8 array continuing `crc` (0 to start), slice-by-8 in software."""
    r = np.uint32(crc) ^ np.uint32(0xFFFFFFFF)
    n = data.shape[0]
    i = 0
    while n - i >= 8:
        lo = r ^ (np.uint32(data[i]) | (np.uint32(data[i + 1]) << 8) | (np.uint32(data[i + 2]) << 16)
                  | (np.uint32(data[i + 3]) << 24))
        r = (t[7, lo & 0xFF] ^ t[6, (lo >> 8) & 0xFF] ^ t[5, (lo >> 16) & 0xFF] ^ t[4, lo >> 24]
             ^ t[3, data[i + 4]] ^ t[2, data[i + 5]] ^ t[1, data[i + 6]] ^ t[0, data[i + 7]])
        i += 8
    while i < n:
        r = t[0, (r ^ data[i]) & 0xFF] ^ (r >> 8)
        i += 1
    return r ^ np.uint32(0xFFFFFFFF)


def crc32c_software(view: np.ndarray, crc: int = 0) -> int:
    """CRC-32C of the uint8 array `view` continuing `crc` (0 to start)."""
    return int(_crc32c_numba(view, crc, _TABLES))
