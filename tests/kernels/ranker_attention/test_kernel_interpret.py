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


pytestmark = pytest.mark.usefixtures("fast_interpret")  # conftest.py


def run_and_compare(problem, tiles, bounds, seed):
    return check_interpret(problem, KernelConfig.for_problem(problem, **tiles), bounds, seed)


@pytest.mark.slow
# tanh_approx is the tanh function under a looser error budget (run P): the kernel evaluates both alike,
# so its case would run the tanh case's kernel again. test_cap checks its function, test_accuracy its budget.
@pytest.mark.parametrize("method", [m for m in CAPS if m is not CapMethod.TANH_APPROX])
def test_every_cap_method_on_every_adversarial_case(method):
    bounds = adversarial_bounds(T, np.random.default_rng(1))
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=2, kv_heads=1, head_dim=64, cap_method=method,
                      cap=CAPS[method])
    # The persistent kernel every shipped entry runs (the space allows static_max on it alone); interpret mode
    # walks its 3 CTAs over all the tiles, 0.6x the time of a CTA per tile (test_gqa_f16_tiles_... has those).
    tiles = dict(block_q=64, block_kv=64, num_stages=2, p_in_registers=False, persistent=True,
                 static_max=method.needs_cap)
    c = run_and_compare(problem, tiles, bounds, 3)
    assert c.ok, c.errors


@pytest.mark.slow
@pytest.mark.parametrize("tiles", [
    dict(block_q=64, block_kv=128, num_stages=3, mask_interior=False, schedule_barrier=True),
    dict(block_q=64, block_kv=64, num_stages=2, mask_interior=True, schedule_barrier=False),
    dict(block_q=64, block_kv=128, num_stages=2, persistent=True, exp2_fma_eighths=3),
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
    # Tiles whose first or second 64-row warpgroup holds only padding while the other computes (the padding
    # warpgroup follows the K/V ring without computing): lone_candidate has both kinds.
    _, hu, cl, cu = b["lone_candidate"]
    assert hu <= 64 and cl >= 128 + 64 and cu - cl == 1


@pytest.mark.slow
@pytest.mark.parametrize(("cap", "static_max", "eighths", "cap_impl"),
                         [(44.0, True, 4, "exact"), (44.0, True, 4, "tanh_instr"), (60.0, False, 0, "exact")])
def test_saturated_logits_with_and_without_the_running_max(cap, static_max, eighths, cap_impl):
    """Every logit of row 0 sits at -cap (p = 2^-63.5 each without a running max), row 1's at both
    ends: both must match the oracle, without the running max (44, near the limit; half of the exp2
    on the FMA pipe; with the tanh instruction, the cap's outer multiply inside that exp2 and masked
    logits at 2**-126) and with it (60)."""
    import jax.numpy as jnp

    from kerneltune.kernels.ranker_attention.kernel import build_forward
    from kerneltune.kernels.ranker_attention.reference import reference_f64
    from kerneltune.kernels.ranker_attention.verify import compare

    problem = Problem(batch=2, seq_len=T, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=cap,
                      sm_scale=8.0)
    rng = np.random.default_rng(5)
    q = np.abs(rng.standard_normal((2, T, 2, 64), dtype=np.float32))
    k = rng.standard_normal((2, T, 1, 64), dtype=np.float32)
    k[0] = -np.abs(k[0])
    v = rng.standard_normal((2, T, 1, 64), dtype=np.float32)
    bounds = np.array([[0, 150, 150, 200], [10, 100, 120, 256]], np.int32)
    qj, kj, vj = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    config = KernelConfig.for_problem(problem, block_q=64, block_kv=64, num_stages=2, p_in_registers=False,
                                      persistent=True, static_max=static_max, exp2_fma_eighths=eighths,
                                      cap_impl=cap_impl)
    out, lse = build_forward(problem, config, interpret=True, poisoned=True)(
        qj, kj, vj, jnp.asarray(bounds), jnp.full(qj.shape, jnp.nan, qj.dtype),
        jnp.full((2, 2, T), jnp.nan, jnp.float32))
    f = [np.asarray(x.astype(jnp.float32)) for x in (qj, kj, vj)]
    ro, rl = reference_f64(*f, bounds, sm_scale=8.0, cap_method="tanh", cap=cap)
    assert np.all(rl[0, :, :150] < -cap + 6)  # row 0's history rows: every logit saturated low
    c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), ro, rl, bounds, "bfloat16", "tanh")
    assert c.ok, c.errors


@pytest.mark.slow
def test_padding_tiles_in_runs_and_at_the_end_of_the_grid():
    """The persistent kernel's CTAs walk padding tiles in runs (whole rows of padding, both heads), one right after
    a computed tile, and as the grid's last tiles: every padding row must come back 0 with an LSE of -inf through
    the NaN poison (run AD: it fails when ``store_empty_rows`` runs for a row's first tile only, and on the
    attempt-17 branch when the memory warpgroup drops half of a padding tile or its LSE)."""
    bounds = np.array([[0, 100, 100, 120], [0, 0, 0, 0], [0, 0, 0, 0], [7, 8, 8, 40], [0, 0, 0, 0]], np.int32)
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=2, kv_heads=1, head_dim=64, cap_method="none")
    tiles = dict(block_q=64, block_kv=128, num_stages=2, p_in_registers=False, persistent=True)
    c = run_and_compare(problem, tiles, bounds, 6)
    assert c.ok, c.errors


@pytest.mark.slow
def test_scale_in_exp2_on_every_adversarial_case_at_a_high_scale():
    """Without a cap the row max is taken on the raw logits and the scale goes into the exp2 argument. A scale of 4
    puts scaled logits past 128 in log2 units: a max left unscaled then overflows the exp2 (a stabiliser otherwise
    cancels in out and the LSE alike), and a scale left out of the argument moves the LSE."""
    bounds = adversarial_bounds(T, np.random.default_rng(4))
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=2, kv_heads=1, head_dim=64, sm_scale=4.0)
    tiles = dict(block_q=64, block_kv=128, num_stages=2, p_in_registers=False, persistent=True, scale_in_exp2=True)
    c = run_and_compare(problem, tiles, bounds, 5)
    assert c.ok, c.errors


@pytest.mark.slow
def test_lazy_rescale_on_every_adversarial_case_at_a_high_scale():
    """A row keeps its running max while a block's logits stay within 8 (log2 units) above it. At a scale of 4 rows
    see both: jumps past 8, which must rescale O and l (kept, the exp2 overflows), and smaller ones, which must not
    move the max that P and the LSE are taken against."""
    bounds = adversarial_bounds(T, np.random.default_rng(7))
    problem = Problem(batch=len(bounds), seq_len=T, q_heads=2, kv_heads=1, head_dim=64, sm_scale=4.0)
    tiles = dict(block_q=64, block_kv=64, num_stages=2, p_in_registers=False, persistent=True, scale_in_exp2=True,
                 lazy_rescale=True)
    c = run_and_compare(problem, tiles, bounds, 8)
    assert c.ok, c.errors
