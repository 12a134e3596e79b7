import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kerneltune.backends import cuda_jax
from kerneltune.files import logs
from kerneltune.kernels.ranker_attention import KernelConfig, api, ranker_attention
from kerneltune.kernels.ranker_attention.accuracy import ErrorBudget
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.reference import reference_f64
from kerneltune.seams.registry import load_kernel
from kerneltune.tables import lookup
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import table_path, update_table
from kerneltune.tuning.space import load_space

from ...paths import SPACES

B, T, HQ, HKV, D = 2, 128, 2, 1, 64


def args(**over):
    rng = np.random.default_rng(0)
    a = dict(q=jnp.asarray(rng.standard_normal((B, T, HQ, D)), jnp.bfloat16),
             k=jnp.asarray(rng.standard_normal((B, T, HKV, D)), jnp.bfloat16),
             v=jnp.asarray(rng.standard_normal((B, T, HKV, D)), jnp.bfloat16),
             bounds=jnp.asarray([[0, 50, 50, 70], [3, 90, 100, 128]], jnp.int32))
    a.update(over)
    return a


@pytest.mark.parametrize(("over", "match"), [
    (dict(q=jnp.zeros((B, T, HQ), jnp.bfloat16)), "q: expected rank 4"),
    (dict(q=jnp.zeros((B, T, HQ, D), jnp.float32)), "q: dtype"),
    (dict(k=jnp.zeros((B, T, HKV, D), jnp.float16)), "k: dtype"),
    (dict(q=jnp.zeros((B, T, 3, D), jnp.bfloat16), k=jnp.zeros((B, T, 2, D), jnp.bfloat16),
          v=jnp.zeros((B, T, 2, D), jnp.bfloat16)), "GQA"),
    (dict(q=jnp.zeros((B, T, HQ, 96), jnp.bfloat16), k=jnp.zeros((B, T, HKV, 96), jnp.bfloat16),
          v=jnp.zeros((B, T, HKV, 96), jnp.bfloat16)), "head_dim"),
    (dict(bounds=jnp.zeros((B, 3), jnp.int32)), "bounds: expected shape"),
    (dict(bounds=jnp.asarray([[0, 50, 50, 70], [3, 90, 80, 128]], jnp.int32)), "overlap"),
    (dict(bounds=jnp.asarray([[0, 50, 50, 170], [0, 0, 0, 0]], jnp.int32)), "candidate_upper"),
    (dict(bounds=jnp.asarray([[60, 50, 70, 80], [0, 0, 0, 0]], jnp.int32)), "history_lower must be <="),
])
def test_bad_input_names_the_argument(over, match):
    with pytest.raises(ValueError, match=match):
        ranker_attention(**args(**over), interpret=True)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="the GPU runs the kernel without interpret=True")
@pytest.mark.parametrize("jit", [False, True])
def test_a_cpu_call_without_interpret_names_interpret_and_the_gpu_it_needs(jit):
    call = jax.jit(ranker_attention) if jit else ranker_attention
    with pytest.raises(RuntimeError, match=r"NVIDIA Hopper GPU \(sm_90\).*backend here is cpu.*interpret=True") as e:
        call(**args())
    assert str(e.value).endswith("pass interpret=True to run it in Mosaic GPU's CPU interpreter (slow, for tests)")


def test_tile_that_does_not_divide_t():
    with pytest.raises(ValueError, match="config: seq_len 128 is not a multiple of 2 \\* block_q = 256"):
        ranker_attention(**args(), config=KernelConfig(block_q=128, block_kv=64), interpret=True)


@pytest.mark.slow
def test_launch_api_in_interpret_mode_returns_out_and_natural_lse():
    a = args()
    out, lse = ranker_attention(**a, cap_method="clamp", cap=4.0, return_lse=True, interpret=True)
    assert out.shape == (B, T, HQ, D) and lse.shape == (B, HQ, T) and lse.dtype == jnp.float32
    f = [np.asarray(a[n].astype(jnp.float32)) for n in ("q", "k", "v")]
    ro, rl = reference_f64(*f, np.asarray(a["bounds"]), sm_scale=D ** -0.5, cap_method="clamp", cap=4.0)
    np.testing.assert_allclose(np.asarray(out.astype(jnp.float32)), ro, atol=3e-2)
    fin = np.isfinite(rl)
    np.testing.assert_allclose(np.asarray(lse)[fin], rl[fin], atol=1e-3)


