"""The default space's feasible configs lower for CUDA (Mosaic GPU layouts, SMEM) on the CPU, and every
config the static check rejects for SMEM is one Mosaic GPU rejects too."""

import functools
import re

import pytest
from jax.experimental.mosaic.gpu import core as mosaic_core

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, smem_bytes
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.kernels.ranker_attention.program import canonical_text, lower_for_cuda, program_digest
from kerneltune.tuning.space import load_space

from ...pairwise import pairwise_cover
from ...paths import SPACES


@functools.cache
def lowered_text(problem, config):
    """``lower_for_cuda``'s module text, once per (problem, config): the instruction tests below share configs."""
    return lower_for_cuda(problem, config).as_text()


@pytest.mark.slow
def test_default_space_lowers_for_cuda():
    """A pairwise cover of the feasible configs of D=64, 128 and 256 lowers (every two fields' values that a
    feasible config holds, the head dim one of the fields: 18 of the 96), and so does each head dim's config of
    the most SMEM; the static check's line is Mosaic GPU's: each head dim's config of the least SMEM the check
    rejects is one Mosaic GPU rejects too (test_smem_model_is_mosaic_gpus_figure checks the figures themselves).
    The suite's budget: lowering every feasible and every rejected config of the three took 166 s of a 2-core
    machine's 8 minutes, their covers and every rejected SMEM size 46 s."""
    space = load_space(SPACES / "ranker_attention.toml", set(PLUGIN.tunables), set(PLUGIN.problem_fields))
    problems = {d: Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=d, cap_method="tanh", cap=30.0)
                for d in (64, 128, 256)}
    feasible, rejected = [], []  # (head dim, SMEM bytes, tiles)
    for d, problem in problems.items():
        for tiles in space.configs(PLUGIN.problem_dict(problem)):
            # The same layouts and SMEM as their exact, SFU-only twins: test_cap_impl_lowers_to_its_instructions
            # and test_exp2_fma_eighths_lowers_to_the_fma_cubic lower them.
            if tiles["cap_impl"] != "exact" or tiles["exp2_fma_eighths"]:
                continue
            why = PLUGIN.infeasibility(problem, tiles)
            smem = smem_bytes(KernelConfig.for_problem(problem, **tiles), d)
            if why is None:
                feasible.append((d, smem, tiles))
            elif "shared memory" in why:
                rejected.append((d, smem, tiles))
    lowered = [(d, t) for d, _, t in pairwise_cover(feasible, lambda item: {**item[2], "head_dim": item[0]})]
    for d in problems:  # each head dim's config of the most SMEM, where the cover has not taken it
        _, _, tiles = max((x for x in feasible if x[0] == d), key=lambda x: x[1])
        if (d, tiles) not in lowered:
            lowered.append((d, tiles))
    least_rejected = {d: min((x for x in rejected if x[0] == d), key=lambda x: x[1])[2]
                      for d in {x[0] for x in rejected}}
    for d, tiles in lowered:
        lower_for_cuda(problems[d], KernelConfig.for_problem(problems[d], **tiles))
    for d, tiles in least_rejected.items():
        with pytest.raises(ValueError, match="exceeds available shared memory"):
            lower_for_cuda(problems[d], KernelConfig.for_problem(problems[d], **tiles))
    assert len(lowered) >= 18 and least_rejected.keys() == {128, 256}, lowered  # at D=64 every config fits


# Each head dim's tiles with the persistent grid or without, and the stages and staged P that add buffers.
SMEM_CASES = [(d, dict(block_q=q, block_kv=64 if d == 256 else 128, persistent=p))
              for d in (64, 128, 256) for q in (64, 128) for p in (False, True)] + [
    (256, dict(block_q=64, block_kv=64, num_stages=3, p_in_registers=False)),
    (256, dict(block_q=64, block_kv=128, num_stages=2)),
    (128, dict(block_q=64, block_kv=128, num_stages=4, persistent=True)),
]


@pytest.mark.parametrize(("head_dim", "tiles"), SMEM_CASES)
def test_smem_model_is_mosaic_gpus_figure(monkeypatch, head_dim, tiles):
    """``smem_bytes`` equals what Mosaic GPU allocates: lowered under a 1-byte bound (Mosaic GPU's private
    ``_SMEM_SIZE_BOUND``, jax 0.11.2), its refusal names its figure. The static check prunes the space with the
    model: a buffer the model missed would let configs through that fail to compile, one it invents would prune
    configs that fit."""
    monkeypatch.setattr(mosaic_core, "_SMEM_SIZE_BOUND", 1)
    problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=head_dim, cap_method="tanh", cap=30.0)
    config = KernelConfig.for_problem(problem, **tiles)
    with pytest.raises(ValueError, match="exceeds available shared memory") as refusal:
        lower_for_cuda(problem, config)
    assert int(re.search(r"smem_bytes=(\d+)", str(refusal.value)).group(1)) == smem_bytes(config, head_dim)


