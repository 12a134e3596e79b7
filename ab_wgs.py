"""Run R A/B (issue 23, idea 1): three compute warpgroups (192-row tiles) at D=64 against today's two.

kernel_old.py is HEAD's kernel (before compute_wgs), kernel.py the working tree's. Per cap (none, tanh):
1. accuracy: every variant on adversarial bounds at T=512 (a partial last tile for 3 warpgroups) and T=1024,
   outputs poisoned with NaN, against the float64 oracle (verify.compare, the sweep's check);
2. timing: the bench's two D=64 shapes (even and ragged), every variant and both dense baselines, CUPTI under
   the engine's stopping rule, rounds alternating; plus old against new at the shipped D=128 tiles.
"""
import json
import os
import sys
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import baselines
from kerneltune.kernels.ranker_attention import kernel as NEW
from kerneltune.kernels.ranker_attention import kernel_old as OLD
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import (
    adversarial_bounds,
    make_device_tensors,
    ranker_bounds,
    useful_flops,
)
from kerneltune.kernels.ranker_attention.reference import reference_f64
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

CAP = 30.0
BASE = dict(block_q=64, persistent=True, p_in_registers=True, fast_math=True)
SHIPPED = {"none": dict(block_kv=128, num_stages=3), "tanh": dict(block_kv=64, num_stages=3, static_max=True,
                                                                  cap_impl="tanh_instr")}
CAPPED = dict(static_max=True, cap_impl="tanh_instr")


def variants(cap):
    """Run R call 4: the turn ring (schedule_barrier with three warpgroups) against call 1's best."""
    extra = CAPPED if cap == "tanh" else {}
    out = [("old-shipped", OLD, {**BASE, **SHIPPED[cap]}), ("new-shipped", NEW, {**BASE, **SHIPPED[cap]})]
    for bkv, st, sched in ((128, 2, False), (128, 2, True), (128, 3, True), (64, 2, True), (64, 3, True)):
        out.append((f"3wg-kv{bkv}-s{st}-{'ring' if sched else 'free'}", NEW,
                    {**BASE, **extra, "block_kv": bkv, "num_stages": st, "schedule_barrier": sched,
                     "compute_wgs": 3}))
    return out


def problem_for(cap, **shape):
    return Problem(**shape, cap_method=cap, cap=None if cap == "none" else CAP)


def config_for(mod, problem, tiles):
    tiles = dict(tiles)
    if mod is OLD:
        tiles.pop("compute_wgs", None)
    return KernelConfig.for_problem(problem, **tiles)


def emit(out_dir, results, row):
    results.append(row)
    print(json.dumps({k: v for k, v in row.items() if k not in ("clocks", "trace")}), flush=True)
    (out_dir / "ab_wgs.json").write_text(json.dumps(results, indent=1))


def accuracy(out_dir, results):
    rng = np.random.default_rng(11)
    for t in (512, 1024):
        bounds = adversarial_bounds(t, rng)
        b = bounds.shape[0]
        for cap in ("none", "tanh"):
            problem = problem_for(cap, batch=b, seq_len=t, q_heads=4, kv_heads=2, head_dim=64)
            data = []
            for gain in (1.0, 4.0):
                q = (rng.standard_normal((b, t, 4, 64)) * gain).astype(np.float32)
                k = (rng.standard_normal((b, t, 2, 64)) * gain).astype(np.float32)
                v = rng.standard_normal((b, t, 2, 64)).astype(np.float32)
                qb, kb, vb = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
                f = [np.asarray(x.astype(jnp.float32), np.float64) for x in (qb, kb, vb)]
                data.append((gain, (qb, kb, vb), reference_f64(*f, bounds, sm_scale=problem.scale,
                                                              cap_method=problem.cap_method, cap=problem.cap)))
            for name, mod, tiles in variants(cap):
                try:
                    fn = mod.build_forward(problem, config_for(mod, problem, tiles), poisoned=True)
                except Exception as e:
                    emit(out_dir, results, dict(kind="accuracy", t=t, cap=cap, variant=name, error=repr(e)[:600]))
                    continue
                for gain, (qb, kb, vb), (ro, rl) in data:
                    row = dict(kind="accuracy", t=t, cap=cap, variant=name, gain=gain)
                    try:
                        out, lse = fn(qb, kb, vb, jnp.asarray(bounds), jnp.full(qb.shape, jnp.nan, qb.dtype),
                                      jnp.full((b, 4, t), jnp.nan, jnp.float32))
                        c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), ro, rl, bounds,
                                    "bfloat16", problem.cap_method)
                        row.update(ok=c.ok, errors=list(c.errors)[:3], max_abs=c.max_abs, rel_fro=c.rel_fro,
                                   lse_max=c.lse_max_abs)
                    except Exception as e:
                        row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                    emit(out_dir, results, row)