RUNNING = {"gpu": "NVIDIA H200", "sm_count": 132, "driver": "1", "cuda": "13.0", "jax": "0.11.2", "jaxlib": "0.11.2",
           "device_kind": "nvidia-h200", "matched": ["gpu", "sm_count", "driver", "cuda", "jax", "jaxlib"]}
TILES = dict(block_q=64, block_kv=128, num_stages=2, p_in_registers=True, schedule_barrier=True,
             mask_interior=False, persistent=False, cap_impl="exact", exp2_fma_eighths=0, scale_in_exp2=False,
             lazy_rescale=False)


def install_table(tmp_path, monkeypatch, entries):
    """A tuned table for the running (faked) H200 with these entries, stamped with this kernel."""
    monkeypatch.setattr(cuda_jax, "system_stamps", lambda: RUNNING)
    monkeypatch.setattr(lookup, "table_roots", lambda: (tmp_path,))
    logs._said.clear()
    stamps = {**{k: RUNNING[k] for k in RUNNING["matched"]}, "kernel_hash": api.kernel_source_hash()}
    update_table(table_path(tmp_path, "nvidia-h200", "ranker_attention"), "ranker_attention", "nvidia-h200",
                 lambda t: t["entries"].update({bucket_key(e["bucket"]): {**e, "stamps": stamps} for e in entries}))


def test_tuned_entry_the_problem_refuses_is_passed_over(tmp_path, monkeypatch, caplog):
    """run F: a call found the nearest entry tuned with a field its cap refuses (then fast_math=False for
    tanh_approx; now the tanh instruction for a softsign cap); the launch must take the next entry, say
    so, and not raise."""
    problem = Problem(batch=4, seq_len=8192, q_heads=16, kv_heads=16, head_dim=128, cap_method="softsign",
                      cap=30.0)
    install_table(tmp_path, monkeypatch, [
        {"bucket": {**problem.bucket(), "cap_method": "tanh"}, "config": {**TILES, "cap_impl": "tanh_instr"}},
        {"bucket": {**problem.bucket(), "cap_method": "clamp", "seq_len": 4096},
         "config": {**TILES, "fast_math": True, "persistent": True}},
    ])
    with caplog.at_level("WARNING", logger="kerneltune.tables"):
        chosen = api.choose_config(problem, None)
    assert chosen.persistent and chosen.cap_impl == "exact"
    assert "cap_method=tanh" in caplog.text and "'tanh_instr' evaluates a tanh cap" in caplog.text


def test_static_max_entry_serves_a_problem_it_refuses_through_its_measured_fallback(tmp_path, monkeypatch,
                                                                                   caplog):
    """run I: the bench's D=64 no-cap shape found only tanh entries, all tuned with static_max, and fell
    to the heuristic (0.71x the dense rate against 0.84x in run H); the entry's fallback serves."""
    problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="none")
    tuned = {**TILES, "fast_math": True, "num_stages": 3, "block_kv": 64, "persistent": True, "static_max": True}
    fallback = {**tuned, "num_stages": 2, "block_kv": 128, "static_max": False}
    install_table(tmp_path, monkeypatch, [{
        "bucket": {**problem.bucket(), "cap_method": "tanh"}, "config": tuned, "median_us": 246.1,
        "fallbacks": [{"config": fallback, "median_us": 268.5, "spread": 0.002}]}])
    with caplog.at_level("WARNING", logger="kerneltune.tables"):
        chosen = api.choose_config(problem, None)
    assert chosen.tile() == fallback
    assert "static_max: needs a bounding cap" in caplog.text and "268.5 µs against the winner's 246.1" in caplog.text
    above = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="tanh", cap=60.0)
    assert api.choose_config(above, None).tile() == fallback, "a tanh cap above 44.36 is refused too"
    within = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="tanh", cap=30.0)
    assert api.choose_config(within, None).tile() == tuned


@pytest.mark.parametrize("none_first", [True, False])
def test_tanh_approx_takes_the_tanh_entry_over_an_equally_near_no_cap_one(tmp_path, monkeypatch, none_first):
    problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="tanh_approx", cap=30.0)
    tanh = {"bucket": {**problem.bucket(), "cap_method": "tanh"}, "config": {**TILES, "static_max": True}}
    none = {"bucket": {**problem.bucket(), "cap_method": "none"}, "config": {**TILES, "block_kv": 64}}
    install_table(tmp_path, monkeypatch, [none, tanh] if none_first else [tanh, none])
    assert api.choose_config(problem, None).static_max


