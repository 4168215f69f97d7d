"""M-RoPE (Qwen2-VL / Qwen2.5-VL): [3, n] positions, frequencies split by mrope_section."""

import numpy as np
import pytest

import posenc
from posenc import reference
from conftest import DTYPES, assert_matches_oracle

QWEN2_VL = posenc.RopeSpec(128, base=1e6, mrope_section=[16, 24, 24])


def grid_positions(n_text=5, t=2, h=3, w=4):
    """Text tokens, then a t x h x w vision grid starting after them (get_rope_index's shape)."""
    text = np.tile(np.arange(n_text), (3, 1))
    tt, hh, ww = np.meshgrid(np.arange(t), np.arange(h), np.arange(w), indexing="ij")
    grid = np.stack([tt.ravel(), hh.ravel(), ww.ravel()]) + n_text
    return np.concatenate([text, grid], axis=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec", [QWEN2_VL, posenc.RopeSpec(20, mrope_section=[0, 6, 1, 3]),
                                  posenc.RopeSpec(64, partial_rotary_factor=0.5, mrope_section=[4, 4, 8],
                                                  scaling={"rope_type": "linear", "factor": 2.0})], ids=repr)
def test_cos_sin_match_the_oracle(spec, dtype):
    rng = np.random.default_rng(0)
    pos = np.concatenate([grid_positions(), rng.integers(0, 2**20, (3, 50))], axis=1)
    inv, attention = posenc.rope_inv_freq(spec)
    cos, sin = posenc.rope_cos_sin(pos, spec, dtype=dtype)
    ref_cos, ref_sin = reference.mrope_cos_sin(pos, inv, spec.mrope_section, attention)
    assert cos.shape == (pos.shape[1], spec.n_freq) and cos.flags.c_contiguous
    assert_matches_oracle(cos, ref_cos, dtype, amplitude=attention, angle_max=2.0**20)
    assert_matches_oracle(sin, ref_sin, dtype, amplitude=attention, angle_max=2.0**20)


def test_sections_take_their_axis():
    """Frequency chunk k reads axis k % 3: moving only the width axis changes only width columns."""
    pos = grid_positions()
    moved = pos.copy()
    moved[2] += 7
    cos, _ = posenc.rope_cos_sin(pos, QWEN2_VL, dtype="float64")
    cos_moved, _ = posenc.rope_cos_sin(moved, QWEN2_VL, dtype="float64")
    np.testing.assert_array_equal(cos[:, :40], cos_moved[:, :40])
    assert (cos[:, 40:] != cos_moved[:, 40:]).any()


def test_text_positions_equal_plain_rope():
    """1-D positions (or three equal rows) are text tokens: exactly the plain spec's values."""
    plain = posenc.RopeSpec(128, base=1e6)
    pos = np.arange(300)
    expected = posenc.rope_cos_sin(pos, plain, dtype="float64")
    for given in (pos, np.tile(pos, (3, 1))):
        for ours, theirs in zip(posenc.rope_cos_sin(given, QWEN2_VL, dtype="float64"), expected):
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_apply_rotates_with_the_recomposed_angles(layout):
    rng = np.random.default_rng(3)
    pos = grid_positions()
    x = rng.standard_normal((2, pos.shape[1], 128))
    out = posenc.rope_apply(x, pos, QWEN2_VL, layout=layout)
    inv, _ = posenc.rope_inv_freq(QWEN2_VL)
    expected = reference.rope_apply(x, *reference.mrope_cos_sin(pos, inv, QWEN2_VL.mrope_section), layout=layout)
    assert_matches_oracle(out, expected, "float64", amplitude=float(np.abs(expected).max()), angle_max=64.0)


def test_scores_depend_on_the_offset_per_axis():
    """q.k after M-RoPE depends only on the (t, h, w) offsets: shifting all three axes of both keeps it."""
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, 1, 128))
    a, b = np.array([[3], [5], [9]]), np.array([[1], [8], [2]])
    shift = np.array([[100], [-2], [40]])

    def score(pq, pk):
        return float(posenc.rope_apply(q, pq, QWEN2_VL)[0] @ posenc.rope_apply(k, pk, QWEN2_VL)[0])

    assert score(a, b) == pytest.approx(score(a + shift, b + shift), abs=1e-9)
    assert score(a, b) != pytest.approx(score(a, b + np.array([[0], [0], [1]])), abs=1e-6)


