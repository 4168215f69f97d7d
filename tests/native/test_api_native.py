"""The public API on the native kernels: same results on every path as on numba (within the
oracle tolerance, sin/cos bit for bit), every job on the binding, threaded row splits agree."""

import os
import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc import native, reference
from posenc.kernels.parallel import set_threads, threads
from conftest import assert_matches_oracle

pytestmark = pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")


#: The API calls compared across paths, run in a fresh process per path (the path is chosen when
#: the library loads: POSENC_ISA; POSENC_NATIVE=0 for numba), saved as an .npz.
API_CALLS = """
import sys
import numpy as np
import posenc
from posenc.kernels import active

rng = np.random.default_rng(2)
positions = np.concatenate([np.arange(200.0), rng.uniform(0, 2.0**24, 100)])
spec = posenc.RopeSpec(64, partial_rotary_factor=0.5, scaling={"rope_type": "yarn", "factor": 4.0},
                       original_max_position_embeddings=4096)
x = rng.standard_normal((2, 300, 64)).astype(np.float32)
rope_cos, _ = posenc.rope_cos_sin(positions, spec)
np.savez(sys.argv[1], path=np.array(active.NAME), x=x, positions=positions,
         interleaved=posenc.sinusoidal(positions, 130),
         halves=posenc.sinusoidal(positions, 77, layout="halves", dtype="float64"),
         t2t=posenc.sinusoidal(positions, 33, layout="t2t", dtype="bfloat16").view(np.uint16),
         small=posenc.sinusoidal([0, 1, 2], 8), rope_cos=rope_cos,
         rope_apply=posenc.rope_apply(x, positions, spec),
         rope_apply_gptj=posenc.rope_apply(x, positions, spec, layout="interleaved"),
         alibi=posenc.alibi_bias(8, 40, 300, q_offset=260), alibi_small=posenc.alibi_bias(2, 4),
         t5=posenc.t5_relative_position_bucket(np.arange(-500, 500)))
"""


def api_results(tmp_path, **env) -> dict:
    out = tmp_path / f"{'-'.join(env.values())}.npz"
    subprocess.run([sys.executable, "-c", API_CALLS, str(out)], env={**os.environ, **env}, check=True)
    with np.load(out) as saved:
        return {name: saved[name] for name in saved.files}


@pytest.fixture(scope="module")
def numba_results(tmp_path_factory) -> dict:
    results = api_results(tmp_path_factory.mktemp("numba"), POSENC_NATIVE="0")
    assert str(results.pop("path")) == "numba"
    return results


@pytest.mark.parametrize("isa", native.ISAS)
def test_same_results_on_every_native_path_and_on_numba(tmp_path, numba_results, isa):
    """Through the public API: each path and numba give the same values (sin/cos bit for bit:
    batch invariance; the rotations within the oracle's tolerance), small jobs included, which
    run natively too."""
    if native.kernels_for(isa) is None:
        pytest.skip(f"this CPU cannot run the {isa} path (detected: {native.cpu_features()})")
    slow = numba_results
    fast = api_results(tmp_path, POSENC_ISA=isa)
    assert str(fast.pop("path")) == isa
    for name in ("interleaved", "halves", "t2t", "small", "rope_cos", "alibi", "alibi_small", "t5"):
        np.testing.assert_array_equal(fast[name], slow[name], err_msg=name)  # -inf included
    amplitude = 2 * float(np.abs(fast["x"]).max())
    for name in ("rope_apply", "rope_apply_gptj"):
        assert_matches_oracle(fast[name], slow[name], fast[name].dtype, amplitude=amplitude,
                              angle_max=2.0**24)
    assert_matches_oracle(fast["interleaved"], reference.sinusoidal(fast["positions"], 130), "float32")


def test_every_job_runs_the_native_binding():
    """No size below which numba runs: the API modules call the binding's functions."""
    if native.BINDING is None:
        pytest.skip(f"no native binding: {native.STATUS}")
    from posenc.api import _tables, alibi, rope, t5

    assert _tables.sincos_rows is native.BINDING.sincos_rows
    assert alibi.alibi_bias_rows is native.BINDING.alibi_bias_rows
    assert rope.rope_rotate_rows is native.BINDING.rope_rotate_rows
    assert rope.xpos_decay_rows is native.BINDING.xpos_decay_rows
    assert t5.t5_buckets is native.BINDING.t5_buckets


def test_threaded_row_splits_match_one_thread():
    positions = np.arange(20000.0)
    previous = threads()
    try:
        set_threads(1)
        single = posenc.sinusoidal(positions, 64, layout="halves")
        set_threads(3)
        split = posenc.sinusoidal(positions, 64, layout="halves")
    finally:
        set_threads(previous)
    assert_matches_oracle(split, single.astype(np.float64), "float32")


@pytest.mark.parametrize("n_threads", [1, 3])
def test_new_arrays_written_in_calls_give_the_streamed_bits(n_threads):
    """A new array over FRESH_CALL_BYTES is written in several ordinary-store calls, a buffer in one
    streamed call: the same bits, row by row (batch invariance), for every layout kind."""
    from posenc.api._tables import FRESH_CALL_BYTES, fill_cos_sin_pair
    from posenc.api.rope import rope_table
    from posenc.api.sinusoidal import sinusoidal_table
    from posenc.encodings import SinusoidalSpec

    positions = np.concatenate([np.arange(20000.0), [0.5, 1e7 + 0.25, -3.0]])
    previous = threads()
    try:
        set_threads(n_threads)
        for layout in ("interleaved", "halves"):
            spec = SinusoidalSpec(130, layout=layout)
            fresh = sinusoidal_table(positions, spec, np.dtype(np.float32))
            assert fresh.nbytes > 2 * FRESH_CALL_BYTES
            into = np.full_like(fresh, np.nan)
            sinusoidal_table(positions, spec, np.dtype(np.float32), out=into)
            assert fresh.tobytes() == into.tobytes(), layout
        rope = posenc.RopeSpec(128, base=500000.0)
        cos, sin = fill_cos_sin_pair(positions, rope.inv_freq()[0], 1.0, np.float32)  # new: in calls
        table = np.full((positions.shape[0], 128), np.nan, np.float32)
        rope_table(positions, rope, out=table)  # [cos | sin] rows into a buffer: one streamed call
        assert cos.tobytes() == table[:, :64].tobytes() and sin.tobytes() == table[:, 64:].tobytes()
        small = posenc.rope_cos_sin(positions[:3], rope)  # a job far under the threshold
        assert small[0].tobytes() == cos[:3].tobytes()
    finally:
        set_threads(previous)
