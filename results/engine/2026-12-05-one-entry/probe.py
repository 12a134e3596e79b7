"""Whether a candidate can be timed on its checked entry point (issue 56: one compile a candidate, not two).

For every winner and runner-up of the shipped ranker table, on one H200: both entry points compiled with their
phases (trace, lower, compile), the kernels each call launches (CUPTI names), their outputs compared bitwise,
and their times in alternating turns (the checked entry on NaN out/lse buffers, as ``timed_call`` gives it,
against the plain entry the runtime launches), with the ratio of the round medians.
With ``--references``: three buckets' float32 reference (one check case at gain 1), eager as the check computes
it against ``jax.jit``, each called twice, with the largest difference between the two.
Usage: python probe.py OUTDIR [--references]"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.mosaic.gpu import profiler

from kerneltune.backends.cuda_jax import cupti_sampler
from kerneltune.kernels.ranker_attention.config import KernelConfig
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.kernels.ranker_attention.program import arg_specs
from kerneltune.measure import round_ratios, take_turns, turn_medians

TABLE = Path("kerneltune/tables/shipped/nvidia-h200/ranker_attention.json")


def phases(problem, config, poisoned):
    t0 = time.perf_counter()
    traced = build_forward(problem, config, poisoned=poisoned).trace(*arg_specs(problem, poisoned=poisoned))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    return compiled, {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2}


def items():
    table = json.loads(TABLE.read_text())
    for name, e in sorted(table["entries"].items()):
        configs = [("winner", e["config"])] + [(f"runner_up{i}", r.get("config", r.get("tiles")))
                                               for i, r in enumerate(e.get("runner_ups", []))]
        for role, tiles in configs:
            yield e.get("bucket_name", name), role, e["problem"], e.get("inputs", {}), tiles


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for bucket, role, problem_d, spec, tiles in items():
        problem = PLUGIN.problem(problem_d)
        config = KernelConfig.for_problem(problem, **tiles)
        row = {"bucket": bucket, "role": role, "tiles": tiles}
        plain, row["plain_phases"] = phases(problem, config, False)
        poisoned, row["poisoned_phases"] = phases(problem, config, True)
        inputs = PLUGIN.make_inputs(problem, spec, 3)
        fn, args = PLUGIN.timed_call({"poisoned": poisoned}, inputs)
        assert fn is poisoned
        plain_args = args[:4]
        (po, pl), p_kernels = profiler.measure(fn, aggregate=False)(*args)
        (qo, ql), q_kernels = profiler.measure(plain, aggregate=False)(*plain_args)
        row["timed_kernels"] = [n for n, _ in p_kernels]
        row["plain_kernels"] = [n for n, _ in q_kernels]
        row["same_out"] = bool(np.array_equal(np.asarray(po.astype(jnp.float32)), np.asarray(qo.astype(jnp.float32))))
        row["same_lse"] = bool(np.array_equal(np.asarray(pl), np.asarray(ql)))
        row["nan_left"] = int(np.isnan(np.asarray(po.astype(jnp.float32))).sum() + np.isnan(np.asarray(pl)).sum())
        turns = take_turns({"timed": cupti_sampler(fn, args, False), "plain": cupti_sampler(plain, plain_args, False)},
                           rounds=10, batch=20, warmup=5, settle_s=0.1)
        med = turn_medians(turns)
        row["timed_us"], row["plain_us"] = float(np.median(med["timed"])), float(np.median(med["plain"]))
        row["ratio"] = round_ratios(med["timed"], med["plain"])
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "probe.json").write_text(json.dumps(rows, indent=1))
    print(f"{'bucket':24} {'role':10} {'plain c':>8} {'pois c':>8} {'plain us':>9} {'timed us':>9} "
          f"{'ratio':>6} {'p25':>6} {'p75':>6} same kernels")
    for r in rows:
        pc = sum(r["plain_phases"].values())
        qc = sum(r["poisoned_phases"].values())
        print(f"{r['bucket']:24} {r['role']:10} {pc:8.2f} {qc:8.2f} {r['plain_us']:9.1f} {r['timed_us']:9.1f} "
              f"{r['ratio']['ratio']:6.4f} {r['ratio']['p25']:6.4f} {r['ratio']['p75']:6.4f} "
              f"{r['same_out'] and r['same_lse']} {r['timed_kernels'] == r['plain_kernels']}")
    ratios = [r["ratio"]["ratio"] for r in rows]
    both = np.median([sum(r["plain_phases"].values()) + sum(r["poisoned_phases"].values()) for r in rows])
    alone = np.median([sum(r["poisoned_phases"].values()) for r in rows])
    print(f"items {len(rows)}; ratio median {np.median(ratios):.4f} min {min(ratios):.4f} max {max(ratios):.4f}; "
          f"compile s a candidate: both {both:.2f}, poisoned alone {alone:.2f}; "
          f"jax {jax.__version__} on {jax.devices()[0].device_kind}")


def references(out: Path) -> None:
    from kerneltune.kernels.ranker_attention.reference import reference_f32

    table = json.loads(TABLE.read_text())["entries"].values()
    rows = []
    for e in table:
        if e["bucket_name"] not in ("d128-clamp-very-long", "d128-gqa-none-short", "d64-none-many-rows"):
            continue
        problem = PLUGIN.problem(e["problem"])
        inputs = PLUGIN.make_inputs(problem, e.get("inputs", {}), 3)
        step = max(1, int(2.5e9 // (problem.q_heads * problem.seq_len ** 2 * 4)))
        qf, kf, vf = (x[:step].astype(jnp.float32) for x in (inputs.q, inputs.k, inputs.v))
        jb = jnp.asarray(inputs.check_bounds[0][:step])
        kw = dict(sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
        jitted = jax.jit(lambda q, k, v, b, kw=kw: reference_f32(q, k, v, b, **kw))
        row = {"bucket": e["bucket_name"], "rows": step}
        with jax.default_matmul_precision("highest"):
            for name, fn in (("eager", lambda *a, kw=kw: reference_f32(*a, **kw)), ("jit", jitted)):
                for n in (1, 2):
                    t0 = time.perf_counter()
                    got = jax.block_until_ready(fn(qf, kf, vf, jb))
                    row[f"{name}{n}_s"] = time.perf_counter() - t0
                row[name] = got
        (eo, el), (jo, jl) = row.pop("eager"), row.pop("jit")
        row["max_abs_out_diff"] = float(jnp.max(jnp.abs(eo - jo)))
        finite = jnp.isfinite(el)
        row["max_abs_lse_diff"] = float(jnp.max(jnp.where(finite, jnp.abs(el - jl), 0.0)))
        row["same_inf"] = bool(jnp.array_equal(finite, jnp.isfinite(jl)))
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "references.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[2:] == ["--references"]:
        references(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]))