@pytest.mark.parametrize(("field", "value", "why"), [
    ("persistent", "false", "persistent: 'false' is a str, not a bool"),
    ("num_stages", 3.0, "num_stages: 3.0 is a float, not a int"),
    ("persistent", 1, "persistent: 1 is a int, not a bool"),
    ("block_q", True, "block_q: True is a bool, not a int"),
    ("warps", 4, "warps: not a tile field of the ranker (block_q, block_kv, num_stages, p_in_registers, "
                 "schedule_barrier, mask_interior, persistent, fast_math, static_max, cap_impl, exp2_fma_eighths, "
                 "scale_in_exp2, lazy_rescale)"),
])
def test_an_entry_whose_tiles_have_other_types_is_refused_by_name(tmp_path, monkeypatch, caplog, field, value, why):
    """A string "false" is truthy and 3.0 fails deep in JAX: the launch refuses the entry, says why, and runs
    the heuristic; the plugin calls the config infeasible, so verify reports it."""
    problem = Problem(batch=4, seq_len=4096, q_heads=16, kv_heads=16, head_dim=128, cap_method="none")
    install_table(tmp_path, monkeypatch, [{"bucket": problem.bucket(), "config": {**TILES, field: value}}])
    with caplog.at_level("WARNING", logger="kerneltune.tables"):
        chosen = api.choose_config(problem, None)
    assert why in caplog.text
    assert chosen.tile() == api.choose_config(problem, KernelConfig.for_problem(problem, **api.heuristic_config(
        problem))).tile()
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN

    assert why in PLUGIN.infeasibility(problem, {**TILES, field: value})


@pytest.mark.parametrize(("given", "meant"), [
    ([50, 100, 20, 60], [50, 100, 20, 50]),  # candidates start before the history: they keep [20, 50)
    ([0, 100, 50, 150], [0, 100, 100, 128]),  # after, and past T: [100, T)
    ([60, 50, 70, 80], [60, 60, 70, 80]),  # an inverted history is empty
    ([-5, 40, 40, 40], [0, 40, 40, 40]),  # clipped into [0, T]; no candidates
    ([0, 128, 0, 128], [0, 128, 128, 128]),  # candidates inside the history are dropped
    ([10, 20, 30, 40], [10, 20, 30, 40]),  # valid bounds are kept as they are
    ([5, 5, 3, 8], [5, 5, 3, 8]),  # an empty history overlaps nothing
    ([2, 6, 4, 4], [2, 6, 4, 4]),  # nor do empty candidates
])
def test_traced_bounds_have_a_defined_meaning(given, meant):
    """Under jit the bounds cannot be checked: they are clamped, never left to undefined output."""
    got = jax.jit(lambda b: api.clamp_bounds(b, T))(jnp.asarray([given], jnp.int32))
    assert np.asarray(got).tolist() == [meant] and got.dtype == jnp.int32


@pytest.mark.slow
def test_overlapping_bounds_under_jit_compute_the_clamped_problem():
    a = args(bounds=jnp.asarray([[50, 100, 20, 60], [0, 100, 50, 150]], jnp.int32))
    out = jax.jit(lambda q, k, v, b: ranker_attention(q, k, v, b, interpret=True))(a["q"], a["k"], a["v"], a["bounds"])
    f = [np.asarray(a[n].astype(jnp.float32)) for n in ("q", "k", "v")]
    ro, _ = reference_f64(*f, np.asarray([[50, 100, 20, 50], [0, 100, 100, 128]]), sm_scale=D ** -0.5,
                          cap_method="none", cap=None)
    np.testing.assert_allclose(np.asarray(out.astype(jnp.float32)), ro, atol=3e-2)


def _instr_entry(problem):
    """Run P's d64 tanh entry in small: the tanh instruction wins, 7x the no-cap kernel's LSE error;
    the exact tanh is its measured fallback."""
    nocap = {"nocap_out_rel": 1e-3, "nocap_lse_abs": 2e-5}
    instr = {**TILES, "fast_math": True, "persistent": True, "static_max": True, "cap_impl": "tanh_instr"}
    exact = {**instr, "cap_impl": "exact"}
    return {"bucket": problem.bucket(), "config": instr, "median_us": 185.1,
            "accuracy": {"out_rel": 1.07e-3, "lse_abs": 1.4e-4, **nocap},
            "fallbacks": [{"config": exact, "median_us": 248.0, "spread": 0.002,
                           "accuracy": {"out_rel": 1.06e-3, "lse_abs": 1e-5, **nocap}}]}


@pytest.mark.parametrize(("return_lse", "error_budget", "impl"), [
    (False, None, "tanh_instr"), (True, None, "exact"), (True, ErrorBudget(lse=10.0), "tanh_instr"),
    (False, ErrorBudget(out=1.01), None)])
