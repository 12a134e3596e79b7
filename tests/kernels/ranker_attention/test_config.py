import re

import pytest

from kerneltune.kernels.ranker_attention.cap import CapParams
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, infeasibility
from kerneltune.kernels.ranker_attention.kernel import build_forward


@pytest.mark.parametrize(("field", "value"), [("block_q", 96), ("block_kv", 96), ("num_stages", 1),
                                              ("num_stages", 5), ("sm_scale", 0.0), ("exp2_fma_eighths", 9),
                                              ("exp2_fma_eighths", -1)])
def test_config_rejects_bad_fields(field, value):
    with pytest.raises(ValueError, match=field):
        KernelConfig(**{field: value})


@pytest.mark.parametrize(("fields", "match"), [
    (dict(cap_impl="tanh_fast"), "cap_impl: 'tanh_fast' is not one of exact, tanh_instr"),
    (dict(cap_impl="tanh_instr", cap_method="softsign", cap_params=CapParams(20.0)), "evaluates a tanh cap"),
    (dict(cap_impl="tanh_instr"), "evaluates a tanh cap; cap_method is 'none'"),
    (dict(cap_impl="tanh_instr", cap_method="tanh", cap_params=CapParams(30.0), fast_math=False), "needs fast_math"),
    (dict(exp2_fma_eighths=3, fast_math=False), "exp2_fma_eighths: .* needs fast_math"),
    (dict(pv_in_flight=True, p_in_registers=False), "pv_in_flight: needs p_in_registers"),
])
def test_cap_impl_is_refused_where_it_cannot_hold(fields, match):
    with pytest.raises(ValueError, match=match):
        KernelConfig(**fields)


@pytest.mark.parametrize("method", ["tanh", "tanh_approx"])
def test_either_name_of_tanh_takes_either_implementation(method):
    for impl, fast_math in (("exact", False), ("exact", True), ("tanh_instr", True)):
        config = KernelConfig(cap_impl=impl, fast_math=fast_math, cap_method=method, cap_params=CapParams(30.0))
        assert config.tile()["cap_impl"] == impl


def test_problem_validation():
    with pytest.raises(ValueError, match="head_dim"):
        Problem(batch=1, seq_len=128, q_heads=1, kv_heads=1, head_dim=96)
    with pytest.raises(ValueError, match="q_heads"):
        Problem(batch=1, seq_len=128, q_heads=3, kv_heads=2, head_dim=64)
    with pytest.raises(ValueError, match="cap"):
        Problem(batch=1, seq_len=128, q_heads=1, kv_heads=1, head_dim=64, cap_method="tanh")


def test_infeasibility_names_the_rule():
    p = Problem(batch=1, seq_len=384, q_heads=1, kv_heads=1, head_dim=256)
    assert "2 * block_q" in infeasibility(KernelConfig(block_q=128, block_kv=64), p)
    p = Problem(batch=1, seq_len=384, q_heads=1, kv_heads=1, head_dim=64)  # 3 tiles of 128 rows, 1.5 K/V blocks
    assert "not a multiple of block_kv = 256" in infeasibility(KernelConfig(block_q=64, block_kv=256), p)
    p = Problem(batch=1, seq_len=512, q_heads=1, kv_heads=1, head_dim=256)
    assert "shared memory" in infeasibility(KernelConfig(block_q=64, block_kv=128), p)
    p = Problem(batch=1, seq_len=512, q_heads=1, kv_heads=1, head_dim=128)
    assert "registers" in infeasibility(KernelConfig(block_q=128, block_kv=128), p)
    assert infeasibility(KernelConfig(block_q=64, block_kv=128), p) is None
    # The persistent grid's second Q/O buffer does not fit at D=256 (run F: the API refused it on the H200).
    p = Problem(batch=1, seq_len=512, q_heads=1, kv_heads=1, head_dim=256)
    assert infeasibility(KernelConfig(block_q=64, block_kv=64), p) is None
    assert "shared memory" in infeasibility(KernelConfig(block_q=64, block_kv=64, persistent=True), p)


def test_bucket_rounds_sizes_up():
    p = Problem(batch=6, seq_len=3000, q_heads=8, kv_heads=2, head_dim=128, cap_method="tanh", cap=30.0)
    assert p.bucket() == {"head_dim": 128, "dtype": "bfloat16", "cap_method": "tanh", "group": 4,
                          "seq_len": 4096, "batch_heads": 64}


def test_static_max_needs_a_small_bounding_cap():
    def problem(method, cap):
        return Problem(batch=1, seq_len=512, q_heads=1, kv_heads=1, head_dim=128, cap_method=method, cap=cap)

    for method, cap in (("tanh", 30.0), ("clamp", 44.0)):
        assert infeasibility(KernelConfig.for_problem(problem(method, cap), static_max=True), problem(method, cap)) \
            is None
    for method, cap in (("none", None), ("clamp", 50.0), ("softsign", 44.5)):
        config = KernelConfig.for_problem(problem(method, cap), static_max=True)
        why = infeasibility(config, problem(method, cap))
        assert re.match(r"static_max: needs a bounding cap of at most 44\.36", why)
        with pytest.raises(ValueError, match="static_max"):  # it would compile and overflow: never built
            build_forward(problem(method, cap), config)

