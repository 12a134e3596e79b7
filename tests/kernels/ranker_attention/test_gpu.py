"""On a Hopper GPU: the register-P kernel through the public API against the float32 reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kerneltune.kernels.ranker_attention import KernelConfig, ranker_attention
from kerneltune.kernels.ranker_attention.cap import CapParams
from kerneltune.kernels.ranker_attention.inputs import adversarial_bounds, random_bounds
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare


@pytest.mark.gpu
# Not persistent at D=256: its second Q/O buffer does not fit SMEM (test_config checks the refusal).
@pytest.mark.parametrize(("head_dim", "persistent"), [(64, False), (128, False), (256, False), (64, True),
                                                      (128, True)])
@pytest.mark.parametrize("cap_method", ["none", "tanh", "tanh_approx", "softsign", "clamp"])
def test_register_p_kernel_matches_reference(head_dim, cap_method, persistent):
    check_against_reference(head_dim, cap_method, persistent=persistent)


@pytest.mark.gpu
@pytest.mark.parametrize(("head_dim", "persistent"), [(64, True), (128, True), (128, False)])
@pytest.mark.parametrize("cap_method", ["tanh", "tanh_approx", "softsign", "clamp"])
def test_softmax_without_running_max_matches_reference(head_dim, cap_method, persistent):
    check_against_reference(head_dim, cap_method, persistent=persistent, static_max=True)


def check_against_reference(head_dim, cap_method, q_scale=1.0, **fields):
    rng = np.random.default_rng(head_dim)
    b, t, hq, hkv = 10, 512, 4, 2
    cap = None if cap_method == "none" else 20.0
    keys = jax.random.split(jax.random.key(head_dim), 3)
    q = q_scale * jax.random.normal(keys[0], (b, t, hq, head_dim), jnp.bfloat16)
    k = jax.random.normal(keys[1], (b, t, hkv, head_dim), jnp.bfloat16)
    v = jax.random.normal(keys[2], (b, t, hkv, head_dim), jnp.bfloat16)
    # The cap is the config's too: a tanh_instr config without a tanh cap_method is refused.
    config = KernelConfig(block_q=64, block_kv=64 if head_dim == 256 else 128, num_stages=2, p_in_registers=True,
                          cap_method=cap_method, cap_params=CapParams(cap), **fields)
    for bounds in (random_bounds(b, t, rng), adversarial_bounds(t, rng)):
        out, lse = ranker_attention(q, k, v, jnp.asarray(bounds), cap_method=cap_method, cap=cap, config=config,
                                    return_lse=True)
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(*(x.astype(jnp.float32) for x in (q, k, v)), jnp.asarray(bounds),
                                   sm_scale=head_dim ** -0.5, cap_method=cap_method, cap=cap)
        c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), np.asarray(ro), np.asarray(rl), bounds,
                    "bfloat16", cap_method)
        assert c.ok, c.errors


@pytest.mark.gpu
@pytest.mark.parametrize("q_scale", [1.0, 6.0])
@pytest.mark.parametrize(("head_dim", "cap_method"), [(64, "none"), (128, "none"), (128, "clamp")])
def test_lazy_rescale_matches_reference(head_dim, cap_method, q_scale):
    """At unit scale a row's max jumps past the threshold only from its first block (O is zero then); Q scaled by
    6 makes later jumps too, where a rescale the branch skips wrongly moves out and the LSE."""
    check_against_reference(head_dim, cap_method, q_scale=q_scale, persistent=True, lazy_rescale=True,
                            scale_in_exp2=cap_method == "none")


@pytest.mark.gpu
@pytest.mark.parametrize("static_max", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_tanh_instruction_matches_reference(head_dim, static_max):
    check_against_reference(head_dim, "tanh_approx", persistent=True, static_max=static_max, cap_impl="tanh_instr")


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_accuracy_contract_tells_the_tanh_instruction_from_the_exact_tanh(head_dim):
    """Run P: on the same inputs, the tanh instruction's LSE error is about 10x the no-cap kernel's and
    the exact tanh's under 1x; both keep out at its level. The check's ratios must show it, or the
    budget could never refuse anything."""
    from kerneltune.kernels.ranker_attention.accuracy import ErrorBudget, budget_refusal, ratios
    from kerneltune.kernels.ranker_attention.config import Problem
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN

    problem = Problem(batch=10, seq_len=512, q_heads=4, kv_heads=2, head_dim=head_dim, cap_method="tanh", cap=30.0)
    for impl, lse_ok in (("exact", True), ("tanh_instr", False)):
        tiles = {**PLUGIN.config_defaults, "persistent": True, "cap_impl": impl}
        inputs = PLUGIN.make_inputs(problem, {"history": [256, 384], "candidates": 64}, seed=3)
        result = PLUGIN.check(PLUGIN.build(problem, tiles), problem, inputs)
        item = {"config": tiles, "accuracy": dict(result.accuracy)}
        assert result.error is None, result.error
        assert budget_refusal(item, ErrorBudget(lse=None)) is None, ratios(result.accuracy)
        assert (budget_refusal(item, ErrorBudget()) is None) == lse_ok, ratios(result.accuracy)


@pytest.mark.gpu
def test_a_build_compiled_in_another_process_runs_bit_identically_and_passes_the_check(tmp_path):
    """What a compile worker hands the timing worker (``export_build``) runs as the build made here does."""
    import subprocess
    import sys

    from kerneltune.kernels.ranker_attention.config import Problem
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN

    problem = Problem(batch=6, seq_len=512, q_heads=4, kv_heads=2, head_dim=128)  # no cap: no twin to build
    tiles = {"block_q": 64, "block_kv": 128, "num_stages": 2, "persistent": True}
    path = tmp_path / "build.bin"
    code = ("import sys, pathlib; from kerneltune.kernels.ranker_attention.plugin import PLUGIN as P; "
            f"p = P.problem({PLUGIN.problem_dict(problem)!r}); "
            f"pathlib.Path(sys.argv[1]).write_bytes(P.export_build(P.build(p, {tiles!r})))")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=300)
    here, there = PLUGIN.build(problem, tiles), PLUGIN.import_build(path.read_bytes())
    inputs = PLUGIN.make_inputs(problem, {}, 3)
    _, args = PLUGIN.timed_call(here, inputs)
    for a, b in zip(here["poisoned"](*args), there["poisoned"](*args), strict=True):
        assert np.array_equal(np.asarray(a.astype(jnp.float32)), np.asarray(b.astype(jnp.float32)), equal_nan=True)
    assert PLUGIN.check(there, problem, inputs).error is None


@pytest.mark.gpu
@pytest.mark.parametrize("persistent", [True, False])
def test_the_timed_call_launches_the_plain_entrys_kernels_and_writes_its_outputs(persistent):
    """A sweep compiles one entry point a candidate and times the checked one on NaN buffers: its call must
    launch what the runtime's plain entry launches (XLA's copy of the buffers is a device copy, which CUPTI
    does not time) and write the same outputs."""
    from jax.experimental.mosaic.gpu import profiler

    from kerneltune.kernels.ranker_attention.config import Problem
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN, _compiled

    problem = Problem(batch=6, seq_len=512, q_heads=4, kv_heads=2, head_dim=128)
    tiles = {"block_q": 64, "block_kv": 128, "num_stages": 2, "persistent": persistent}
    inputs = PLUGIN.make_inputs(problem, {}, 3)
    fn, args = PLUGIN.timed_call(PLUGIN.build(problem, tiles), inputs)
    plain = _compiled(problem, KernelConfig.for_problem(problem, **tiles), poisoned=False)
    timed_out, timed_kernels = profiler.measure(fn, aggregate=False)(*args)
    plain_out, plain_kernels = profiler.measure(plain, aggregate=False)(*args[:4])
    assert len(timed_kernels) == len(plain_kernels)
    assert not any("copy" in name.lower() for name, _ in timed_kernels)
    for a, b in zip(timed_out, plain_out, strict=True):
        assert np.array_equal(np.asarray(a.astype(jnp.float32)), np.asarray(b.astype(jnp.float32)))
