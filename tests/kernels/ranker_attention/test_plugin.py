"""The engine's check of a ranker candidate, run with the interpret-mode kernel on the CPU:
it passes the right kernel and fails one compiled for another cap."""

import dataclasses

import pytest

from kerneltune.kernels.ranker_attention import plugin
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.kernels.ranker_attention.reference import reference_f32 as _REFERENCE_F32

TILES = dict(block_q=64, block_kv=64, num_stages=2, p_in_registers=False)


pytestmark = pytest.mark.usefixtures("fast_interpret")  # conftest.py


@pytest.mark.slow
def test_check_passes_the_right_kernel_and_fails_a_wrong_one(monkeypatch):
    """And measures a capped kernel's errors beside the no-cap kernel's on the same inputs (the twin
    built in interpret mode here, as the GPU would build it)."""
    monkeypatch.setattr(plugin, "_compiled", lambda problem, config, poisoned: build_forward(
        problem, config, interpret=True, poisoned=poisoned))
    plugin._no_cap_twin.cache_clear()
    problem = Problem(batch=2, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    inputs = PLUGIN.make_inputs(problem, {"history": [50, 90], "candidates": 20, "timing_seed": 1}, seed=2)
    right = {"poisoned": build_forward(problem, KernelConfig.for_problem(problem, **TILES), interpret=True,
                                       poisoned=True)}
    ok = PLUGIN.check(right, problem, inputs)
    plugin._no_cap_twin.cache_clear()
    assert ok.error is None and ok.rel_error < 1e-2
    assert set(ok.accuracy) == {"out_rel", "lse_abs", "nocap_out_rel", "nocap_lse_abs"}
    assert ok.accuracy["out_rel"] == ok.rel_error and 0 < ok.accuracy["nocap_out_rel"] < 1e-2
    assert ok.accuracy["out_rel"] != ok.accuracy["nocap_out_rel"], "the twin must be the no-cap kernel"
    other = Problem(batch=2, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="clamp", cap=1.0)
    wrong = {"poisoned": build_forward(other, KernelConfig.for_problem(other, **TILES), interpret=True,
                                       poisoned=True)}
    assert PLUGIN.check(wrong, problem, inputs).error is not None


def test_static_max_on_a_cap_it_cannot_take_is_pruned():
    """The sweep prunes static_max on clamp 50 like any other infeasible config."""
    problem = Problem(batch=4, seq_len=8192, q_heads=16, kv_heads=16, head_dim=128, cap_method="clamp", cap=50.0)
    tiles = dict(block_q=64, block_kv=128, num_stages=2, persistent=True, static_max=True)
    assert "static_max" in PLUGIN.infeasibility(problem, tiles)
    assert PLUGIN.infeasibility(problem, {**tiles, "static_max": False}) is None


@pytest.mark.parametrize(("head_dim", "method", "cap", "static"), [
    (128, "tanh", 30.0, True), (128, "tanh_approx", 30.0, True), (128, "clamp", 50.0, False),
    (128, "none", None, False), (64, "tanh", 30.0, False)])
def test_heuristic_skips_the_running_max_where_run_h_measured_a_gain(head_dim, method, cap, static):
    problem = Problem(batch=2, seq_len=1024, q_heads=2, kv_heads=2, head_dim=head_dim, cap_method=method, cap=cap)
    assert PLUGIN.heuristic(problem)["static_max"] is static


def test_a_no_cap_twin_that_fails_its_own_check_fails_the_candidate(monkeypatch):
    """The twin is the baseline the accuracy contract is judged on: were its failure dropped, a broken
    baseline would pass any cap implementation (or refuse all of them) without a word."""
    def errors(fn, problem, inputs, cache):
        return (None, 1e-3, 1e-5) if problem.cap_method.needs_cap else ("gain 4: 3 NaN in out", 0.5, 0.0)

    monkeypatch.setattr(plugin, "_errors", errors)
    monkeypatch.setattr(plugin, "_no_cap_twin", lambda problem: None)
    problem = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    inputs = plugin.RankerInputs(None, None, None, None, ())
    result = PLUGIN.check({"poisoned": None}, problem, inputs)
    assert result.error == "the no-cap kernel measured beside it failed: gain 4: 3 NaN in out"
    assert not result.accuracy


def test_a_second_check_on_the_same_inputs_reuses_their_references(monkeypatch):
    """verify checks an entry and its fallbacks on one seed's inputs: the float32 references and the
    no-cap twin's errors are computed once for them, and a wrong kernel checked after a right one
    still fails."""
    import jax.numpy as jnp

    from kerneltune.kernels.ranker_attention import reference

    real = reference.reference_f32
    rows, calls = plugin._reference_rows, []
    monkeypatch.setattr(plugin, "_reference_rows", lambda p, *a: calls.append(p.cap_method) or rows(p, *a))
    problem = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)

    def kernel(cap_method, cap):  # the float32 reference itself, rounded to the output dtype
        def fn(q, k, v, jb, o0, l0):
            out, lse = real(*(x.astype(jnp.float32) for x in (q, k, v)), jb, sm_scale=problem.scale,
                            cap_method=cap_method, cap=cap)
            return out.astype(q.dtype), lse
        return fn

    monkeypatch.setattr(plugin, "_no_cap_twin", lambda plain: kernel("none", None))
    plugin._inputs.cache_clear()
    spec = {"history": [50, 90], "candidates": 20}
    inputs = PLUGIN.make_inputs(problem, spec, seed=2)
    assert PLUGIN.make_inputs(problem, dict(spec), seed=2) is inputs
    first = PLUGIN.check({"poisoned": kernel("tanh", 5.0)}, problem, inputs)
    assert first.error is None, first.error
    n = 2 * 2 * len(inputs.check_bounds)  # both gains, every case, the cap and the twin
    assert len(calls) == n
    again = PLUGIN.check({"poisoned": kernel("tanh", 5.0)}, problem, inputs)
    assert again.error is None and again.accuracy == first.accuracy
    wrong = PLUGIN.check({"poisoned": kernel("clamp", 1.0)}, problem, inputs)
    assert wrong.error is not None and len(calls) == n
    assert PLUGIN.make_inputs(problem, spec, seed=3) is not inputs