def test_the_call_launches_the_fastest_entry_its_error_budget_allows(tmp_path, monkeypatch, caplog, return_lse,
                                                                     error_budget, impl):
    """The user's call, not just the lookup: ``return_lse`` and ``error_budget`` reach the table's
    refusal. Out only: the instruction. The LSE returned: the exact fallback, logged with the measured
    ratio. A budget no measured config meets: the heuristic (exact), logged."""
    a = args(q=jnp.zeros((B, T, HQ, D), jnp.bfloat16), k=jnp.zeros((B, T, HKV, D), jnp.bfloat16),
             v=jnp.zeros((B, T, HKV, D), jnp.bfloat16))
    problem = api.problem_of(**a, sm_scale=None, cap_method="tanh", cap=30.0)
    install_table(tmp_path, monkeypatch, [_instr_entry(problem)])
    launched = []

    def compiled(problem, config, interpret):
        launched.append(config)
        return lambda q, k, v, bounds: (q, jnp.zeros((B, HQ, T), jnp.float32))

    monkeypatch.setattr(api, "_compiled", compiled)
    with caplog.at_level("WARNING", logger="kerneltune.tables"):
        ranker_attention(**a, cap_method="tanh", cap=30.0, return_lse=return_lse, error_budget=error_budget,
                         interpret=True)
    [config] = launched
    if impl is None:
        assert config.tile() == {**TILES, **api.heuristic_config(problem)} and config.cap_impl == "exact"
        assert "out error 1.07x the no-cap kernel's, over the budget of 1.01x" in caplog.text
    else:
        assert config.cap_impl == impl and config.static_max
    if return_lse and error_budget is None:
        assert "lse error 7.00x the no-cap kernel's, over the budget of 1x" in caplog.text


def test_the_lookup_without_a_budget_bounds_out_alone(tmp_path, monkeypatch):
    """``choose_config`` on its own judges a call that returns ``out``: the tanh instruction, whose LSE error is
    7x the no-cap kernel's, serves."""
    problem = Problem(batch=B, seq_len=T, q_heads=HQ, kv_heads=HKV, head_dim=D, cap_method="tanh", cap=30.0)
    install_table(tmp_path, monkeypatch, [_instr_entry(problem)])
    assert api.choose_config(problem, None).cap_impl == "tanh_instr"


def test_every_bench_shape_is_nearest_to_a_bucket_of_its_own_cap():
    """The runtime serves a call from the nearest tuned bucket. A shape nearest to a bucket of another cap runs
    that bucket's fallback, measured under the other cap: in run AH the GQA rows without a cap so missed
    ``scale_in_exp2``, which the space offers only without a cap. The runtime's own choice, over a table with
    an entry for every bucket of the space."""
    kernel = load_kernel("ranker-attention")
    space = load_space(SPACES / "ranker_attention.toml", set(kernel.tunables), set(kernel.problem_fields),
                       for_kernel=kernel.name)
    table = {"entries": {b.name: {"bucket": Problem(**b.problem).bucket(), "bucket_name": b.name, "config": {},
                                  "stamps": {"kernel_hash": "h"}} for b in space.buckets}}
    spec = load_spec(SPACES / "bench_ranker_attention.toml")
    served_by_other_cap = []
    for shape in spec.shapes:
        for cap_method, cap in spec.caps.items():
            problem = Problem(**shape.problem, cap_method=cap_method, cap=cap or None)
            entry, _ = lookup.select_entry(table, problem.bucket(), {"matched": []}, "h", Problem.HARD_BUCKET_FIELDS,
                                           kin=functools.partial(api._cap_kin, problem))
            if api._cap_kin(problem, entry["bucket"]):
                served_by_other_cap.append(f"{shape.name} {cap_method}: {entry['bucket_name']}")
    assert served_by_other_cap == []