def timing(out_dir, results, rounds=2):
    from kerneltune.backends.cuda_jax import time_jax
    from kerneltune.backends.torch_events import time_torch
    settings = MeasureSettings(max_seconds=1.0)
    spec = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
    jobs = []  # (shape name, problem, bounds, [(label, fn)])
    for cap in ("none", "tanh"):
        fns = {}
        for shape in ("d64-b64-t1k", "d64-b64-t1k-ragged"):
            sh = spec[shape]
            problem = problem_for(cap, **sh.problem)
            bounds = ranker_bounds(problem.batch, problem.seq_len, sh.history, sh.candidates,
                                   np.random.default_rng(0))
            if not sh.ragged:
                bounds[:] = bounds[0]
            if not fns:
                for name, mod, tiles in variants(cap):
                    try:
                        fns[name] = mod.build_forward(problem, config_for(mod, problem, tiles))
                    except Exception as e:
                        emit(out_dir, results, dict(kind="build", cap=cap, variant=name, error=repr(e)[:600]))
            jobs.append((shape, cap, problem, bounds, dict(fns)))
    sh = spec["d128-b4-t8k"]
    problem = problem_for("none", **sh.problem)
    bounds = ranker_bounds(problem.batch, problem.seq_len, sh.history, sh.candidates, np.random.default_rng(0))
    bounds[:] = bounds[0]
    d128 = {**BASE, "block_kv": 128, "num_stages": 2}
    jobs.append(("d128-b4-t8k", "none", problem, bounds,
                 {n: m.build_forward(problem, config_for(m, problem, d128)) for n, m in (("old-shipped", OLD),
                                                                                       ("new-shipped", NEW))}))
    dense = {}
    for rnd in range(rounds):
        for shape, cap, problem, bounds, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            jb = jnp.asarray(bounds)
            flops = useful_flops(problem, bounds)
            if shape not in dense:
                dense_flops = 4 * problem.batch * problem.q_heads * problem.seq_len ** 2 * problem.head_dim
                best = 0.0
                for impl, r in (("jax_mgpu", baselines.jax_attention_mgpu(q, k, v, problem.scale)[0]),
                                ("cudnn", baselines.dense_sdpa(q, k, v, problem.scale, "cudnn")[0])):
                    tm = (time_jax(r.fn, r.args, settings) if r.framework == "jax"
                          else time_torch(lambda r=r: r.fn(*r.args), settings))
                    best = max(best, dense_flops / (tm.median_us * 1e-6) / 1e12)
                    emit(out_dir, results, dict(kind="dense", shape=shape, impl=impl, median_us=tm.median_us))
                dense[shape] = best
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                row = dict(kind="timing", shape=shape, cap=cap, variant=name, round=rnd)
                try:
                    jax.block_until_ready(fn(q, k, v, jb))
                    tm = time_jax(fn, (q, k, v, jb), settings)
                    row.update(median_us=tm.median_us, spread=tm.spread, samples=tm.samples, clocks=tm.clocks,
                               dense_frac=flops / (tm.median_us * 1e-6) / 1e12 / dense[shape])
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                emit(out_dir, results, row)


def summary(results):
    print("\n== accuracy (ok / rel_fro / lse_max per gain) ==")
    acc = {}
    for r in results:
        if r["kind"] == "accuracy":
            acc.setdefault((r["t"], r["cap"], r["variant"]), []).append(
                r.get("error", "")[:80] or f"{'ok' if r['ok'] else 'FAIL'} {r['rel_fro']:.2e} {r['lse_max']:.1e}")
    for key, v in acc.items():
        print(f"T{key[0]} {key[1]:5s} {key[2]:24s} " + " | ".join(v))
    print("\n== timing: median us per round, vs new-shipped, dense fraction ==")
    by = {}
    for r in results:
        if r["kind"] == "timing" and "error" not in r:
            by.setdefault((r["shape"], r["cap"]), {}).setdefault(r["variant"], []).append(r)
    for (shape, cap), vs in by.items():
        ref = np.median([x["median_us"] for x in vs.get("new-shipped", [{"median_us": np.nan}])])
        for name, rs in sorted(vs.items(), key=lambda kv: np.median([x["median_us"] for x in kv[1]])):
            us = [x["median_us"] for x in rs]
            print(f"{shape:20s} {cap:5s} {name:24s} {' '.join(f'{u:8.1f}' for u in us)}  x{np.median(us) / ref:.3f}"
                  f"  frac {np.median([x['dense_frac'] for x in rs]):.3f}")
    for r in results:
        if "error" in r:
            print("ERROR", r["kind"], r.get("shape", r.get("t")), r.get("cap"), r["variant"], r["error"][:160])


if __name__ == "__main__":
    out_dir = Path(os.environ.get("OUT", "/tmp/ab_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    t0 = time.time()
    try:
        if "timing-only" not in sys.argv:
            accuracy(out_dir, results)
            print("accuracy done", round(time.time() - t0), flush=True)
        if "accuracy-only" not in sys.argv:
            timing(out_dir, results)
    finally:
        summary(results)
        print("total s", round(time.time() - t0))
