"""`kerneltune bench ranker-attention`: the tuned kernel and every baseline on the same inputs, in one
process, timed with the engine's measurement, each output checked against the float32 reference.

Useful TFLOP/s counts only the kept (query, key) pairs; the dense baselines also report their dense
rate, the upper bound the targets are stated against. A baseline that fails is recorded with its
error and the run goes on. Where the user's call that also returns the LSE launches another config
than the ``out``-only call the targets judge (its default budget bounds the LSE error too, so a tanh
entry on the tanh instruction gives way to its exact fallback), a ``kerneltune_lse`` row times it.
Without a cap, ``cudnn_varlen`` (cuDNN with sequence lengths) times the vendor's ragged path on the
history work: its useful TFLOP/s count its own pairs (``inputs.varlen_pairs``), and its ``out`` is
checked on the history rows, where it computes the ranker function.

The dense fraction is also measured paired: after a shape's rows, ours and each dense baseline take
turns for a dozen rounds, and the median of the rounds' time ratios gives ``paired_dense_fraction``.
Those turns (at most 50 calls) are shorter than the lag of the H200's power-cap clock, so each
implementation runs at the clock the other left (1371b475c129:results/ranker_attention/2026-12-04-h200-run-aj/).
Settled rounds follow: each turn first runs its implementation untimed for ``SETTLE_S``, then times one
batch and reads the clocks, and
``settled_dense_fraction`` is taken against the faster baseline of those rounds (the targets judge it
where present: each kernel at its own sustained clock, as a user running it sees it). The unpaired
rows stay: their bound is the fastest of the dense problem's timings, minutes apart, which moved 13%
within one bench (results/ranker_attention/2026-12-03-h200-run-ab/).
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.backends.cuda_jax import cupti_sampler, gpu_clocks, system_stamps
from kerneltune.backends.torch_events import event_sampler
from kerneltune.files.safe_io import MAX_BENCH_BYTES, loads_bounded_json, read_regular_bytes, write_atomic
from kerneltune.seams.measure import (
    MeasureSettings,
    Timing,
    Turn,
    round_ratios,
    sample_until_quiet,
    take_turns,
    turn_medians,
)
from kerneltune.seams.protocols import TakeBatch
from kerneltune.tables.stamps import device_kind, now_stamp

from .. import baselines
from ..accuracy import budget_for
from ..cap import CapMethod
from ..config import Problem
from ..inputs import flops_of_pairs, make_device_tensors, on_history_rows, ranker_bounds, useful_flops, varlen_pairs
from ..source import kernel_source_hash
from .spec import BenchShape, load_spec
from .targets import DENSE_IMPLS

BASELINES = ("flex", "cudnn_dense", "flash_dense", "composite", "jax_mgpu_dense", "cudnn_varlen")


# Paired dense rounds: turns of about this long, this many rounds (each a turn of ours and one of the baseline).
PAIRED_TURN_S = 0.04
PAIRED_ROUNDS = 12
# Settled rounds: each turn runs untimed this long before its timed batch (after 0.25 s turns the clock still
# moved between a kernel's two consecutive turns: 1371b475c129:results/ranker_attention/2026-12-04-h200-run-aj/), this
# many rounds per dense baseline.
SETTLE_S = 0.3
SETTLED_ROUNDS = 4


def _sampler(runnable: baselines.Runnable, cold_l2: bool = False) -> TakeBatch:
    """Kernel times of a JAX runnable under CUPTI, of a torch one between device events."""
    if runnable.framework == "jax":
        return cupti_sampler(runnable.fn, runnable.args, cold_l2)
    return event_sampler(lambda: runnable.fn(*runnable.args), cold_l2)


def _timed(runnable: baselines.Runnable, settings: MeasureSettings) -> Timing:
    return sample_until_quiet(_sampler(runnable, settings.cold_l2), settings, gpu_clocks)


def paired_dense(ours: baselines.Runnable, ours_us: float, dense: dict[str, baselines.Runnable],
                 cold_l2: bool = False, rounds: int = PAIRED_ROUNDS, settle_s: float = 0.0,
                 clocks: Any = None) -> dict[str, dict[str, Any]]:
    """Each dense baseline's time over ours, taking turns with ours round by round (``measure.take_turns``):
    per baseline the median and quartiles of the rounds' ratios and both round medians; with ``clocks``, each
    side's median SM clock at the end of its turns too."""
    batch = max(3, min(50, int(PAIRED_TURN_S / max(ours_us * 1e-6, 1e-6))))
    out = {}
    for name, runnable in dense.items():
        turns = take_turns({"ours": _sampler(ours, cold_l2), name: _sampler(runnable, cold_l2)}, rounds, batch,
                           settle_s=settle_s, clocks=clocks)
        times = turn_medians(turns)
        out[name] = {**round_ratios(times[name], times["ours"]), "ours_us": float(np.median(times["ours"])),
                     "dense_us": float(np.median(times[name]))}
        if settle_s:
            out[name]["settle_s"] = settle_s
        if clocks is not None:
            out[name].update(ours_sm_mhz=_mhz(turns, "ours"), dense_sm_mhz=_mhz(turns, name))
    return out


