"""Every bad parameter raises a ValueError (PosencError) whose message and .field name it."""

import os

import numpy as np
import pytest

import posenc
from posenc import PosencError

CASES = [
    # (callable, field)
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "banana"}), "scaling.rope_type"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "linear"}), "scaling.factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "llama3", "factor": 8, "low_freq_factor": 1}),
     "scaling.high_freq_factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                                          "high_freq_factor": 4}), "original_max_position_embeddings"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "longrope", "long_factor": [1.0] * 32}), "scaling.short_factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "longrope", "long_factor": [1.0] * 31,
                                          "short_factor": [1.0] * 32}, max_position_embeddings=10,
                             original_max_position_embeddings=5), "scaling.long_factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "linear", "factor": 0.5}), "scaling.factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 0.9},
                             max_position_embeddings=100), "scaling.factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 2}), "max_position_embeddings"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 0.5},
                             original_max_position_embeddings=10), "scaling.factor"),
    (lambda: posenc.RopeSpec(10, partial_rotary_factor=0.5, scaling={"rope_type": "yarn", "factor": 2},
                             original_max_position_embeddings=100), "head_dim"),  # odd rotary dim 5
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "linear", "factor": 2, "fcator": 3}), "scaling.fcator"),
    # found by tests/test_models_fuzz.py: each raised TypeError / OverflowError / ZeroDivisionError before
    (lambda: posenc.rope_inv_freq(posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 4, "beta_fast": 1e308},
                                                  original_max_position_embeddings=4096)), "scaling.beta_fast"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "longrope", "long_factor": [1.0] * 32,
                                          "short_factor": [1.0] * 32}, max_position_embeddings=10,
                             original_max_position_embeddings=1), "original_max_position_embeddings"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 4}, max_position_embeddings=2**63,
                             original_max_position_embeddings=10**400), "max_position_embeddings"),
    (lambda: posenc.RopeSpec(64, base=10**400), "base"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": "longrope", "long_factor": [10**400] * 32,
                                          "short_factor": [1.0] * 32}, original_max_position_embeddings=5,
                             max_position_embeddings=10), "scaling.long_factor"),
    (lambda: posenc.RopeSpec(64, scaling={"rope_type": ["linear"]}), "scaling.rope_type"),  # was a TypeError
    (lambda: posenc.RopeSpec(64, scaling={"type": {}}), "scaling.type"),
    (lambda: posenc.sinusoidal([1], True), "dim"),  # JSON true is not the integer 1
    (lambda: posenc.alibi_slopes(True), "n_heads"),
    (lambda: posenc.RopeSpec(0), "head_dim"),
    (lambda: posenc.RopeSpec(7), "head_dim"),  # odd full rotary
    (lambda: posenc.RopeSpec(64, base=1.0), "base"),
    (lambda: posenc.RopeSpec(64, partial_rotary_factor=0), "partial_rotary_factor"),
    (lambda: posenc.RopeSpec(64, partial_rotary_factor=1.5), "partial_rotary_factor"),
    (lambda: posenc.RopeSpec(64, layout="diagonal"), "layout"),
    (lambda: posenc.RopeSpec.from_hf_config({"model_type": "llama", "head_dim": 0}), "config.head_dim"),
    (lambda: posenc.RopeSpec.from_hf_config({"model_type": "unknown", "hidden_size": 64}), "config.model_type"),
    (lambda: posenc.RopeSpec.from_hf_config([1, 2]), "config"),
    (lambda: posenc.rope_inv_freq(posenc.RopeSpec(64), seq_len=-1), "seq_len"),
    (lambda: posenc.rope_cos_sin([1.0, np.nan], posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_cos_sin([1.0, np.inf], posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_cos_sin([[1, 2]], posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_cos_sin(["a"], posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_cos_sin(np.array([1], np.float16), posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_cos_sin([2**54], posenc.RopeSpec(64)), "positions"),  # beyond 2^53
    (lambda: posenc.rope_cos_sin([1], posenc.RopeSpec(64), dtype="int8"), "dtype"),
    (lambda: posenc.rope_cos_sin([1], "not a spec"), "spec"),
    (lambda: posenc.rope_apply(np.zeros((3, 32)), [0, 1, 2], posenc.RopeSpec(64)), "x"),
    (lambda: posenc.rope_apply(np.zeros((3, 64)), [0, 1], posenc.RopeSpec(64)), "positions"),
    (lambda: posenc.rope_apply(np.zeros((3, 64), np.int32), [0, 1, 2], posenc.RopeSpec(64)), "x"),
    (lambda: posenc.rope_apply(np.zeros((3, 64)), [0, 1, 2], posenc.RopeSpec(64), layout="x"), "layout"),
    (lambda: posenc.xpos_scale([1], posenc.RopeSpec(64)), "xpos_scale_base"),
    (lambda: posenc.sinusoidal([1], 0), "dim"),
    (lambda: posenc.sinusoidal([1], -3), "dim"),
    (lambda: posenc.sinusoidal([1], 2.5), "dim"),
    (lambda: posenc.sinusoidal([1], 8, layout="spiral"), "layout"),
    (lambda: posenc.sinusoidal([1], 8, base=0), "base"),
    (lambda: posenc.sinusoidal([1], 8, scale=[1.0] * 7), "scale"),
    (lambda: posenc.sinusoidal([1], 8, target_std=-1), "target_std"),
    (lambda: posenc.sinusoidal([1], 8, min_timescale=2.0), "min_timescale"),
    (lambda: posenc.sinusoidal([1], 8, layout="t2t", max_timescale=float("nan")), "max_timescale"),
    (lambda: posenc.alibi_slopes(0), "n_heads"),
    (lambda: posenc.alibi_slopes(8, variant="gpt"), "variant"),
    (lambda: posenc.alibi_slopes(8, alibi_bias_max=4), "alibi_bias_max"),
    (lambda: posenc.alibi_bias(8, 0), "q_len"),
    (lambda: posenc.alibi_bias(8, 4, mode="sideways"), "mode"),
    (lambda: posenc.alibi_bias(8, 4, gamma=[1.0, 2.0]), "gamma"),
    (lambda: posenc.alibi_bias(8, 4, q_offset=2**54), "q_offset"),
    (lambda: posenc.t5_relative_position_bucket([1], num_buckets=2), "num_buckets"),
    (lambda: posenc.t5_relative_position_bucket([1], max_distance=8), "max_distance"),
    (lambda: posenc.t5_relative_position_bucket([1], bidirectional="yes"), "bidirectional"),
]


@pytest.mark.parametrize("call,field", CASES, ids=[c[1] + f"-{i}" for i, c in enumerate(CASES)])
def test_bad_parameter_names_the_field(call, field):
    with pytest.raises(ValueError) as info:
        call()
    assert isinstance(info.value, PosencError)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")


def test_output_cap(monkeypatch):
    monkeypatch.setattr(posenc.LIMITS, "max_output_bytes", 1 << 20)
    with pytest.raises(posenc.OutputTooLarge, match="POSENC_MAX_OUTPUT_BYTES") as info:
        posenc.sinusoidal(np.arange(10_000), 128)
    assert info.value.field == "positions"
    with pytest.raises(posenc.OutputTooLarge) as info:
        posenc.alibi_bias(16, 1024, 1024)
    assert info.value.field == "q_len"
    posenc.sinusoidal(np.arange(2048), 128)  # exactly 1 MiB is allowed


def test_empty_positions_give_empty_tables():
    assert posenc.sinusoidal([], 16).shape == (0, 16)
    cos, sin = posenc.rope_cos_sin([], posenc.RopeSpec(16))
    assert cos.shape == sin.shape == (0, 8)


def test_huge_lengths_are_refused_before_allocating():
    with pytest.raises(posenc.OutputTooLarge):
        posenc.alibi_bias(1, 10**12, 1)


def test_a_lowered_limit_refuses_a_timestamp_saying_how_to_raise_it_and_then_works(monkeypatch):
    """Issue 26: 1.7e12 was refused by the 2**31 limit without saying how to raise it. The default
    now admits it (tests/test_position_limit.py); a lowered limit still says how to raise it, and
    nothing about accuracy beyond 2^24 (angles are exact)."""
    import subprocess
    import sys

    from posenc import reference
    from posenc.api.sinusoidal import shifted

    stamps = np.array([1_700_000_000_123, 1_700_000_000_124], dtype=np.int64)
    monkeypatch.setattr(posenc.LIMITS, "max_abs_position", 2**31)
    with pytest.raises(posenc.PosencError) as err:
        posenc.sinusoidal(stamps, 8)
    assert err.value.field == "positions"
    for words in ("element 0 is 1700000000123, beyond the limit |p| <= 2147483648", "POSENC_MAX_ABS_POSITION=N",
                  "posenc.LIMITS.max_abs_position = N", "2^53 = 9007199254740992"):
        assert words in str(err.value), str(err.value)
    assert "rad" not in str(err.value) and "2**24" not in str(err.value)
    with pytest.raises(posenc.PosencError, match="element 0 plus offset 2147483647 is 2147483649, beyond .*"
                                                 "POSENC_MAX_ABS_POSITION=N"):
        shifted(np.array([2.0]), 2**31 - 1)  # a spec's offset pushing a position past the limit
    monkeypatch.setattr(posenc.LIMITS, "max_abs_position", 2**41)  # what the message says to do
    rows = posenc.sinusoidal(stamps, 8, dtype="float64")
    np.testing.assert_allclose(rows, reference.sinusoidal(stamps.astype(np.float64), 8), atol=1e-4)
    proc = subprocess.run([sys.executable, "-c", "import posenc; posenc.LIMITS"], env={**os.environ, "POSENC_MAX_ABS_POSITION":
                          str(2**60)}, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "POSENC_MAX_ABS_POSITION: must be at most 9007199254740992" in proc.stderr
