"""Segment bounds: which concrete bounds are refused."""

import itertools

import numpy as np

from kerneltune.kernels.ranker_attention.bounds import check_bounds


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
