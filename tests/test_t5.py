"""T5 relative position buckets: the docs/formulas.md table and transformers' own values."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import reference


def test_bucket_table_golden():
    """docs/formulas.md, 32 buckets / max distance 128, bidirectional, keys before the query (rel < 0)."""
    table = {8: 8, 11: 8, 12: 9, 15: 9, 16: 10, 22: 10, 23: 11, 31: 11, 32: 12, 45: 12, 46: 13, 63: 13, 64: 14,
             90: 14, 91: 15, 10**6: 15}
    rel = -np.array(list(table))
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(rel), list(table.values()))
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(-rel), np.array(list(table.values())) + 16)
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(np.arange(-7, 1)), [7, 6, 5, 4, 3, 2, 1, 0])


def test_causal_sends_future_keys_to_zero():
    out = posenc.t5_relative_position_bucket(np.array([5, 1, 0, -1, -20]), bidirectional=False)
    np.testing.assert_array_equal(out, [0, 0, 0, 1, reference.t5_relative_position_bucket(-20, False)])


def test_equals_transformers(goldens):
    lo, hi = goldens["t5"]["relative_positions"]
    rel = np.arange(lo, hi + 1)
    for key, expected in goldens["t5"]["buckets"].items():
        bidirectional, nb, md = key.split("_")
        ours = posenc.t5_relative_position_bucket(rel, bidirectional=bidirectional == "True", num_buckets=int(nb),
                                                  max_distance=int(md))
        np.testing.assert_array_equal(ours, expected, err_msg=key)


@given(st.lists(st.integers(-10**9, 10**9), min_size=1, max_size=50), st.booleans(),
       st.integers(4, 128), st.integers(1, 4096))
def test_kernel_matches_oracle(rel, bidirectional, num_buckets, extra):
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    md = exact + extra
    rel = np.array(rel)
    np.testing.assert_array_equal(
        posenc.t5_relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=md),
        reference.t5_relative_position_bucket(rel, bidirectional, num_buckets, md))


def test_shape_is_kept():
    rel = np.arange(12).reshape(3, 4) - 6
    assert posenc.t5_relative_position_bucket(rel).shape == (3, 4)
    with pytest.raises(ValueError, match="relative_position"):
        posenc.t5_relative_position_bucket(np.array([0.5]))