def _reference_kernel(scale=1.0):
    """A stand-in for a compiled candidate on the CPU: the float32 reference itself (``scale`` 1: right;
    otherwise every output off by that factor), written into the poisoned buffers' dtypes."""
    import jax
    import jax.numpy as jnp

    def fn(q, k, v, bounds, o0, l0):
        with jax.default_matmul_precision("highest"):
            out, lse = _REFERENCE_F32(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), bounds,
                                     sm_scale=PROBLEM.scale, cap_method=PROBLEM.cap_method, cap=PROBLEM.cap)
        return (out * scale).astype(o0.dtype), lse

    return {"poisoned": fn}


PROBLEM = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="none")
SPEC = {"history": [50, 90], "candidates": 20, "timing_seed": 1}


def test_a_wrong_candidate_after_a_right_one_fails_on_the_references_kept_on_disk(tmp_path, monkeypatch, caplog):
    """References are computed once per bucket and kept (in memory, and on disk for the next worker); the check
    of every candidate stays whole: a wrong one after a right one still fails, from memory and from disk."""
    from kerneltune.files.reference_cache import ENV

    monkeypatch.setenv(ENV, str(tmp_path / "references"))
    calls = []
    rows = plugin._reference_rows
    monkeypatch.setattr(plugin, "_reference_rows", lambda *a: calls.append(1) or rows(*a))
    plugin._inputs.cache_clear()
    inputs = PLUGIN.make_inputs(PROBLEM, SPEC, seed=3)
    first = PLUGIN.check(_reference_kernel(), PROBLEM, inputs)
    assert first.error is None and first.rel_error < 1e-2 and first.reference_s > 0
    computed = len(calls)
    assert computed == len(plugin.CHECK_GAINS) * len(inputs.check_bounds)  # one per case and gain, not more
    wrong = PLUGIN.check(_reference_kernel(1.05), PROBLEM, inputs)
    assert wrong.error is not None and "Frobenius" in wrong.error and len(calls) == computed
    files = sorted((tmp_path / "references").glob("*.npz"))
    assert len(files) == computed
    # A new worker (nothing in memory) loads them from disk, and judges just as strictly.
    plugin._inputs.cache_clear()
    again = PLUGIN.make_inputs(PROBLEM, SPEC, seed=3)
    assert PLUGIN.check(_reference_kernel(1.05), PROBLEM, again).error is not None and len(calls) == computed
    assert PLUGIN.check(_reference_kernel(), PROBLEM, again).error is None
    # Another seed is another key: computed, never taken from the first seed's files.
    plugin._inputs.cache_clear()
    PLUGIN.check(_reference_kernel(), PROBLEM, PLUGIN.make_inputs(PROBLEM, SPEC, seed=4))
    assert len(calls) == 2 * computed
    # A corrupt file is one warning and a recompute.
    files[0].write_bytes(files[0].read_bytes()[:100])
    plugin._inputs.cache_clear()
    with caplog.at_level("WARNING", logger="kerneltune.references"):
        assert PLUGIN.check(_reference_kernel(), PROBLEM, PLUGIN.make_inputs(PROBLEM, SPEC, seed=3)).error is None
    assert len(calls) == 2 * computed + 1 and "unreadable" in caplog.text
    plugin._inputs.cache_clear()


