"""RoPE cos/sin and rotation: oracle agreement and the algebraic properties RoPE promises."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import reference
from conftest import DTYPES, assert_matches_oracle

SPECS = [
    posenc.RopeSpec(64),
    posenc.RopeSpec(96, partial_rotary_factor=0.25),
    posenc.RopeSpec(10, partial_rotary_factor=0.5),  # odd rotary dim 5
    posenc.RopeSpec(128, base=5e5, scaling={"rope_type": "yarn", "factor": 4.0}, max_position_embeddings=8192),
    posenc.RopeSpec(128, scaling={"rope_type": "proportional"}, partial_rotary_factor=0.5),
]


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
def test_cos_sin_match_oracle(spec, dtype):
    rng = np.random.default_rng(0)
    pos = np.concatenate([np.arange(3000), [2**24, 2**24 - 1], rng.uniform(0, 2**24, 300)])
    inv, attention = posenc.rope_inv_freq(spec)
    cos, sin = posenc.rope_cos_sin(pos, spec, dtype=dtype)
    ref_cos, ref_sin = reference.rope_cos_sin(pos, inv, attention)
    assert cos.flags.c_contiguous and sin.flags.c_contiguous
    assert_matches_oracle(cos, ref_cos, dtype, amplitude=attention, angle_max=2.0**24)
    assert_matches_oracle(sin, ref_sin, dtype, amplitude=attention, angle_max=2.0**24)


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_matches_oracle(spec, layout, dtype):
    rng = np.random.default_rng(1)
    pos = np.concatenate([np.arange(40), rng.uniform(0, 2**24, 24)])
    x = rng.standard_normal((2, 3, pos.size, spec.head_dim)).astype(posenc.dtypes.output_dtype(dtype))
    out = posenc.rope_apply(x, pos, spec, layout=layout)
    assert out.dtype == x.dtype and out.shape == x.shape
    inv, attention = posenc.rope_inv_freq(spec, seq_len=pos.max() + 1)
    expected = reference.rope_apply(x.astype(np.float64), *reference.rope_cos_sin(pos, inv, attention), layout=layout)
    assert_matches_oracle(out, expected, dtype, amplitude=float(np.abs(expected).max()), angle_max=2.0**24)


def test_hf_layout_comes_from_the_spec():
    gptj = posenc.RopeSpec(16, layout="interleaved")
    x = np.random.default_rng(2).standard_normal((5, 16))
    np.testing.assert_array_equal(posenc.rope_apply(x, np.arange(5), gptj),
                                  posenc.rope_apply(x, np.arange(5), gptj, layout="interleaved"))


vectors = st.integers(1, 16).map(lambda n: 2 * n).flatmap(
    lambda d: st.tuples(st.just(d), st.lists(st.floats(-4, 4), min_size=d, max_size=d),
                        st.lists(st.floats(-4, 4), min_size=d, max_size=d)))


@given(vectors, st.integers(0, 100000), st.integers(0, 100000), st.integers(-50000, 50000),
       st.sampled_from(["half", "interleaved"]))
def test_dot_product_depends_only_on_offset(qk, m, n, shift, layout):
    d, q, k = qk
    spec = posenc.RopeSpec(d)
    q, k = np.array([q]), np.array([k])

    def score(a, b):
        return float(posenc.rope_apply(q, [a], spec, layout=layout)[0] @ posenc.rope_apply(k, [b], spec, layout=layout)[0])

    m2, n2 = m + shift, n + shift
    if min(m2, n2) < 0:
        m2, n2 = m - shift, n - shift
    assert score(m, n) == pytest.approx(score(m2, n2), abs=1e-9 * (1 + np.abs(q).sum() * np.abs(k).sum()))


@given(vectors, st.floats(0, 2**24), st.sampled_from(["half", "interleaved"]))
def test_rotation_preserves_norm(qk, p, layout):
    d, q, _ = qk
    x = np.array([q])
    out = posenc.rope_apply(x, [p], posenc.RopeSpec(d), layout=layout)
    assert np.linalg.norm(out) == pytest.approx(np.linalg.norm(x), rel=1e-12, abs=1e-12)


@given(st.integers(1, 32), st.lists(st.floats(0, 1e6), min_size=1, max_size=8))
def test_half_and_interleaved_differ_by_a_fixed_permutation(half_dim, positions):
    d = 2 * half_dim
    perm = np.empty(d, dtype=int)  # half-layout index -> interleaved index
    perm[:half_dim] = 2 * np.arange(half_dim)
    perm[half_dim:] = 2 * np.arange(half_dim) + 1
    rng = np.random.default_rng(half_dim)
    x_half = rng.standard_normal((len(positions), d))
    x_inter = np.empty_like(x_half)
    x_inter[:, perm] = x_half
    spec = posenc.RopeSpec(d)
    out_half = posenc.rope_apply(x_half, positions, spec, layout="half")
    out_inter = posenc.rope_apply(x_inter, positions, spec, layout="interleaved")
    np.testing.assert_allclose(out_inter[:, perm], out_half, atol=1e-12)


def test_xpos_decays_with_distance_only():
    spec = posenc.RopeSpec(32, xpos_scale_base=512)
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((1, 32)), rng.standard_normal((1, 32))

    def score(m, n):
        return float(posenc.rope_apply(q, [m], spec, xpos_role="q")[0] @ posenc.rope_apply(k, [n], spec, xpos_role="k")[0])

    assert score(700, 600) == pytest.approx(score(200, 100), rel=1e-10)
    scale = posenc.xpos_scale([0, 512], spec)
    zeta = (np.arange(0, 32, 2) + 0.4 * 32) / (1.4 * 32)
    np.testing.assert_allclose(scale[0], 1.0)
    np.testing.assert_allclose(scale[1], zeta, rtol=1e-15)
    np.testing.assert_allclose(posenc.xpos_scale([7.0], spec), reference.xpos_scale([7.0], 16, 32, 512), rtol=1e-15)
    # q is multiplied by the decay, k divided: their product is scale^(m-n)
    plain = posenc.RopeSpec(32)
    q_rot = posenc.rope_apply(q, [900], plain)
    np.testing.assert_allclose(posenc.rope_apply(q, [900], spec, xpos_role="q"),
                               q_rot * np.concatenate([posenc.xpos_scale([900], spec)[0]] * 2), rtol=1e-12)


def test_rope_table_layout():
    spec = posenc.RopeSpec(64, base=5e5)
    table = posenc.api.rope.rope_table(np.arange(100), spec)
    cos, sin = posenc.rope_cos_sin(np.arange(100), spec)
    np.testing.assert_array_equal(table, np.concatenate([cos, sin], axis=1))
