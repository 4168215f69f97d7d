"""The CPython binding (native/python/_posenc.c) against the numba kernels it stands in for.

posenc.kernels.active runs the binding wherever the native core is built, so every API call
and every served row goes through it: each of its functions must give the numba kernel's
bits for the same arguments, whatever the row range, layout, dtype or values (drawn here by
hypothesis), and a call that does not fit its arrays must raise, never read or write outside
them. The shm seqlock functions are held to the numba ones on registries with live, free and
busy slots. The per-ISA values of the native kernels are test_kernels.py's and
test_invariance.py's; this is the binding's marshalling of them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import kernels as numba_kernels
from posenc import native
from posenc.kernels import MODES, active
from posenc.shm import layout, seqlock
from posenc.shm.format import STATE_WORD

binding = native.BINDING
pytestmark = pytest.mark.skipif(binding is None, reason=f"no native binding here: {native.STATUS}")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def row_range(n: int):
    return st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted)


def test_active_runs_the_binding():
    assert active.sincos_rows is binding.sincos_rows
    assert active.NAME == native.ACTIVE.name


@st.composite
def sincos_cases(draw):
    n = draw(st.integers(0, 40))
    n_sin = draw(st.integers(0, 9))
    interleaved = draw(st.booleans())
    n_cos = draw(st.sampled_from(sorted({n_sin, max(n_sin - 1, 0)})))
    integers = draw(st.booleans())
    if integers:
        values = st.lists(st.integers(-(1 << 40), 1 << 40), min_size=n, max_size=n)
        positions = np.array(draw(values), np.float64)
    else:
        positions = np.array(draw(st.lists(st.floats(-1e12, 1e12), min_size=n, max_size=n)), np.float64)
    freqs = np.array(draw(st.lists(st.floats(1e-9, 10.0), min_size=n_sin, max_size=n_sin)), np.float64)
    amp = np.array(draw(st.lists(st.floats(0.01, 4.0), min_size=n_sin, max_size=n_sin)), np.float64)
    if interleaved:
        row_stride, sin_base, cos_base = 2 * n_sin + draw(st.integers(0, 3)), 0, 0
    else:
        gap = draw(st.integers(0, 3))
        sin_first = draw(st.booleans())
        sin_base, cos_base = (0, n_sin + gap) if sin_first else (n_cos + gap, 0)
        row_stride = n_sin + n_cos + gap + draw(st.integers(0, 2))
    lo, hi = draw(row_range(n))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return positions, freqs, amp, row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi, dtype


@SETTINGS
@given(sincos_cases())
def test_sincos_rows(case):
    positions, freqs, amp, row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi, dtype = case
    size = max(positions.shape[0] * row_stride, 1)
    ours, theirs = np.full(size, 7.0, dtype), np.full(size, 7.0, dtype)
    args = (row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi)
    binding.sincos_rows(positions, freqs, amp, ours, *args)
    numba_kernels.sincos_rows(positions, freqs, amp, theirs, *args)
    same_bits(ours, theirs)  # the cells outside lo..hi and the layout's gaps untouched by both


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 12), st.integers(0, 5), st.integers(0, 4), st.booleans(),
       st.sampled_from([np.float32, np.float64]), st.data())
def test_rope_rotate_rows(batch, n, n_freq, extra, interleaved, dtype, data):
    width = 2 * n_freq + extra
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((batch, n, width)).astype(dtype)
    cos, sin = rng.uniform(-2, 2, (n, n_freq)), rng.uniform(-2, 2, (n, n_freq))
    lo, hi = data.draw(row_range(n))
    ours, theirs = np.full_like(x, 5), np.full_like(x, 5)
    binding.rope_rotate_rows(x, cos, sin, interleaved, ours, lo, hi)
    numba_kernels.rope_rotate_rows(x, cos, sin, interleaved, theirs, lo, hi)
    same_bits(ours, theirs)


@SETTINGS
@given(st.integers(0, 4), st.integers(0, 9), st.integers(0, 9), st.sampled_from(sorted(MODES.values())),
       st.sampled_from([np.float32, np.float64]), st.data())
def test_alibi_bias_rows(heads, q_len, k_len, mode, dtype, data):
    slopes = np.array(data.draw(st.lists(st.floats(1e-6, 1.0), min_size=heads, max_size=heads)), np.float64)
    q_pos = np.array(data.draw(st.lists(st.integers(-1000, 1000), min_size=q_len, max_size=q_len)), float)
    k_pos = np.array(data.draw(st.lists(st.integers(-1000, 1000), min_size=k_len, max_size=k_len)), float)
    lo, hi = data.draw(row_range(q_len))
    ours, theirs = np.full((heads, q_len, k_len), 3, dtype), np.full((heads, q_len, k_len), 3, dtype)
    binding.alibi_bias_rows(slopes, q_pos, k_pos, mode, ours, lo, hi)
    numba_kernels.alibi_bias_rows(slopes, q_pos, k_pos, mode, theirs, lo, hi)
    same_bits(ours, theirs)


@SETTINGS
@given(st.integers(1, 20), st.integers(0, 6), st.sampled_from(["float32", "float64", "float16", "bfloat16"]),
       st.data())
def test_gather_rows(n_table, width, dtype, data):
    import ml_dtypes  # noqa: F401  registers bfloat16 with numpy (the dtype names below)

    table = np.arange(n_table * width, dtype=np.float64).reshape(n_table, width).astype(dtype)
    rows = np.array(data.draw(st.lists(st.integers(0, n_table - 1), max_size=30)), np.int64)
    lo, hi = data.draw(row_range(rows.shape[0]))
    ours, theirs = np.zeros((rows.shape[0], width), dtype), np.zeros((rows.shape[0], width), dtype)
    binding.gather_rows(table, rows, ours, lo, hi)
    if table.dtype.itemsize == 2:  # numba has no 16-bit floats: numpy's gather is the oracle
        theirs[lo:hi] = table[rows[lo:hi]]
    else:
        numba_kernels.gather_rows(table, rows, theirs, lo, hi)
    same_bits(ours, theirs)


def test_gather_rows_outside_the_table_raises_and_writes_nothing():
    table = np.ones((4, 3), np.float32)
    out = np.zeros((3, 3), np.float32)
    for bad in (4, -1, 1 << 62):
        with pytest.raises(IndexError, match=f"index {bad} is outside the table"):
            binding.gather_rows(table, np.array([0, bad, 1], np.int64), out, 0, 3)
        assert not out.any()


@SETTINGS
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_index_span(values):
    arr = np.array(values, np.int64)
    assert binding.index_span(arr) == numba_kernels.index_span(arr) == (min(values), max(values))
    read_only = np.frombuffer(arr.tobytes(), "<i8")  # raw request bodies
    assert binding.index_span(read_only) == (min(values), max(values))


@SETTINGS
@given(st.integers(0, 6), st.integers(0, 5), st.sampled_from([(10, -14), (7, -126)]), st.data())
def test_half_midpoint_rows(rows, width, grid, data):
    mant, emin = grid
    # every kind of float32: random bits, exact midpoints of the grid, subnormals, inf and NaN
    specials = [0x3F800000 | (1 << (22 - mant)), 0x00000001, 0x7F800000, 0x7FC00000, 0x387FC000, 0x33800000]
    words = data.draw(st.lists(st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(specials)),
                               min_size=rows * width, max_size=rows * width))
    bits = np.array(words, np.uint32).reshape(rows, width)
    ours, theirs = np.zeros(rows, np.bool_), np.zeros(rows, np.bool_)
    hits = numba_kernels.half_midpoint_rows(bits, mant, emin, theirs)
    assert binding.half_midpoint_rows(bits, mant, emin, ours) == hits
    same_bits(ours, theirs)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 16), (4, 5), (320, 1000), (33, 10**6)])
def test_t5_buckets_every_distance(bidirectional, num_buckets, max_distance):
    """Every relative position from -2^20 to 2^20 and the int64 extremes: the float32 log path."""
    extremes = [-(2**63), 2**63 - 1, -(2**63) + 1]
    rel = np.concatenate([np.arange(-(1 << 20), 1 << 20), extremes]).astype(np.int64)
    ours, theirs = np.empty_like(rel), np.empty_like(rel)
    args = (bidirectional, num_buckets, max_distance)
    binding.t5_buckets(rel, *args, ours, 0, rel.shape[0])
    numba_kernels.t5_buckets(rel, *args, theirs, 0, rel.shape[0])
    same_bits(ours, theirs)


@SETTINGS
@given(st.integers(0, 8), st.integers(0, 6), st.data())
def test_xpos_decay_rows(n, n_zeta, data):
    zeta = np.array(data.draw(st.lists(st.floats(0.2, 1.0), min_size=n_zeta, max_size=n_zeta)), np.float64)
    power = np.array(data.draw(st.lists(st.floats(-300, 300), min_size=n, max_size=n)), np.float64)
    lo, hi = data.draw(row_range(n))
    ours, theirs = np.full((n, n_zeta), 2.0), np.full((n, n_zeta), 2.0)
    binding.xpos_decay_rows(zeta, power, ours, lo, hi)
    numba_kernels.xpos_decay_rows(zeta, power, theirs, lo, hi)
    same_bits(ours, theirs)


# ---- calls that do not fit their arrays raise; nothing is read or written outside them ----

def _sincos(**change):
    args = dict(positions=np.arange(4.0), freqs=np.ones(2), amp=np.ones(2), flat=np.zeros(16), row_stride=4,
                sin_base=0, cos_base=2, interleaved=False, n_cos=2, lo=0, hi=4)
    args.update(change)
    return binding.sincos_rows(*args.values())


@pytest.mark.parametrize("change, error", [
    ({"flat": np.zeros(15)}, ValueError),                     # one element short of the last row
    ({"hi": 5}, ValueError),                                  # rows past the positions
    ({"lo": 3, "hi": 2}, ValueError),
    ({"lo": -1}, ValueError),
    ({"amp": np.ones(3)}, ValueError),
    ({"n_cos": 3}, ValueError),
    ({"cos_base": -1}, ValueError),
    ({"row_stride": 2**62}, ValueError),                      # the end of the last row overflows int64
    ({"sin_base": 2**63 - 2}, ValueError),
    ({"positions": np.arange(4, dtype=np.float32)}, TypeError),
    ({"flat": np.zeros(16, np.int64)}, TypeError),
    ({"flat": np.zeros(32)[::2]}, ValueError),                # not contiguous
    ({"flat": np.frombuffer(bytes(128))}, ValueError),        # read-only
    ({"positions": [0.0, 1.0]}, ValueError),                  # not a buffer
    ({"row_stride": "4"}, TypeError),
])
def test_sincos_rows_refuses_arrays_that_do_not_fit(change, error):
    with pytest.raises(error):
        _sincos(**change)


def test_other_kernels_refuse_arrays_that_do_not_fit():
    x = np.zeros((1, 4, 8))
    with pytest.raises(ValueError, match="must match x"):
        binding.rope_rotate_rows(x, np.zeros((4, 4)), np.zeros((4, 4)), False, np.zeros((1, 4, 7)), 0, 4)
    with pytest.raises(ValueError, match="2\\*n_freq <= head_dim"):
        binding.rope_rotate_rows(x, np.zeros((4, 5)), np.zeros((4, 5)), False, np.zeros_like(x), 0, 4)
    with pytest.raises(TypeError, match="must be float32 or float64"):
        binding.rope_rotate_rows(x.astype(np.float16), np.zeros((4, 4)), np.zeros((4, 4)), False,
                                 np.zeros((1, 4, 8), np.float16), 0, 4)
    with pytest.raises(ValueError, match="mode"):
        binding.alibi_bias_rows(np.ones(1), np.zeros(2), np.zeros(2), 3, np.zeros((1, 2, 2)), 0, 2)
    with pytest.raises(ValueError, match="matching slopes"):
        binding.alibi_bias_rows(np.ones(2), np.zeros(2), np.zeros(2), 0, np.zeros((1, 2, 2)), 0, 2)
    with pytest.raises(ValueError, match="outside"):
        binding.gather_rows(np.zeros((2, 2)), np.zeros(3, np.int64), np.zeros((2, 2)), 0, 3)
    with pytest.raises(ValueError, match="element type"):
        binding.gather_rows(np.zeros((2, 2)), np.zeros(2, np.int64), np.zeros((2, 2), np.float32), 0, 2)
    with pytest.raises(ValueError, match="empty"):
        binding.index_span(np.zeros(0, np.int64))
    with pytest.raises(TypeError, match="int64"):
        binding.index_span(np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="one entry per row"):
        binding.half_midpoint_rows(np.zeros((3, 2), np.uint32), 10, -14, np.zeros(2, np.bool_))
    with pytest.raises(ValueError, match="max_distance"):
        binding.t5_buckets(np.zeros(2, np.int64), True, 2, 128, np.zeros(2, np.int64), 0, 2)
    with pytest.raises(ValueError, match="outside"):
        binding.xpos_decay_rows(np.ones(2), np.ones(2), np.zeros((1, 2)), 0, 2)
    with pytest.raises(TypeError, match="takes 11 arguments"):
        binding.sincos_rows()


def test_big_jobs_let_go_of_the_gil():
    """run_rows splits big jobs across threads: the binding must run them without the GIL. While
    one thread is inside a big call, the main thread keeps running (with the GIL held it could
    not run at all between the call's first and last instant)."""
    code = ("import threading, time, numpy as np\n"
            "from posenc import native\n"
            "n = 1 << 18\n"
            "pos, w, a = np.arange(float(n)), np.full(64, 1e-3), np.ones(64)\n"
            "out = np.empty(n * 128, np.float32)\n"
            "window = []\n"
            "def work():\n"
            "    window.append(time.perf_counter())\n"
            "    native.BINDING.sincos_rows(pos, w, a, out, 128, 0, 64, False, 64, 0, n)\n"
            "    window.append(time.perf_counter())\n"
            "stamps = []\n"
            "t = threading.Thread(target=work); t.start()\n"
            "while t.is_alive(): stamps.append(time.perf_counter())\n"
            "t.join()\n"
            "print(sum(window[0] < s < window[1] for s in stamps))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    inside = int(result.stdout)
    assert inside > 1000, "the main thread never ran while the kernel did"


# ---- the shm seqlocks -----------------------------------------------------------------------

def test_layout_constants_agree():
    assert binding.STATE_WORD == STATE_WORD
    assert binding.REGISTRY_CAPACITY == layout.CAPACITY
    assert binding.REGISTRY_SIZE == layout.SIZE
    assert binding.NAME_WORDS == layout.NAME_WORDS


def _registry(rng, names, busy=()):
    words = np.zeros(layout.SIZE // 8, np.uint64)
    slots = rng.choice(layout.CAPACITY, size=len(names), replace=False)
    for slot, (name, generation) in zip(slots, names.items()):
        seqlock.write_slot(words, int(slot), generation, _name_words(name))
    for slot in busy:
        words[layout.HEADER_WORDS + slot * layout.SLOT_WORDS] |= 1
    return words


def _name_words(name: str) -> np.ndarray:
    return np.frombuffer(name.encode().ljust(64, b"\0"), np.uint64)


@SETTINGS
@given(st.dictionaries(st.text("abcdef-_.0123456789", min_size=1, max_size=64), st.integers(1, 2**63 - 1),
                       max_size=12), st.text("abcdef", min_size=1, max_size=64), st.integers(0, 2**32 - 1))
def test_registry_reads_agree_with_numba(names, probe, seed):
    words = _registry(np.random.default_rng(seed), names)
    for name in [*names, probe]:
        expected = seqlock.find(words, _name_words(name))
        assert binding.registry_find(words, _name_words(name)) == (int(expected[0]), int(expected[1]))
    ours = np.zeros((layout.CAPACITY, 1 + layout.NAME_WORDS), np.uint64)
    theirs = np.zeros_like(ours)
    assert binding.registry_snapshot(words, ours) is True and seqlock.snapshot(words, theirs)
    same_bits(ours, theirs)


def test_registry_busy_slot_and_write():
    rng = np.random.default_rng(1)
    words = _registry(rng, {"a": 5}, busy=[7])
    assert binding.registry_find(words, _name_words("zz")) == (-2, 0)  # slot 7 busy before any match
    assert binding.registry_snapshot(words, np.zeros((layout.CAPACITY, 9), np.uint64)) is False
    ours, theirs = words.copy(), words.copy()
    binding.registry_write_slot(ours, 7, 9, _name_words("b"))  # a writer that died left it odd: even after
    seqlock.write_slot(theirs, 7, 9, _name_words("b"))
    same_bits(ours, theirs)
    assert binding.registry_find(ours, _name_words("b"))[1] == 9
    with pytest.raises(ValueError, match="slot"):
        binding.registry_write_slot(ours, layout.CAPACITY, 1, _name_words("c"))
    with pytest.raises(ValueError, match="smaller than a registry"):
        binding.registry_find(words[:-1], _name_words("a"))


def test_segment_state_word():
    words = np.zeros(64, np.uint32)
    binding.segment_store_state(words, 2)
    assert words[STATE_WORD] == 2 and words.sum() == 2
    assert binding.segment_load_state(words) == seqlock.load_state(words) == 2
    assert binding.segment_load_state(np.frombuffer(words.tobytes(), np.uint32)) == 2  # read-only mappings


def test_serving_never_imports_numba():
    """What a server runs (the app, the kernels' warm-up, a table published and read) loads no numba:
    about a second of every start (docs/startup.md)."""
    code = ("import sys, tempfile, pathlib\n"
            "import posenc.http.app\n"
            "from posenc.http.runtime.warmup import warm_kernels\n"
            "from posenc.shm import TableStore, attach\n"
            "from posenc.tables import TableSpec\n"
            "import posenc\n"
            "warm_kernels()\n"
            "root = pathlib.Path(tempfile.mkdtemp())\n"
            "with TableStore(root) as store:\n"
            "    store.publish('t', TableSpec(posenc.SinusoidalSpec(8), 0, 64))\n"
            "    with attach('t', root=root) as table:\n"
            "        assert table.lookup([3]).shape == (1, 8)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # and without the native core the same work runs on numba's kernels and seqlocks
    fallback = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "POSENC_NATIVE": "0"}).stdout
    assert "'numba'" in fallback