def test_an_exported_build_loads_without_pickles_and_runs_as_compiled():
    """The bytes kept in the user's build cache: JAX's serialized executables and their trees in proto form,
    read with ``allow_pickle=False``, so a cache file carries no code but the compiled program."""
    import io

    import jax
    import jax.numpy as jnp
    import numpy as np

    x = jnp.arange(4.0)
    built = {"plain": jax.jit(lambda a, b: (a + b, {"lse": a * b})).lower(x, x).compile(),
             "poisoned": jax.jit(lambda a: a * 3).lower(x).compile()}
    data = PLUGIN.export_build(built)
    with np.load(io.BytesIO(data), allow_pickle=False) as f:
        assert sorted(f.files) == sorted(f"{n}.{p}" for n in built for p in ("exe", "in", "out"))
    loaded = PLUGIN.import_build(data)
    out, tree = loaded["plain"](x, 2 * x)
    assert np.array_equal(out, 3 * x) and np.array_equal(tree["lse"], 2 * x * x)
    assert np.array_equal(loaded["poisoned"](x), 3 * x)


def test_the_no_cap_twin_is_compiled_once_per_system_then_loaded_from_the_build_cache(tmp_path, monkeypatch):
    """A worker that needs the twin again (a new verify, a resumed sweep) loads it; a CPU-compiled stand-in
    takes the kernel's place, as the cache only moves executables."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kerneltune.files.build_cache import ENV

    compiled = []

    def fake_compiled(problem, config, poisoned):
        compiled.append(config)
        x = jnp.arange(4.0)
        return jax.jit(lambda a: a * 2).lower(x).compile()

    monkeypatch.setenv(ENV, str(tmp_path / "builds"))
    monkeypatch.setattr(plugin, "_compiled", fake_compiled)
    problem = Problem(batch=2, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    outputs = []
    for _ in range(2):
        plugin._no_cap_twin.cache_clear()  # a fresh worker
        outputs.append(np.asarray(plugin._no_cap_twin(problem)(jnp.arange(4.0))))
    plugin._no_cap_twin.cache_clear()
    assert len(compiled) == 1 and len(list((tmp_path / "builds").glob("*.npz"))) == 1
    assert all(np.array_equal(o, [0.0, 2.0, 4.0, 6.0]) for o in outputs)


def test_the_reference_is_compiled_once_per_system_then_loaded_from_the_build_cache(tmp_path, monkeypatch):
    """A worker that needs a bucket's reference again (a warm verify, a new sweep of a known shape) loads its
    executable: the same bits as the one compiled here, and as the reference compiled with no cache; another
    cap is another program, compiled."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kerneltune.files.build_cache import ENV

    problem = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    inputs = PLUGIN.make_inputs(problem, SPEC, seed=3)
    args = [x.astype(jnp.float32) for x in (inputs.q, inputs.k, inputs.v)] + [jnp.asarray(inputs.check_bounds[0])]
    monkeypatch.setenv(ENV, "")
    plugin._compiled_reference.cache_clear()
    uncached = plugin._reference_rows(problem, *args)
    monkeypatch.setenv(ENV, str(tmp_path / "builds"))
    compiles = []
    lower = jax.stages.Lowered.compile
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda self, *a: compiles.append(1) or lower(self, *a))
    outputs = []
    for p in (problem, problem, dataclasses.replace(problem, cap=6.0)):
        plugin._compiled_reference.cache_clear()  # a fresh worker
        outputs.append(jax.device_get(plugin._reference_rows(p, *args)))
    plugin._compiled_reference.cache_clear()
    assert len(compiles) == 2 and len(list((tmp_path / "builds").glob("*.npz"))) == 2
    for got in outputs[:2]:
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, jax.device_get(uncached), strict=True))
    assert not np.array_equal(outputs[2][0], outputs[0][0], equal_nan=True)