def _mhz(turns: list[Turn], name: str) -> float | None:
    """The median of the SM clocks read at the end of ``name``'s turns (None where none was read: nvidia-smi
    absent, or "[N/A]")."""
    readings = []
    for t in (t for t in turns if t.name == name):
        try:
            readings.append(float(t.clocks["sm_mhz"]))
        except (KeyError, ValueError):
            continue
    return float(np.median(readings)) if readings else None


def paired_fraction(flops: float, dense_flops: float, pairs: dict[str, dict[str, float]]) -> float:
    """Our useful rate over the dense problem's rate, from the rounds' time ratios (dense over ours): against
    the faster baseline, whose ratio is the smallest."""
    return flops / dense_flops * min(p["ratio"] for p in pairs.values())


def _rel(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def user_call_times(fn: Any, args: tuple[Any, ...], kernel_us: float) -> dict[str, Any]:
    """What the user's jitted call costs on the wall clock beside its kernels' CUPTI time.

    ``call_loop_us``: a loop of calls with one sync at the end (dispatch overlapped with the GPU);
    ``call_single_us``: single calls each followed by a sync (launch latency exposed). Both are medians
    of repeats. ``kernel_sustained_us`` is the call's kernels under CUPTI in a back-to-back run as long as
    one loop. The two alternate, round by round, so both see the GPU in the same sustained state (the
    kernel ran up to 12% slower there than in the sampler's short batches,
    1371b475c129:results/ranker_attention/2026-12-01-h200-run-k/, and one CUPTI pass after all the loops read 0.90 of
    the loop on a power-capped GPU,
    results/ranker_attention/2026-12-02-h200-run-p/). ``kernel_over_call``
    compares the loop against it, so what is left is the cost of the ops between the user and the
    kernel, which ``call_kernels`` names with their median times. The clocks read after the rounds say
    why the figures differ from the sampler's.
    """
    import time

    from jax.experimental.mosaic.gpu import profiler

    from kerneltune.backends.cuda_jax import gpu_clocks

    fn(*args).block_until_ready()
    n = max(10, min(2000, int(0.2 / max(kernel_us * 1e-6, 1e-6))))
    loops, calls, singles = [], [], []  # calls: per round, per call, (kernel name, ms) per kernel
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
        out.block_until_ready()
        loops.append((time.perf_counter() - t0) / n * 1e6)
        calls.append(profiler.measure(fn, aggregate=False, iterations=n)(*args)[1])
    clocks = gpu_clocks()
    names = [name for name, _ in calls[0][0]]
    kernel_ms = np.asarray([[[ms for _, ms in kernels] for kernels in per_call] for per_call in calls])
    sustained = np.median(kernel_ms.sum(axis=2), axis=1) * 1e3  # per round: the median call's kernels, µs
    for _ in range(50):
        t0 = time.perf_counter()
        fn(*args).block_until_ready()
        singles.append((time.perf_counter() - t0) * 1e6)
    loop_us, single_us, kernel_loop_us = (float(np.median(x)) for x in (loops, singles, sustained))
    return {"call_loop_us": loop_us, "call_single_us": single_us, "kernel_us": kernel_us,
            "kernel_sustained_us": kernel_loop_us, "kernel_over_call": kernel_loop_us / loop_us,
            "kernel_over_call_rounds": [float(k / c) for k, c in zip(sustained, loops, strict=True)],
            "clocks_after_loop": clocks,
            "call_kernels": [[name, float(ms) * 1e3]
                             for name, ms in zip(names, np.median(kernel_ms.reshape(-1, len(names)), axis=0),
                                                 strict=True)]}


def bench_shape(shape: BenchShape, method: CapMethod, cap: float | None, which: tuple[str, ...],
                settings: MeasureSettings, seed: int = 0) -> list[dict[str, Any]]:
    import jax
    import jax.numpy as jnp

    from .. import ranker_attention
    from ..api import choose_config
    from ..reference import reference_f32

    problem = Problem(**shape.problem, cap_method=method, cap=cap)
    bounds = ranker_bounds(problem.batch, problem.seq_len, shape.history, shape.candidates,
                           np.random.default_rng(seed))
    if not shape.ragged:  # one history length drawn for every row, so the composite applies
        bounds[:] = bounds[0]
    q, k, v = make_device_tensors(problem, seed)
    jb = jnp.asarray(bounds)
    flops = useful_flops(problem, bounds)
    dense_flops = 4 * problem.batch * problem.q_heads * problem.seq_len ** 2 * problem.head_dim
    rep = problem.heads_per_kv_head

    def references(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        qf, kf, vf = (x[i:i + 1].astype(jnp.float32) for x in (q, k, v))
        with jax.default_matmul_precision("highest"):
            ref, ref_lse = reference_f32(qf, kf, vf, jb[i:i + 1], sm_scale=problem.scale, cap_method=method, cap=cap)
            dense = jax.nn.dot_product_attention(qf, jnp.repeat(kf, rep, 2), jnp.repeat(vf, rep, 2),
                                                 scale=problem.scale)
        return np.asarray(ref), np.asarray(ref_lse), np.asarray(dense)

    # One batch row at a time: the float32 logits of a whole T=8k problem do not fit beside the inputs.
    per_row = [references(i) for i in range(problem.batch)]
    ref, ref_lse, dense_ref = (np.concatenate([r[j] for r in per_row]) for j in range(3))
    del per_row
    rows: list[dict[str, Any]] = []
    paired: dict[str, baselines.Runnable] = {}  # ours and the dense baselines that ran, for the paired rounds

    def record(impl: str, make: Any, reference: np.ndarray | None, dense_rate: bool, user_call: bool = False,
               work: float = flops) -> None:
        row: dict[str, Any] = {"shape": shape.name, "cap_method": method.value, "cap": cap, "impl": impl}
        try:
            runnable, out, *lse = make()  # a third item: the LSE, checked too
            t = _timed(runnable, settings)
            row.update(median_ms=t.median_us / 1e3, spread=t.spread, samples=t.samples,
                       useful_tflops=work / (t.median_us * 1e-6) / 1e12,
                       rel_error=None if reference is None else _rel(out, reference))
            if dense_rate:
                row["dense_tflops"] = dense_flops / (t.median_us * 1e-6) / 1e12
            if lse:
                valid = np.isfinite(ref_lse)  # a NaN in a valid row shows as NaN
                row["lse_max_abs"] = float(np.abs(lse[0][valid] - ref_lse[valid]).max()) if valid.any() else 0.0
            if user_call:
                row.update(user_call_times(runnable.fn, runnable.args, t.median_us))
            if impl == "kerneltune" or impl in DENSE_IMPLS:  # the others' inputs are freed with the row
                paired[impl] = runnable
        except Exception as e:  # a baseline that cannot run is a finding, not a reason to stop
            row.update(error=f"{type(e).__name__}: {e}"[:1000], trace=traceback.format_exc()[-1500:])
        rows.append(row)

    def tuned(return_lse: bool = False) -> tuple[Any, ...]:
        # The user's call: the config comes from the runtime's lookup, traced bounds are clamped.
        fn = jax.jit(lambda a, b, c, d: ranker_attention(a, b, c, d, cap_method=method, cap=cap,
                                                         return_lse=return_lse))
        outs = fn(q, k, v, jb) if return_lse else (fn(q, k, v, jb),)
        return (baselines.Runnable("jax", fn, (q, k, v, jb)), np.asarray(outs[0].astype(jnp.float32)),
                *(np.asarray(x) for x in outs[1:]))

    record("kerneltune", tuned, ref, False, user_call=True)
    out_only, with_lse = (choose_config(problem, None, budget_for(method, lse)) for lse in (False, True))
    if with_lse != out_only:
        record("kerneltune_lse", lambda: tuned(return_lse=True), ref, False)
    if "flex" in which:
        record("flex", lambda: baselines.flex_attention(q, k, v, bounds, problem.scale, method, cap), ref, False)
    if "cudnn_dense" in which:
        record("cudnn_dense", lambda: baselines.dense_sdpa(q, k, v, problem.scale, "cudnn"), dense_ref, True)
    if "flash_dense" in which:
        record("flash_dense", lambda: baselines.dense_sdpa(q, k, v, problem.scale, "flash"), dense_ref, True)
    if "composite" in which and method is CapMethod.NONE and not shape.ragged:
        record("composite", lambda: baselines.composite(q, k, v, bounds, problem.scale), ref, False)
    if "jax_mgpu_dense" in which:
        record("jax_mgpu_dense", lambda: baselines.jax_attention_mgpu(q, k, v, problem.scale), dense_ref, True)
    if "cudnn_varlen" in which and method is CapMethod.NONE:
        record("cudnn_varlen", lambda: baselines.cudnn_varlen(q, k, v, bounds, problem.scale),
               on_history_rows(ref, bounds), False, work=flops_of_pairs(problem, varlen_pairs(bounds)))
    dense = {d: paired[d] for d in DENSE_IMPLS if d in paired}
    if "kerneltune" in paired and dense:
        ours = next(r for r in rows if r["impl"] == "kerneltune")
        # Short turns (comparable with the benches before settled turns), then settled ones with each side's clocks.
        for key, turns in (("paired", dict(rounds=PAIRED_ROUNDS)),
                           ("settled", dict(rounds=SETTLED_ROUNDS, settle_s=SETTLE_S, clocks=gpu_clocks))):
            try:
                pairs = paired_dense(paired["kerneltune"], ours["median_ms"] * 1e3, dense, settings.cold_l2, **turns)
                ours[f"{key}_dense"] = pairs
                ours[f"{key}_dense_fraction"] = paired_fraction(flops, dense_flops, pairs)
            except Exception as e:
                ours[f"{key}_dense_error"] = f"{type(e).__name__}: {e}"[:1000]
    return rows


def run_bench(shapes_path: Path, which: tuple[str, ...], out_dir: Path, settings: MeasureSettings | None = None,
              resume: bool = False) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """Every shape and cap of the bench file; returns the result file, its rows and target verdicts.

    With ``resume`` the day's result file for this device kind is continued: the shapes and caps it holds are
    kept (a shape whose reference failed runs again), provided it was measured on this system, under this
    kernel source and from this shapes file."""
    unknown = set(which) - set(BASELINES)
    if unknown:
        raise ValueError(f"baselines: unknown {sorted(unknown)} (known: {', '.join(BASELINES)})")
    settings = settings or MeasureSettings()
    spec = load_spec(shapes_path)
    stamps = {**system_stamps(), "kernel_hash": kernel_source_hash()}
    out = out_dir / f"{now_stamp()[:10]}-{device_kind(str(stamps['gpu']))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = _resumed_rows(out, stamps, shapes_path) if resume else []
    done = {(r["shape"], r["cap_method"]) for r in rows}
    verdicts: list[dict[str, Any]] = spec.verdicts(rows)
    for shape in spec.shapes:
        for name, c in spec.caps.items():
            method = CapMethod.parse(name)
            if (shape.name, method.value) in done:
                continue
            try:
                rows += bench_shape(shape, method, c if method.needs_cap else None, which, settings)
            except Exception as e:  # e.g. the reference out of memory: the shape is a finding, the run goes on
                rows.append({"shape": shape.name, "cap_method": method.value, "cap": c, "impl": "reference",
                             "error": f"{type(e).__name__}: {e}"[:1000], "trace": traceback.format_exc()[-1500:]})
            # Rewritten after every shape, so a run cut short keeps what it measured: whole or not at all, never
            # through a link or into a file another user owns (``write_atomic``).
            verdicts = spec.verdicts(rows)
            write_atomic(out, json.dumps({"stamps": stamps, "shapes": str(shapes_path), "rows": rows,
                                          "targets": verdicts}, indent=1))
    return out, rows, verdicts


def _resumed_rows(out: Path, stamps: dict[str, Any], shapes_path: Path) -> list[dict[str, Any]]:
    """The rows of a result file to continue, less those of shapes whose reference failed; refused, naming the
    culprit, where the file was measured on another system or kernel source, or from another shapes file."""
    if not out.exists():
        return []
    try:
        previous = loads_bounded_json(read_regular_bytes(out, MAX_BENCH_BYTES, "bench result"), str(out))
        recorded, rows = previous["stamps"], previous["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{out}: cannot resume it: {type(e).__name__}: {e}") from None
    changed = [k for k in sorted(set(stamps) | set(recorded)) if stamps.get(k) != recorded.get(k)]
    if changed:
        k = changed[0]
        raise ValueError(f"{out}: not resumed: its {k} is {recorded.get(k)!r}, this run's {stamps.get(k)!r}")
    if previous.get("shapes") != str(shapes_path):
        raise ValueError(f"{out}: not resumed: it benched {previous.get('shapes')}, this run {shapes_path}")
    failed = {(r["shape"], r["cap_method"]) for r in rows if r.get("impl") == "reference"}
    return [r for r in rows if (r["shape"], r["cap_method"]) not in failed]