@pytest.mark.slow
@pytest.mark.parametrize("head_dim", [64, 128])
def test_cap_impl_lowers_to_its_instructions(head_dim):
    """The exact tanh is ex2 and rsqrt (no tanh op); the tanh instruction is a tanh op (no rsqrt): were
    the field ignored, both would lower alike and the tuner would time one kernel twice (run O)."""
    problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=head_dim, cap_method="tanh", cap=30.0)
    ops = {}
    for impl in ("exact", "tanh_instr"):
        config = KernelConfig.for_problem(problem, persistent=True, static_max=True, cap_impl=impl)
        text = lowered_text(problem, config)
        ops[impl] = (text.count("tanh"), text.count("rsqrt"))
    assert ops["exact"][0] == 0 and ops["exact"][1] > 0, ops
    assert ops["tanh_instr"][0] > 0 and ops["tanh_instr"][1] == 0, ops


@pytest.mark.slow
def test_exp2_fma_eighths_lowers_to_the_fma_cubic():
    """A share of the exp2 on the FMA pipe is the cubic's ``math.fma`` in the Mosaic GPU module (with the tanh
    instruction nothing else lowers to it): were the field dropped on the GPU path, the tuner would time the
    SFU-only kernel under another name."""
    problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=30.0)
    fmas = {}
    for eighths in (0, 3, 4):
        config = KernelConfig.for_problem(problem, persistent=True, static_max=True, cap_impl="tanh_instr",
                                          exp2_fma_eighths=eighths)
        fmas[eighths] = lowered_text(problem, config).count("math.fma")
    assert fmas[0] == 0 and fmas[3] > 0 and fmas[4] > 0, fmas


@pytest.mark.slow
def test_the_tanh_instruction_hands_the_caps_outer_multiply_to_the_exp2():
    """Under static max with the tanh instruction, the FMA pipe's share of the exp2 takes the cap's outer
    multiply into its rounding and needs no clamp (``arith.maximumf``); the exact tanh keeps both."""
    problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=30.0)
    texts = {impl: lowered_text(problem, KernelConfig.for_problem(problem, persistent=True, static_max=True,
                                                                  cap_impl=impl, exp2_fma_eighths=4))
             for impl in ("exact", "tanh_instr")}
    assert "arith.maximumf" in texts["exact"] and "arith.maximumf" not in texts["tanh_instr"]


@pytest.mark.slow
def test_scale_in_exp2_changes_the_kernel_without_a_cap_and_no_other():
    """The field is the no-cap kernel's: dropped on that path, the tuner would time one program under two names;
    taken under a cap, entries measured without it would launch another program than they describe."""
    digests = {}
    for method, cap in (("none", None), ("tanh", 30.0)):
        problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=64, cap_method=method, cap=cap)
        tiles = dict(persistent=True, static_max=cap is not None)
        digests[method] = {flag: program_digest(problem, {**tiles, "scale_in_exp2": flag}, 132)
                           for flag in (False, True)}
    assert digests["none"][False] != digests["none"][True], digests
    assert digests["tanh"][False] == digests["tanh"][True], digests


@pytest.mark.slow
def test_lazy_rescale_branches_on_the_kernels_with_a_running_max_and_no_other():
    """The rescale of O skipped by a branch per row (``scf.if``) where the kernel keeps a running max, with or
    without a cap; under static_max there is none, and the field must leave that program as it was."""
    texts = {}
    for method, cap, static in (("none", None, False), ("clamp", 20.0, False), ("tanh", 30.0, True)):
        problem = Problem(batch=2, seq_len=512, q_heads=2, kv_heads=1, head_dim=64, cap_method=method, cap=cap)
        texts[method] = {flag: canonical_text(lowered_text(problem, KernelConfig.for_problem(
            problem, persistent=True, static_max=static, lazy_rescale=flag))) for flag in (False, True)}
    for method in ("none", "clamp"):
        assert texts[method][True].count("scf.if") > texts[method][False].count("scf.if"), method
    assert texts["tanh"][False] == texts["tanh"][True]
