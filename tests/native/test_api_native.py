"""The public API on the native kernels: same results as on numba (both within the oracle
tolerance), small jobs stay on numba, threaded row splits agree."""

import numpy as np
import pytest

import posenc
from posenc import native, reference
from posenc.kernels import set_threads, threads
from conftest import assert_matches_oracle

pytestmark = pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")


class Recorder:
    """Stands in for native.ACTIVE and notes which kernels the API called."""

    def __init__(self, kernels):
        self.kernels, self.calls = kernels, []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.kernels, name)


def api_calls(positions, spec, x):
    rope_cos, _ = posenc.rope_cos_sin(positions, spec)
    return {
        "interleaved": posenc.sinusoidal(positions, 130),
        "halves": posenc.sinusoidal(positions, 77, layout="halves", dtype="float64"),
        "t2t": posenc.sinusoidal(positions, 33, layout="t2t", dtype="bfloat16"),
        "rope_cos": rope_cos,
        "rope_apply": posenc.rope_apply(x, positions, spec),
        "rope_apply_gptj": posenc.rope_apply(x, positions, spec, layout="interleaved"),
        "alibi": posenc.alibi_bias(8, 40, 300, q_offset=260),
    }


@pytest.mark.parametrize("isa", native.ISAS)
def test_same_results_on_every_native_path_and_on_numba(monkeypatch, isa):
    kernels = native.kernels_for(isa)
    if kernels is None:
        pytest.skip(f"this CPU cannot run the {isa} path (detected: {native.cpu_features()})")
    rng = np.random.default_rng(2)
    positions = np.concatenate([np.arange(200.0), rng.uniform(0, 2.0**24, 100)])
    spec = posenc.RopeSpec(64, partial_rotary_factor=0.5, scaling={"rope_type": "yarn", "factor": 4.0},
                           original_max_position_embeddings=4096)
    x = rng.standard_normal((2, 300, 64)).astype(np.float32)
    monkeypatch.setattr(native, "ACTIVE", kernels)
    fast = api_calls(positions, spec, x)
    monkeypatch.setattr(native, "ACTIVE", None)
    slow = api_calls(positions, spec, x)
    np.testing.assert_array_equal(fast.pop("alibi"), slow["alibi"])  # -inf included
    for name, value in fast.items():
        assert value.dtype == slow[name].dtype and value.shape == slow[name].shape, name
        amplitude = 2 * float(np.abs(x).max()) if name.startswith("rope_apply") else 1.0
        assert_matches_oracle(value, slow[name], value.dtype, amplitude=amplitude, angle_max=2.0**24)
    assert_matches_oracle(fast["interleaved"], reference.sinusoidal(positions, 130), "float32")


def test_small_jobs_run_on_numba_large_ones_natively(monkeypatch):
    recorder = Recorder(native.ACTIVE)
    monkeypatch.setattr(native, "ACTIVE", recorder)
    posenc.sinusoidal([0, 1, 2], 8)
    posenc.alibi_bias(2, 4)
    assert recorder.calls == []
    posenc.sinusoidal(np.arange(64), 64)  # 4096 elements
    posenc.rope_apply(np.ones((4, 64, 128), np.float32), np.arange(64), posenc.RopeSpec(128))
    posenc.alibi_bias(4, 32, 32)
    assert set(recorder.calls) == {"sincos_rows", "rope_rotate_rows", "alibi_bias_rows"}


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
