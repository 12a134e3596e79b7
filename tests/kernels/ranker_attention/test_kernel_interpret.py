"""The Mosaic GPU kernel on the CPU (interpret mode) against the float64 oracle, outputs poisoned."""

import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.cap import CapMethod
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import ADVERSARIAL_CASES, adversarial_bounds
from kerneltune.kernels.ranker_attention.verify import check_interpret

T = 256
CAPS = {CapMethod.NONE: None, CapMethod.TANH: 30.0, CapMethod.TANH_APPROX: 30.0, CapMethod.SOFTSIGN: 8.0,
        CapMethod.CLAMP: 3.0}


def run_and_compare(problem, tiles, bounds, seed):
    return check_interpret(problem, KernelConfig.for_problem(problem, **tiles), bounds, seed)


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CAPS))
def test_every_cap_method_on_every_adversarial_case(method):
    bounds = adversarial_bounds(T, np.random.default_rng(1))
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=2, kv_heads=1, head_dim=64, cap_method=method,
                      cap=CAPS[method])
    c = run_and_compare(problem, dict(block_q=64, block_kv=64, num_stages=2, p_in_registers=False), bounds, 3)
    assert c.ok, c.errors


@pytest.mark.slow
@pytest.mark.parametrize("tiles", [
    dict(block_q=64, block_kv=128, num_stages=3, mask_interior=False, schedule_barrier=True),
    dict(block_q=64, block_kv=64, num_stages=2, mask_interior=True, schedule_barrier=False),
    dict(block_q=64, block_kv=128, num_stages=2, persistent=True),
])
def test_gqa_f16_tiles_and_mask_variants(tiles):
    rng = np.random.default_rng(2)
    bounds = adversarial_bounds(T, rng, ["mid_block_gap", "candidates_before_history", "lone_candidate",
                                         "straddle_edge"])
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=4, kv_heads=2, head_dim=64, dtype="float16",
                      cap_method="softsign", cap=8.0)
    c = run_and_compare(problem, {**tiles, "p_in_registers": False}, bounds, 4)
    assert c.ok, c.errors


def test_adversarial_cases_are_what_they_say():
    b = dict(zip(ADVERSARIAL_CASES, adversarial_bounds(T, np.random.default_rng(0)).tolist(), strict=True))
    assert b["touching_full"][1] == b["touching_full"][2]
    assert b["candidates_before_history"][3] <= b["candidates_before_history"][0]
    assert b["empty_history"][0] == b["empty_history"][1]
    assert b["empty_candidates"][2] == b["empty_candidates"][3]
    assert b["straddle_edge"][0] % 64 != 0 and b["straddle_edge"][1] // 64 != b["straddle_edge"][0] // 64
    assert b["all_padding"] == [0, 0, 0, 0]