@pytest.mark.parametrize(("over", "message"), [
    (dict(k=jnp.zeros((B, T, HKV), jnp.bfloat16)), f"k: expected rank 4 [B, T, H, D], got shape ({B}, {T}, {HKV})"),
    (dict(v=jnp.zeros((B, T, HKV), jnp.bfloat16)), f"v: expected rank 4 [B, T, H, D], got shape ({B}, {T}, {HKV})"),
    (dict(q=[[1.0]]), "q: expected rank 4 [B, T, H, D], got shape None"),
    (dict(v=jnp.zeros((B, T, HKV, D), jnp.float16)), "v: dtype float16 differs from q's bfloat16"),
    (dict(v=jnp.zeros((B, T, 2, D), jnp.bfloat16)), f"v: shape ({B}, {T}, 2, {D}) differs from k's ({B}, {T}, 1, {D})"),
    (dict(k=jnp.zeros((1, T, HKV, D), jnp.bfloat16), v=jnp.zeros((1, T, HKV, D), jnp.bfloat16)),
     f"k: shape (1, {T}, 1, {D}) must be [B={B}, T={T}, Hkv, D={D}] to match q"),
    (dict(k=jnp.zeros((B, 64, HKV, D), jnp.bfloat16), v=jnp.zeros((B, 64, HKV, D), jnp.bfloat16)),
     f"k: shape ({B}, 64, 1, {D}) must be [B={B}, T={T}, Hkv, D={D}] to match q"),
    (dict(k=jnp.zeros((B, T, HKV, 128), jnp.bfloat16), v=jnp.zeros((B, T, HKV, 128), jnp.bfloat16)),
     f"k: shape ({B}, {T}, 1, 128) must be [B={B}, T={T}, Hkv, D={D}] to match q"),
    (dict(bounds=[[0, 1, 1, 2]] * B), f"bounds: expected shape [B={B}, 4], got None"),
    (dict(bounds=jnp.zeros((B, 3), jnp.int32)), f"bounds: expected shape [B={B}, 4], got ({B}, 3)"),
    (dict(bounds=np.zeros((B, 4), np.int64)), "bounds: dtype must be int32, got int64"),
])
def test_each_malformed_argument_is_named_with_what_it_was(over, message):
    with pytest.raises(ValueError) as e:
        api.problem_of(**args(**over), sm_scale=None, cap_method="none", cap=None)
    assert str(e.value) == message


def test_the_problem_carries_the_calls_dtype_scale_and_cap():
    a = args(**{n: jnp.zeros((B, T, h, D), jnp.float16) for n, h in (("q", HQ), ("k", HKV), ("v", HKV))})
    p = api.problem_of(**a, sm_scale=0.3, cap_method="tanh", cap=20.0)
    assert (p.dtype, p.sm_scale, p.cap_method.value, p.cap, p.kv_heads) == ("float16", 0.3, "tanh", 20.0, HKV)


@pytest.mark.parametrize(("cap_method", "return_lse", "lse_bound"), [
    ("tanh", False, None), ("tanh", True, 1.0), ("tanh_approx", True, None)])
def test_the_call_hands_its_arrays_problem_and_budget_to_the_kernel(monkeypatch, cap_method, return_lse, lse_bound):
    """On a GPU backend, without a table: the problem (its scale), the budget for the call (``return_lse``: the
    LSE bounded at 1x where it is returned, but for tanh_approx) and q, k, v and bounds as given reach the
    compiled kernel; out alone unless the LSE is asked for."""
    a = args()
    seen = {}

    def choose(problem, config, budget):
        seen.update(problem=problem, budget=budget)
        return KernelConfig.for_problem(problem)

    def compiled(problem, config, interpret):
        seen.update(interpret=interpret, compiled_for=problem)
        return lambda *xs: (seen.update(arrays=xs), ("out", "lse"))[1]

    monkeypatch.setattr(api.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(api, "choose_config", choose)
    monkeypatch.setattr(api, "_compiled", compiled)
    got = ranker_attention(**a, sm_scale=0.3, cap_method=cap_method, cap=30.0, return_lse=return_lse)
    assert got == (("out", "lse") if return_lse else "out")
    assert seen["problem"].sm_scale == 0.3 and seen["interpret"] is False
    assert seen["compiled_for"] is seen["problem"]
    assert seen["budget"] == ErrorBudget(out=2.0, lse=lse_bound)
    assert all(x is a[n] for x, n in zip(seen["arrays"], ("q", "k", "v", "bounds"), strict=True))


def test_traced_bounds_reach_the_kernel_clamped(monkeypatch):
    """A kernel that returns the bounds it was given as its output shows what it got under jit."""
    a = args(bounds=jnp.asarray([[50, 100, 20, 60], [0, 100, 50, 150]], jnp.int32))
    monkeypatch.setattr(api, "_compiled", lambda p, c, i: lambda q, k, v, b: (b, None))
    got = jax.jit(lambda q, k, v, b: ranker_attention(q, k, v, b, interpret=True))(a["q"], a["k"], a["v"],
                                                                                    a["bounds"])
    assert np.asarray(got).tolist() == [[50, 100, 20, 50], [0, 100, 100, 128]]
