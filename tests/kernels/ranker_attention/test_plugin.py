"""The engine's check of a ranker candidate, run with the interpret-mode kernel on the CPU:
it passes the right kernel and fails one compiled for another cap."""

import pytest

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.plugin import PLUGIN

TILES = dict(block_q=64, block_kv=64, num_stages=2, p_in_registers=False)


@pytest.mark.slow
def test_check_passes_the_right_kernel_and_fails_a_wrong_one():
    problem = Problem(batch=3, seq_len=256, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    inputs = PLUGIN.make_inputs(problem, {"history": [100, 180], "candidates": 40, "timing_seed": 1}, seed=2)
    right = {"poisoned": build_forward(problem, KernelConfig.for_problem(problem, **TILES), interpret=True,
                                       poisoned=True)}
    ok = PLUGIN.check(right, problem, inputs)
    assert ok.error is None and ok.rel_error < 1e-2
    other = Problem(batch=3, seq_len=256, q_heads=2, kv_heads=1, head_dim=64, cap_method="clamp", cap=1.0)
    wrong = {"poisoned": build_forward(other, KernelConfig.for_problem(other, **TILES), interpret=True,
                                       poisoned=True)}
    assert PLUGIN.check(wrong, problem, inputs).error is not None