def test_length_dependent_scaling_uses_the_largest_position():
    spec = posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=64,
                           mrope_section=[8, 12, 12])
    pos = np.array([[0, 1, 2], [0, 1, 500], [0, 1, 2]])
    inv, attention = posenc.rope_inv_freq(spec, seq_len=501)
    ref_cos, _ = reference.mrope_cos_sin(pos, inv, spec.mrope_section, attention)
    cos, _ = posenc.rope_cos_sin(pos, spec, dtype="float64")
    assert_matches_oracle(cos, ref_cos, "float64", angle_max=500.0)


def test_fractional_positions_give_seq_len_max_plus_one_literally():
    """docs/protocol.md, M-RoPE: seq_len = max over the 3n positions + 1, not rounded (100.5 -> 101.5),
    in the library and in the binary client's per-chunk frequencies alike."""
    from posenc.client.inline import mrope_auxes

    spec = posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=64,
                           mrope_section=[8, 12, 12])
    pos = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 100.5], [0.0, 1.0, 2.0]])
    cos, sin = posenc.rope_cos_sin(pos, spec, dtype="float64")
    literal, _ = posenc.rope_cos_sin(pos, spec, dtype="float64", seq_len=101.5)
    np.testing.assert_array_equal(cos, literal)
    for rounded in (101.0, 102.0):
        assert not np.array_equal(cos, posenc.rope_cos_sin(pos, spec, dtype="float64", seq_len=rounded)[0])
    assert mrope_auxes(spec, pos) == mrope_auxes(spec, pos, seq_len=101.5) != mrope_auxes(spec, pos, seq_len=102.0)


def test_spec_identity_and_the_keyword_only_section():
    """mrope_section is a spec keyword; inside a HF scaling dict (or as rope_type "mrope") it is refused,
    so a model whose config uses the key with another meaning (Qwen3-VL interleaves) cannot slip through."""
    assert posenc.RopeSpec.from_dict(QWEN2_VL.to_dict()) == QWEN2_VL
    for scaling, field in (({"rope_type": "default", "mrope_section": [16, 24, 24]}, "scaling.mrope_section"),
                           ({"type": "mrope"}, "scaling.type")):
        with pytest.raises(posenc.PosencError) as info:
            posenc.RopeSpec(128, base=1e6, scaling=scaling)
        assert info.value.field == field
    assert "mrope_section" not in posenc.RopeSpec(128).to_dict()  # plain specs hash as before
    assert QWEN2_VL.hash != posenc.RopeSpec(128, base=1e6).hash
    assert QWEN2_VL.mrope_chunks == ((0, 16, 0), (16, 40, 1), (40, 64, 2))


@pytest.mark.parametrize("section, message", [
    ([16, 24, 23], "add up"), ([16, 24, 25], "add up"), ([16, -8, 56], ">= 0"), ([16.5, 24, 23.5], "integer"),
    ([True, 24, 39], "integer"), ("16,24,24", "list"), (16, "list"), ({"a": 1}, "list"), ([], "entries"),
    ([[16], 24, 24], "integer"), ([None, 32, 32], "integer"), ([1] * 65, "entries"),
])
def test_bad_sections_name_the_field(section, message):
    with pytest.raises(posenc.PosencError, match=message) as info:
        posenc.RopeSpec(128, mrope_section=section)
    assert info.value.field == "mrope_section"


def test_mrope_with_xpos_is_refused():
    with pytest.raises(posenc.PosencError) as info:
        posenc.RopeSpec(128, mrope_section=[16, 24, 24], xpos_scale_base=512)
    assert info.value.field == "mrope_section"


@pytest.mark.parametrize("positions, spec, message", [
    (np.zeros((3, 4)), posenc.RopeSpec(128), "mrope_section"),
    (np.zeros((2, 4)), QWEN2_VL, r"\[3, n\]"),
    (np.zeros((3, 4, 1)), QWEN2_VL, "1-D"),
    ([[0, 1, 2, 3], [0], [0, 1]], QWEN2_VL, "1-D"),
    ([[0, 1, 2, 3], [0, float("nan"), 2, 3], [0, 1, 2, 3]], QWEN2_VL, "finite"),
    ([["a", "b", "c", "d"], [0, 1, 2, 3], [0, 1, 2, 3]], QWEN2_VL, "numbers"),
])
def test_bad_positions_name_the_field(positions, spec, message):
    for call in (lambda: posenc.rope_cos_sin(positions, spec),
                 lambda: posenc.rope_apply(np.zeros((4, spec.head_dim)), positions, spec)):
        with pytest.raises(posenc.PosencError, match=message) as info:
            call()
        assert info.value.field == "positions"


def test_apply_checks_the_row_count():
    with pytest.raises(posenc.PosencError, match="rows") as info:
        posenc.rope_apply(np.zeros((5, 128)), np.zeros((3, 4)), QWEN2_VL)
    assert info.value.field == "positions"
