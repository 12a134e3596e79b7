"""Segment bounds: which concrete bounds are refused."""

import itertools

import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.bounds import SegmentBounds, check_bounds


def test_bounds_overlap_in_every_arrangement():
    """Every history and candidate range on T = 6 (empty ones included): check_bounds refuses exactly the
    pairs of non-empty ranges that share a position, whichever starts first."""
    t = 6
    ranges = [(lo, hi) for lo in range(t + 1) for hi in range(lo, t + 1)]
    for (hl, hu), (cl, cu) in itertools.product(ranges, ranges):
        shared = set(range(hl, hu)) & set(range(cl, cu))
        try:
            check_bounds(np.array([[hl, hu, cl, cu]]), t)
            refused = False
        except ValueError as e:
            assert "overlap" in str(e)
            refused = True
        assert refused == bool(shared), (hl, hu, cl, cu)


@pytest.mark.parametrize(("bounds", "message"), [
    (np.zeros(4, np.int32), r"bounds: expected shape \[B, 4\], got \[4\]"),
    (np.zeros((2, 3), np.int32), r"bounds: expected shape \[B, 4\], got \[2, 3\]"),
    ([[0, 10, 10, 20], [0, 10, 30, 20]],
     r"^bounds\[1\] = \[0, 10, 30, 20\]: candidate_lower must be <= candidate_upper$"),
    ([[0, 10, 10, 20], [11, 10, 10, 20]],
     r"^bounds\[1\] = \[11, 10, 10, 20\]: history_lower must be <= history_upper$"),
    ([[0, 10, 10, 65]], r"^bounds\[0\] = \[0, 10, 10, 65\]: candidate_upper must be in \[0, T=64\]$"),
    ([[-1, 10, 10, 20]], r"^bounds\[0\] = \[-1, 10, 10, 20\]: history_lower must be in \[0, T=64\]$"),
])
def test_each_broken_rule_is_named_with_its_row(bounds, message):
    with pytest.raises(ValueError, match=message):
        check_bounds(np.asarray(bounds), 64)


def test_segment_membership_is_half_open():
    seg = SegmentBounds(2, 5, 5, 7)
    ids = np.arange(9)
    assert seg.query_in_history(ids).tolist() == [i in (2, 3, 4) for i in range(9)]
    assert seg.query_in_candidates(ids).tolist() == [i in (5, 6) for i in range(9)]
