"""Ranker attention as the engine sees it (``kerneltune.seams.protocols.Kernel``)."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from kerneltune.files.build_cache import BuildCache, build_key
from kerneltune.files.reference_cache import ReferenceCache
from kerneltune.seams.protocols import Capability, CheckResult

from .config import KernelConfig, Problem, infeasibility
from .heuristics import heuristic_config
from .inputs import adversarial_bounds, check_inputs, useful_flops
from .source import kernel_source_hash, tile_type_error

_REFERENCE_BYTES = 2.5e9
# q and k are checked as drawn and scaled by 4 (exact in bf16 and f16): logits of standard deviation 16,
# where a cap of 30 bites and the cap's implementation shows in the LSE
# (1371b475c129:results/ranker_attention/2026-12-01-h200-run-o/).
CHECK_GAINS = (1.0, 4.0)


@dataclasses.dataclass(frozen=True)
class RankerInputs:
    q: Any
    k: Any
    v: Any
    bounds: np.ndarray
    check_bounds: tuple[np.ndarray, ...]
    spec_json: str = "{}"  # what the inputs were drawn from (with ``seed``): the references' cache key
    seed: int = 0
    # What a check computed from these inputs alone (the float32 references on the device, the no-cap twin's
    # errors), kept for the next check on them: every candidate of a bucket is checked on one seed's inputs.
    memo: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)


class RankerAttentionPlugin:
    name = "ranker_attention"
    backend = "cuda-jax"
    devices = 1
    capabilities = frozenset({Capability.CHECK_SMALL, Capability.BENCH, Capability.REPORT_VIEW,
                              Capability.PROGRAM_DIGEST, Capability.PORTABLE_BUILD, Capability.CHECK_PROGRAMS})
    tunables = frozenset(KernelConfig.TILE_FIELDS)
    config_defaults = MappingProxyType({f.name: f.default for f in dataclasses.fields(KernelConfig)
                                      if f.name in KernelConfig.TILE_FIELDS})
    # A fallback per setting: static_max needs a cap <= 44.36, tanh_instr needs fast_math and a tanh cap,
    # and the tanh instruction and the FMA-pipe exp2 (its cubic's 7e-5 on a dominant weight) miss the LSE
    # budget of a call that returns the LSE.
    gated_params = ("static_max", "fast_math", "cap_impl", "exp2_fma_eighths")
    problem_fields = frozenset(f.name for f in dataclasses.fields(Problem))
    digest_stamps = ("jax", "jaxlib")  # JAX lowers the program the digest reads
    hard_bucket_fields = Problem.HARD_BUCKET_FIELDS

    def problem(self, fields: Mapping[str, Any]) -> Problem:
        return Problem(**fields)

    def problem_dict(self, problem: Problem) -> dict[str, Any]:
        d = dataclasses.asdict(problem)
        d["cap_method"] = problem.cap_method.value
        return d

    def infeasibility(self, problem: Problem, tiles: Mapping[str, Any]) -> str | None:
        if (why := tile_type_error(tiles)) is not None:
            return why
        return infeasibility(KernelConfig.for_problem(problem, **tiles), problem)

    def heuristic(self, problem: Problem) -> dict[str, Any]:
        return heuristic_config(problem)

    def bucket(self, problem: Problem) -> dict[str, Any]:
        return problem.bucket()

    def source_hash(self) -> str:
        return kernel_source_hash()

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        gpu = str(stamps.get("gpu", ""))
        if any(tag in gpu for tag in ("H100", "H200", "H800", "H20", "GH200")):
            return None
        return f"an NVIDIA Hopper GPU (H100/H200, sm_90); this machine has {gpu or 'none'}"

    def build(self, problem: Problem, tiles: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
        """Compile the poisoned entry point, the one both checked and timed (``timed_call``): the plain one,
        which the runtime launches, would be half of a candidate's compile for the same kernel."""
        return {"poisoned": _compiled(problem, KernelConfig.for_problem(problem, **tiles), poisoned=True)}

    def export_build(self, built: Mapping[str, Any]) -> bytes:
        """The compiled entry points as JAX's serialized executables (the Mosaic GPU kernel inside): loaded in
        another process, they run bit-identically to the process that compiled them
        (results/engine/2026-12-04-compile-workers/). No pickles: an ``.npz`` of byte arrays, the argument and
        result trees in JAX's own proto form, so that a build kept in the user's cache (``build_cache``) holds
        the executable and nothing else that runs."""
        import io

        import numpy as np
        from jax.experimental.serialize_executable import serialize

        arrays = {}
        for name, fn in built.items():
            exe, in_tree, out_tree = serialize(fn)
            for part, data in (("exe", exe), ("in", in_tree.serialize_using_proto()),
                               ("out", out_tree.serialize_using_proto())):
                arrays[f"{name}.{part}"] = np.frombuffer(data, np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    def import_build(self, data: bytes) -> dict[str, Callable[..., Any]]:
        import io

        import numpy as np
        from jax.experimental.serialize_executable import deserialize_and_load
        from jax.tree_util import PyTreeDef, default_registry

        with np.load(io.BytesIO(data), allow_pickle=False) as f:
            parts = {name: f[name].tobytes() for name in f.files}
        names = sorted({name.rsplit(".", 1)[0] for name in parts})
        return {name: deserialize_and_load(
                    parts[f"{name}.exe"],
                    PyTreeDef.deserialize_using_proto(default_registry, parts[f"{name}.in"]),
                    PyTreeDef.deserialize_using_proto(default_registry, parts[f"{name}.out"]))
                for name in names}

    def make_inputs(self, problem: Problem, inputs_spec: Mapping[str, Any], seed: int) -> RankerInputs:
        """The same object again for the same problem, spec and seed as the last call: verify runs an
        entry, its rivals and its fallbacks on one seed, so their float32 references are computed once."""
        return _inputs(problem, json.dumps(dict(inputs_spec), sort_keys=True), seed)

    def check(self, built: Any, problem: Problem, inputs: RankerInputs) -> CheckResult:
        """Every check bounds case at every gain against the float32 reference, outputs poisoned first.
        A capped problem's errors are measured beside the no-cap kernel's on the same inputs: the
        accuracy contract (``accuracy``) is judged on their ratio at launch."""
        cache = ReferenceCache.from_env()
        failure, out_rel, lse_abs = _errors(built["poisoned"], problem, inputs, cache)
        if failure is not None:
            return CheckResult(failure, out_rel, reference_s=cache.seconds)
        measured = {"out_rel": out_rel, "lse_abs": lse_abs}
        if problem.cap_method.needs_cap:
            plain = _without_cap(problem)
            if ("twin", plain) not in inputs.memo:
                inputs.memo["twin", plain] = _errors(_no_cap_twin(plain), plain, inputs, cache)
            twin_failure, measured["nocap_out_rel"], measured["nocap_lse_abs"] = inputs.memo["twin", plain]
            if twin_failure is not None:  # no baseline to judge the accuracy contract on
                return CheckResult(f"the no-cap kernel measured beside it failed: {twin_failure}", out_rel,
                                   reference_s=cache.seconds)
        return CheckResult(None, out_rel, accuracy=measured, reference_s=cache.seconds)

    def compile_check(self, problem: Problem) -> None:
        """The float32 reference the check runs for ``problem``, and for a capped one the no-cap kernel and its
        reference, compiled (or loaded) as ``check`` asks for them: in a compile worker, they are kept in the
        user's build cache for the timing worker's check to load."""
        _compiled_reference(*_reference_key(problem))
        if problem.cap_method.needs_cap:
            plain = _without_cap(problem)
            _no_cap_twin(plain)
            _compiled_reference(*_reference_key(plain))

    def timed_call(self, built: Any, inputs: RankerInputs) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The checked entry point on NaN-filled out and lse buffers: one compile a candidate, not two (2.9 s
        instead of 6.0, the median over the shipped table's 18 winners and runner-ups on one H200). XLA copies
        the buffers into the outputs with a device copy, which CUPTI does not count, so a call times the plain
        entry's one kernel, with its outputs bit for bit. In alternating turns its times were 1.0048x the plain
        entry's (median; 0.995 to 1.013), within 0.2% of one another inside a bucket: a bucket's ranking is the
        plain entry's (results/engine/2026-12-05-one-entry/)."""
        import jax.numpy as jnp

        from .verify import poisoned_outputs

        args = (inputs.q, inputs.k, inputs.v, jnp.asarray(inputs.bounds), *poisoned_outputs(inputs.q))
        return built["poisoned"], args

    def check_small(self, problem: Problem, tiles: Mapping[str, Any]) -> CheckResult:
        """Correctness of a tuned entry on the CPU: the same kernel in interpret mode at a small
        shape (same head_dim, GQA group, dtype and cap; every adversarial bounds case). Interpret mode
        stages P through SMEM itself; whether the config fits is judged as the GPU would run it (with
        P staged, a persistent D=128 tile is 104 B over the limit that interpret mode does not have)."""
        from .verify import check_interpret

        bounds = adversarial_bounds(256, np.random.default_rng(0))
        small = dataclasses.replace(problem, batch=len(bounds), seq_len=256, q_heads=problem.heads_per_kv_head,
                                    kv_heads=1)
        config = KernelConfig.for_problem(small, **tiles)
        why = infeasibility(config, small)
        if why is not None:
            return CheckResult(f"the small check shape does not fit this config: {why}")
        c = check_interpret(small, config, bounds, seed=5)
        return CheckResult("; ".join(c.errors) or None, c.rel_fro)

    def program_digest(self, problem: Problem, tiles: Mapping[str, Any], stamps: Mapping[str, Any]) -> str:
        """The lowered forward's digest (``program.py``) at the SM count the entry was measured on: the
        persistent grid's size is part of the program."""
        from .program import program_digest

        return program_digest(problem, dict(tiles), int(stamps.get("sm_count") or 0) or None)

    def flops(self, problem: Problem, inputs: RankerInputs) -> float:
        return float(useful_flops(problem, inputs.bounds))

    def release(self, built: Any) -> None:
        pass

    # ------------------------------------------------------------- benches and the report
    @property
    def baselines(self) -> tuple[str, ...]:
        from .bench.runner import BASELINES

        return BASELINES

    def bench_shapes(self) -> str:
        return "bench_ranker_attention.toml"

    def run_bench(self, shapes: Any, baselines: tuple[str, ...], out: Any,
                  resume: bool = False) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
        from .bench.runner import run_bench

        return run_bench(shapes, baselines, out, resume=resume)

    bench_columns = (("shape", "shape", "s"), ("cap_method", "cap", "s"), ("impl", "impl", "s"),
                     ("median_ms", "ms", ".3f"), ("spread", "spread", ".2%"),
                     ("useful_tflops", "useful TFLOP/s", ".0f"), ("dense_tflops", "dense TFLOP/s", ".0f"),
                     ("rel_error", "rel err", ".1e"), ("kernel_over_call", "kernel/call", ".3f"))

    def report_view(self, rows: Any, bucket: str) -> Any:
        from .report_view import tile_heatmap

        return tile_heatmap(rows, bucket)


def _errors(fn: Callable[..., Any], problem: Problem, inputs: RankerInputs,
            cache: ReferenceCache) -> tuple[str | None, float, float]:
    """The first failure of ``fn`` (the poisoned entry point) on the check's inputs, else None, and its
    worst relative Frobenius error of ``out`` and largest LSE error over them. The outputs are judged on the
    device (``verify.compare``); only the figures leave it."""
    import jax.numpy as jnp

    from .verify import compare, poisoned_outputs

    out_rel = lse_abs = 0.0
    for gain in CHECK_GAINS:
        q, k, v = inputs.q * jnp.asarray(gain, inputs.q.dtype), inputs.k * jnp.asarray(gain, inputs.k.dtype), inputs.v
        for case, bounds in enumerate(inputs.check_bounds):
            ro, rl = _reference(problem, inputs, gain, case, (q, k, v), cache)
            out, lse = fn(q, k, v, jnp.asarray(bounds), *poisoned_outputs(q))
            c = compare(out, lse, ro, rl, bounds, problem.dtype, problem.cap_method)
            out_rel, lse_abs = max(out_rel, c.rel_fro), max(lse_abs, c.lse_max_abs)
            if not c.ok:
                return f"gain {gain:g}: " + "; ".join(c.errors), out_rel, lse_abs
    return None, out_rel, lse_abs


def _reference(problem: Problem, inputs: RankerInputs, gain: float, case: int, qkv: tuple[Any, Any, Any],
               cache: ReferenceCache) -> tuple[Any, Any]:
    """The float32 reference (out, lse) of one check case at one gain, on the device: from this worker's memo,
    else from the disk cache (keyed by everything it is computed from), else computed."""
    import jax
    import jax.numpy as jnp

    memo_key = ("reference", problem, gain, case)
    if memo_key in inputs.memo:
        return inputs.memo[memo_key]
    dev = jax.devices()[0]
    key = {"kernel": "ranker_attention", "problem": PLUGIN.problem_dict(problem),
           "inputs": json.loads(inputs.spec_json), "seed": inputs.seed, "gain": gain, "case": case,
           "source": reference_source_hash(), "device": f"{dev.platform}:{dev.device_kind}", "jax": jax.__version__}

    def compute() -> dict[str, Any]:
        step, chunks = _reference_rows_a_call(problem)
        pad = chunks * step - problem.batch
        qf, kf, vf = (jnp.pad(x.astype(jnp.float32), [(0, pad), (0, 0), (0, 0), (0, 0)]) for x in qkv)
        jb = jnp.pad(jnp.asarray(inputs.check_bounds[case], jnp.int32), [(0, pad), (0, 0)])
        rows = [_reference_rows(problem, qf[i:i + step], kf[i:i + step], vf[i:i + step], jb[i:i + step])
                for i in range(0, chunks * step, step)]
        return {"out": jnp.concatenate([r[0] for r in rows])[:problem.batch],
                "lse": jnp.concatenate([r[1] for r in rows])[:problem.batch]}

    arrays = cache.get(key, compute)
    inputs.memo[memo_key] = (jnp.asarray(arrays["out"]), jnp.asarray(arrays["lse"]))
    return inputs.memo[memo_key]


def _reference_rows(problem: Problem, q: Any, k: Any, v: Any, bounds: Any) -> tuple[Any, Any]:
    """The float32 reference of one call's batch rows (``_reference_rows_a_call``), compiled."""
    return _compiled_reference(*_reference_key(problem))(q, k, v, bounds)


def _reference_rows_a_call(problem: Problem) -> tuple[int, int]:
    """(batch rows a call, calls) of a problem's reference: equal chunks of rows, each keeping the [rows, H, T, T]
    float32 logits under 2.5 GB, the last padded with empty rows, so that the reference compiles once a bucket."""
    most = max(1, int(_REFERENCE_BYTES // (problem.q_heads * problem.seq_len ** 2 * 4)))
    chunks = -(-problem.batch // most)
    return -(-problem.batch // chunks), chunks


def _reference_key(problem: Problem) -> tuple[float, str, float | None, tuple[tuple[tuple[int, ...], str], ...]]:
    """What a problem's compiled reference depends on (``_compiled_reference``'s arguments): its scale, its cap,
    and q, k, v (float32) and the bounds (int32) of one call's rows."""
    rows, _ = _reference_rows_a_call(problem)
    q = ((rows, problem.seq_len, problem.q_heads, problem.head_dim), "float32")
    kv = ((rows, problem.seq_len, problem.kv_heads, problem.head_dim), "float32")
    return problem.scale, str(problem.cap_method), problem.cap, (q, kv, kv, ((rows, 4), "int32"))


REFERENCE_XLA_OPTIONS: dict[str, Any] = {"xla_gpu_autotune_level": 0}  # no autotuning of the float32 einsums


@functools.cache
def _compiled_reference(sm_scale: float, cap_method: str, cap: float | None,
                        specs: tuple[tuple[tuple[int, ...], str], ...]) -> Callable[..., Any]:
    """The float32 reference at the highest matmul precision, compiled once a worker for arguments of ``specs``
    and what it depends on of a problem (so a capped bucket's no-cap twin shares an uncapped bucket's of the same
    shapes), kept in the user's build cache: a warm verify or a new sweep of a known shape loads the executable
    instead of compiling it again, and a compile worker compiles it ahead (``compile_check``). A sweep's first
    candidate of a bucket spent 14.4 and 26.7 s on its references op by op on one H200 (each op compiled for the
    bucket's shapes), 10.5 and 16.7 s jitted, within 2e-7 of them, and a jitted reference's first call was 7.1 s
    against 0.02 s for its second (results/engine/2026-12-05-one-entry/): XLA's compile is nearly all of it."""
    import jax

    from .reference import reference_f32

    def compile_() -> Any:
        jitted = jax.jit(reference_f32, static_argnames=("sm_scale", "cap_method", "cap"),
                         compiler_options=REFERENCE_XLA_OPTIONS)
        args = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in specs]
        with jax.default_matmul_precision("highest"):
            return jitted.lower(*args, sm_scale=sm_scale, cap_method=cap_method, cap=cap).compile()

    what = {"sm_scale": sm_scale, "cap_method": cap_method, "cap": cap}
    tiles = {"entry": "reference", "args": [[list(shape), dtype] for shape, dtype in specs],
             "xla": REFERENCE_XLA_OPTIONS}
    return _kept_build(reference_source_hash(), what, tiles, compile_)


@functools.cache
def reference_source_hash() -> str:
    """The files a reference depends on: the inputs drawn, the reference itself and the cap functions."""
    from pathlib import Path

    from kerneltune.tables.stamps import source_hash

    here = Path(__file__).parent
    return source_hash(here / name for name in ("inputs.py", "reference.py", "cap.py", "config.py"))


@functools.lru_cache(maxsize=1)
def _inputs(problem: Problem, spec_json: str, seed: int) -> RankerInputs:
    q, k, v, timing, checks = check_inputs(problem, json.loads(spec_json), seed)
    return RankerInputs(q, k, v, timing, checks, spec_json, seed)


def _without_cap(problem: Problem) -> Problem:
    """The problem of a capped problem's no-cap twin: its shapes, no cap."""
    return dataclasses.replace(problem, cap_method="none", cap=None)


@functools.cache
def _no_cap_twin(problem: Problem) -> Callable[..., Any]:
    """The no-cap kernel (heuristic tiles) of a capped problem's shape, built once per worker and kept in the
    user's build cache where the engine names one (``build_cache``): the error level a cap implementation is
    measured against."""
    tiles = heuristic_config(problem)
    config = KernelConfig.for_problem(problem, **tiles)
    return _kept_build(kernel_source_hash(), PLUGIN.problem_dict(problem), {**tiles, "entry": "poisoned"},
                       lambda: _compiled(problem, config, poisoned=True))


def _kept_build(source_hash: str, problem: Mapping[str, Any], tiles: Mapping[str, Any],
                compile_: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """``compile_()``'s program, loaded from the user's build cache where the engine names one (``build_cache``)
    and kept there when compiled; ``tiles["entry"]`` names it in the stored build."""
    cache = BuildCache.from_env()
    if cache.folder is None:
        return compile_()
    from kerneltune.backends.cuda_jax import MATCHED, system_stamps

    name = tiles["entry"]
    built: dict[str, Callable[..., Any]] = {}  # as compiled here or loaded from the cache

    def build() -> bytes:
        built[name] = compile_()
        return PLUGIN.export_build(built)

    def loads(data: bytes) -> None:
        built.update(PLUGIN.import_build(data))

    cache.build(build_key(PLUGIN.name, source_hash, problem, tiles, system_stamps(), MATCHED), build, loads)
    return built[name]


def _compiled(problem: Problem, config: KernelConfig, *, poisoned: bool) -> Callable[..., Any]:
    """One entry point compiled ahead for the problem's shapes: (q, k, v, bounds), plus the poisoned
    out and lse buffers when ``poisoned``."""
    from .kernel import build_forward
    from .program import arg_specs

    return build_forward(problem, config, poisoned=poisoned).lower(*arg_specs(problem, poisoned=poisoned)).compile()


PLUGIN = RankerAttentionPlugin()