@pytest.mark.parametrize(("cap_method", "cap", "compiled"), [("tanh", 5.0, 3), ("none", None, 1)])
def test_compile_check_compiles_what_a_fresh_workers_check_then_loads(tmp_path, monkeypatch, cap_method, cap,
                                                                      compiled):
    """A compile worker's ``compile_check`` keeps in the build cache every program the check of the problem asks
    for (its reference; for a capped problem also the no-cap kernel and its reference), for the shapes the check
    calls them on (chunks of rows, the last padded): a fresh worker's check compiles none of them. A CPU-compiled
    float32 reference stands in for the no-cap kernel, as the cache only moves executables."""
    import jax
    import jax.numpy as jnp

    from kerneltune.files.build_cache import ENV
    from kerneltune.files.reference_cache import ENV as REFERENCES
    from kerneltune.kernels.ranker_attention.program import arg_specs

    def twin(problem, config, poisoned):  # the float32 reference itself, written as the poisoned entry writes
        def fn(q, k, v, bounds, o0, l0):
            out, lse = _REFERENCE_F32(*(x.astype(jnp.float32) for x in (q, k, v)), bounds, sm_scale=problem.scale,
                                      cap_method=problem.cap_method, cap=problem.cap)
            return out.astype(o0.dtype), lse
        with jax.default_matmul_precision("highest"):
            return jax.jit(fn).lower(*arg_specs(problem, poisoned=True)).compile()

    monkeypatch.setenv(ENV, str(tmp_path / "builds"))
    monkeypatch.setenv(REFERENCES, "")
    monkeypatch.setattr(plugin, "_compiled", twin)
    monkeypatch.setattr(plugin, "_REFERENCE_BYTES", 2 * 2 * 128 ** 2 * 4)  # two rows a call: batch 3 padded to 4
    compiles = []
    lower = jax.stages.Lowered.compile
    monkeypatch.setattr(jax.stages.Lowered, "compile", lambda self, *a: compiles.append(1) or lower(self, *a))
    problem = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method=cap_method, cap=cap)

    def fresh_worker():
        plugin._compiled_reference.cache_clear()
        plugin._no_cap_twin.cache_clear()
        plugin._inputs.cache_clear()

    fresh_worker()
    PLUGIN.compile_check(problem)
    assert len(compiles) == compiled and len(list((tmp_path / "builds").glob("*.npz"))) == compiled
    fresh_worker()
    candidate = {"poisoned": twin(problem, None, True)}
    compiles.clear()
    result = PLUGIN.check(candidate, problem, PLUGIN.make_inputs(problem, SPEC, seed=3))
    fresh_worker()
    assert result.error is None and compiles == []
    assert ("nocap_out_rel" in result.accuracy) == (cap_method != "none")


@pytest.mark.parametrize("most_rows", [1, 2, 3])
def test_the_reference_in_chunks_of_rows_matches_the_float64_oracle(monkeypatch, most_rows):
    """The check's reference runs in equal chunks of batch rows, the last padded with empty rows (one compile a
    bucket): the padding must not leak into the rows kept, nor a chunk's rows into another's. Batch 3 in
    chunks of at most 1, 2 (two chunks of 2, one row padded) and 3 rows, against float64 NumPy."""
    import jax.numpy as jnp
    import numpy as np

    from kerneltune.files.reference_cache import ReferenceCache
    from kerneltune.kernels.ranker_attention.reference import reference_f64

    problem = Problem(batch=3, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0)
    monkeypatch.setattr(plugin, "_REFERENCE_BYTES", most_rows * problem.q_heads * problem.seq_len ** 2 * 4)
    plugin._inputs.cache_clear()
    inputs = PLUGIN.make_inputs(problem, {"history": [50, 90], "candidates": 20}, seed=5)
    plugin._inputs.cache_clear()
    case = len(inputs.check_bounds) - 1
    qkv = (inputs.q, inputs.k, inputs.v)
    out, lse = plugin._reference(problem, inputs, 1.0, case, qkv, ReferenceCache(None))
    want_out, want_lse = reference_f64(*(np.asarray(x.astype(jnp.float32)) for x in qkv), inputs.check_bounds[case],
                                       sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
    assert out.shape == want_out.shape and lse.shape == want_lse.shape
    np.testing.assert_allclose(np.asarray(out), want_out, atol=2e-5)
    np.testing.assert_array_equal(np.isfinite(np.asarray(lse)), np.isfinite(want_lse))
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(np.asarray(lse)[finite], want_lse[finite], atol=2e-5)
