"""ALiBi: slopes per reference (order and rounding included), bias blocks, quantisation."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import reference
from conftest import DTYPES, assert_matches_oracle


@pytest.mark.parametrize("n", list(range(1, 130)))
def test_paper_slopes_match_the_papers_code(n):
    """Closed form 2^(-8h/p) vs the paper's running products (which accumulate ~1e-15 of rounding)."""
    np.testing.assert_allclose(posenc.alibi_slopes(n), reference.alibi.paper_slopes(n), rtol=2e-14)


def test_non_power_of_two_order_golden():
    """n=12: the first 8 heads are 2^(-h), the 4 extras 2^(-(2k-1)/2) are appended after (not sorted)."""
    expected = [2.0 ** -h for h in range(1, 9)] + [2.0 ** -((2 * k - 1) / 2) for k in range(1, 5)]
    np.testing.assert_allclose(posenc.alibi_slopes(12), expected, rtol=1e-15)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32, 64, 128])
def test_powers_of_two_are_geometric(n):
    m = posenc.alibi_slopes(n)
    np.testing.assert_allclose(m[1:] / m[:-1], m[0], rtol=1e-14)
    assert m[0] == pytest.approx(2.0 ** (-8.0 / n))


@pytest.mark.parametrize("variant", ["mpt", "falcon"])
def test_mpt_and_falcon_equal_the_model_code(variant, goldens):
    for n, values in goldens["alibi"][variant].items():
        np.testing.assert_array_equal(posenc.alibi_slopes(int(n), variant=variant), values, err_msg=f"n={n}")


def test_bloom_within_one_float32_ulp_of_torch(goldens):
    """torch's vectorised powf is not correctly rounded; we return the correctly rounded float32
    pow, so a few heads differ from BLOOM by one float32 ulp (never more)."""
    for n, values in goldens["alibi"]["bloom"].items():
        ours = posenc.alibi_slopes(int(n), variant="bloom").astype(np.float32).view(np.int32).astype(np.int64)
        theirs = np.array(values, dtype=np.float32).view(np.int32).astype(np.int64)
        assert np.abs(ours - theirs).max() <= 1, n
    for n in (1, 2, 8):
        np.testing.assert_array_equal(posenc.alibi_slopes(n, variant="bloom"), goldens["alibi"]["bloom"][str(n)])


def test_bloom_differs_from_paper_golden():
    """docs/formulas.md: at n=16 BLOOM's second slope is 0.4999999702, the paper's is 0.5."""
    bloom = posenc.alibi_slopes(16, variant="bloom")
    assert bloom[1] == pytest.approx(0.4999999702, abs=1e-10)
    assert posenc.alibi_slopes(16)[1] == 0.5
    for n in (12, 16, 24, 32, 64):
        assert not np.array_equal(bloom if n == 16 else posenc.alibi_slopes(n, variant="bloom"),
                                  np.float32(posenc.alibi_slopes(n)).astype(np.float64))
    for n in (1, 2, 8):
        np.testing.assert_array_equal(posenc.alibi_slopes(n, variant="bloom"),
                                      np.float32(posenc.alibi_slopes(n)).astype(np.float64))


def test_mpt_uses_next_power_and_bias_max():
    np.testing.assert_allclose(posenc.alibi_slopes(12, variant="mpt"), np.float32(posenc.alibi_slopes(12)), rtol=1e-7)
    m = posenc.alibi_slopes(4, variant="mpt", alibi_bias_max=16)
    np.testing.assert_allclose(m, [2.0 ** -4, 2.0 ** -8, 2.0 ** -12, 2.0 ** -16], rtol=1e-7)


@pytest.mark.parametrize("mode", ["causal", "symmetric", "bloom"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_matches_oracle(mode, dtype):
    out = posenc.alibi_bias(12, 70, 90, q_offset=20, k_offset=5, mode=mode, dtype=dtype)
    expected = reference.alibi_bias(reference.alibi_slopes(12), np.arange(20, 90), np.arange(5, 95), mode)
    finite = np.isfinite(expected)
    assert (np.isneginf(out.astype(np.float64)) == ~finite).all()
    assert_matches_oracle(np.where(finite, out.astype(np.float64), 0), np.where(finite, expected, 0), dtype,
                          amplitude=float(np.abs(expected[finite]).max()))


@given(q_len=st.integers(1, 40), k_len=st.integers(1, 40), q_off=st.integers(0, 10**6), k_off=st.integers(0, 10**6))
def test_a_block_equals_the_slice_of_the_whole(q_len, k_len, q_off, k_off):
    """Offsets give exactly the block of the (never materialised) full matrix."""
    block = posenc.alibi_bias(4, q_len, k_len, q_offset=q_off, k_offset=k_off, mode="symmetric", dtype="float64")
    i = np.arange(q_off, q_off + q_len)[:, None]
    j = np.arange(k_off, k_off + k_len)[None, :]
    np.testing.assert_array_equal(block, -posenc.alibi_slopes(4)[:, None, None] * np.abs(i - j))


def test_bloom_mode_same_softmax_as_causal():
    causal = posenc.alibi_bias(8, 16, mode="causal", dtype="float64")
    bloom = posenc.alibi_bias(8, 16, mode="bloom", dtype="float64")
    mask = np.isfinite(causal)
    shifted = np.where(mask, bloom, -np.inf)

    def softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    np.testing.assert_allclose(softmax(shifted), softmax(causal), rtol=1e-12)


def test_gamma_scales_slopes():
    base = posenc.alibi_bias(4, 8, mode="symmetric", dtype="float64")
    np.testing.assert_allclose(posenc.alibi_bias(4, 8, mode="symmetric", gamma=0.5, dtype="float64"), base * 0.5)
    per_head = np.array([1.0, 2.0, 0.0, 3.0])
    np.testing.assert_allclose(posenc.alibi_bias(4, 8, mode="symmetric", gamma=per_head, dtype="float64"),
                               base * per_head[:, None, None])


@pytest.mark.parametrize("variant", ["paper", "bloom", "mpt", "falcon"])
@pytest.mark.parametrize("n", [1, 5, 8, 12, 32, 100])
def test_uint8_quantisation_error_bound(variant, n):
    q = posenc.alibi_slopes_uint8(n, variant=variant)
    assert q.codes.dtype == np.uint8
    exact = posenc.alibi_slopes(n, variant=variant)
    rel = np.abs(q.dequantize() / exact - 1)
    assert rel.max() <= q.max_relative_error + 1e-12
    assert q.max_relative_error == pytest.approx(2 ** (8 / 510) - 1)  # 1.09 % for exponents up to 8
    assert q.max_relative_error < 0.011


def test_rope_alibi_combined():
    spec = posenc.RopeAlibiSpec(posenc.RopeSpec(32), n_heads=6)
    pos = np.arange(10)
    both = posenc.rope_alibi(pos, spec)
    cos, sin = posenc.rope_cos_sin(pos, spec.rope)
    np.testing.assert_array_equal(both.cos, cos)
    np.testing.assert_array_equal(both.sin, sin)
    np.testing.assert_array_equal(both.bias, posenc.alibi_bias(6, 10))
    assert math.isinf(both.bias[0, 0, 1])
