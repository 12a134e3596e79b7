"""Run S probe (issue 23, D=64 per-tile costs): upper bounds of what the persistent kernel's tile boundary costs.

Timing only; the probes are WRONG kernels, never adopted. kernel_old.py is main's kernel; each probe is its
text with one part of the tile boundary removed:
  nowait  -- no wait for the previous tile's O/LSE stores to leave SMEM before the other Q buffer is released
             (a race: the next Q may overwrite an output still being stored);
  nostore -- no O/LSE TMA stores at all (outputs never written; the SMEM writes and the epilogue stay).
"""
import importlib
import json
import os
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import api
from kerneltune.kernels.ranker_attention import kernel_old as OLD
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import (
    make_device_tensors,
    ranker_bounds,
    useful_flops,
)
from kerneltune.measure import MeasureSettings

CAP = 30.0
PKG = Path("kerneltune/kernels/ranker_attention")
api.kernel_source_hash = lambda: "461ffc14c9a1d4b4"  # choose configs as main's runtime does


def probe_module(name, cut):
    src = (PKG / "kernel_old.py").read_text()
    for line in cut:
        assert line in src, line
        src = src.replace(line, "")
    (PKG / f"kernel_probe_{name}.py").write_text(src)
    return importlib.import_module(f"kerneltune.kernels.ranker_attention.kernel_probe_{name}")


_WAIT = "                    plgpu.wait_smem_to_gmem(0, wait_read_only=True)\n"
_STORES = ("                plgpu.copy_smem_to_gmem(qo_smem, out_ref.at[batch, pl.ds(q_base, block_q), q_head])\n",
           "                plgpu.copy_smem_to_gmem(lse_smem, lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])\n")
VARIANTS = [("old", OLD), ("nowait", probe_module("nowait", [_WAIT])),
            ("nostore", probe_module("nostore", [_WAIT, *_STORES]))]


def problem_for(cap, **shape):
    return Problem(**shape, cap_method=cap, cap=None if cap == "none" else CAP)


def configs_for(problem):
    """(label, config): the out-only call's, and under tanh the LSE call's where it differs."""
    out = [("out", api.choose_config(problem, None, budget_for(problem.cap_method, False)))]
    if problem.cap_method.value == "tanh":
        lse = api.choose_config(problem, None, budget_for(problem.cap_method, True))
        if lse != out[0][1]:
            out.append(("lse", lse))
    return out


def emit(out_dir, results, row):
    results.append(row)
    print(json.dumps({k: v for k, v in row.items() if k not in ("clocks", "trace")}), flush=True)
    (out_dir / "ab_tile_probe.json").write_text(json.dumps(results, indent=1))


JOBS = [("d64-b64-t1k", "none"), ("d64-b64-t1k", "tanh"), ("d64-b64-t1k-ragged", "none"),
        ("d64-b64-t1k-ragged", "tanh"), ("d128-b16-t2k-gqa", "none"), ("d128-b16-t2k-gqa", "tanh"),
        ("d128-b8-t4k-ragged", "none")]


def timing(out_dir, results, rounds=2):
    from kerneltune.backends.cuda_jax import time_jax
    settings = MeasureSettings(max_seconds=1.0)
    spec = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
    jobs = []
    for shape, cap in JOBS:
        sh = spec[shape]
        problem = problem_for(cap, **sh.problem)
        bounds = ranker_bounds(problem.batch, problem.seq_len, sh.history, sh.candidates, np.random.default_rng(0))
        if not sh.ragged:
            bounds[:] = bounds[0]
        for label, config in configs_for(problem):
            fns = {}
            for name, mod in VARIANTS:
                try:
                    fns[name] = mod.build_forward(problem, config)
                except Exception as e:
                    emit(out_dir, results, dict(kind="build", shape=shape, cap=cap, call=label, variant=name,
                                                error=repr(e)[:600]))
            emit(out_dir, results, dict(kind="config", shape=shape, cap=cap, call=label, tiles=config.tile()))
            jobs.append((shape, cap, label, problem, bounds, fns))
    for rnd in range(rounds):
        for shape, cap, label, problem, bounds, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            jb = jnp.asarray(bounds)
            flops = useful_flops(problem, bounds)
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                row = dict(kind="timing", shape=shape, cap=cap, call=label, variant=name, round=rnd)
                try:
                    jax.block_until_ready(fn(q, k, v, jb))
                    tm = time_jax(fn, (q, k, v, jb), settings)
                    row.update(median_us=tm.median_us, spread=tm.spread, samples=tm.samples, clocks=tm.clocks,
                               tflops=flops / (tm.median_us * 1e-6) / 1e12)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                emit(out_dir, results, row)


def summary(results):
    print("\n== accuracy (ok / rel_fro / lse_max per gain) ==")
    acc = {}
    for r in results:
        if r["kind"] == "accuracy":
            acc.setdefault((r["d"], r["t"], r["cap"], r["call"], r["variant"]), []).append(
                r.get("error", "")[:80] or f"{'ok' if r['ok'] else 'FAIL'} {r['rel_fro']:.2e} {r['lse_max']:.1e}")
    n_ok = sum(1 for r in results if r["kind"] == "accuracy" and r.get("ok"))
    n_all = sum(1 for r in results if r["kind"] == "accuracy")
    for key, v in acc.items():
        print(f"D{key[0]} T{key[1]} {key[2]:5s} {key[3]:4s} {key[4]:6s} " + " | ".join(v))
    print(f"accuracy: {n_ok} of {n_all} ok")
    print("\n== timing: median us per round, time vs old ==")
    by = {}
    for r in results:
        if r["kind"] == "timing" and "error" not in r:
            by.setdefault((r["shape"], r["cap"], r["call"]), {}).setdefault(r["variant"], []).append(r)
    for (shape, cap, call), vs in by.items():
        ref = np.median([x["median_us"] for x in vs.get("old", [{"median_us": np.nan}])])
        for name, rs in vs.items():
            us = [x["median_us"] for x in rs]
            print(f"{shape:20s} {cap:5s} {call:4s} {name:6s} {' '.join(f'{u:8.1f}' for u in us)}"
                  f"  x{np.median(us) / ref:.3f}")
    for r in results:
        if "error" in r:
            print("ERROR", r["kind"], r.get("shape", r.get("t")), r.get("cap"), r.get("variant"), r["error"][:160])


if __name__ == "__main__":
    out_dir = Path(os.environ.get("OUT", "/tmp/ab_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    t0 = time.time()
    try:
        timing(out_dir, results)
    finally:
        summary(results)
        print("total s", round(time.time() - t0))
