"""The work counts and the history-row mask the bench's figures rest on."""

import numpy as np

from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import flops_of_pairs, on_history_rows, useful_flops


def test_flops_count_two_matmuls_of_2d_per_pair_and_query_head():
    problem = Problem(batch=2, seq_len=8, q_heads=4, kv_heads=2, head_dim=64)
    assert flops_of_pairs(problem, 10) == 4 * 64 * 4 * 10
    # One row: history [1, 3) (2 keys, seen by 2 history + 2 candidate queries), candidates [3, 5)
    # each adding its own key: 4 * 2 + 2 = 10 pairs.
    assert useful_flops(problem, np.array([[1, 3, 3, 5]])) == flops_of_pairs(problem, 10)


def test_only_each_rows_history_survives():
    x = np.arange(2 * 6, dtype=np.float32).reshape(2, 6, 1, 1) + 1
    bounds = np.array([[1, 3, 3, 5], [0, 0, 0, 2]])
    kept = on_history_rows(x, bounds)
    np.testing.assert_array_equal(kept[0, :, 0, 0], [0, 2, 3, 0, 0, 0])
    np.testing.assert_array_equal(kept[1, :, 0, 0], 0)
    assert kept.shape == x.shape
