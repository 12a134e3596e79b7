"""Attempt 12 A/B (issue 23): the pairs the D=64 ragged rows compute and throw away (run S: 1.285 computed per
kept pair at 128-key blocks, 1.20 at 64).

kernel_old.py is main's kernel; the variants are kernel.py with its two A/B switches set per variant:
  off  -- both off: main's computation through the new code (a control of the code change itself);
  skip -- a compute warpgroup whose 64 rows are all padding follows the K/V ring without computing, its
          partner computes the tile alone (~5% of the D=64 ragged rows' work);
  half -- the last history block, when only its first half holds history keys, as a 64-key step (128-key
          blocks only: Mosaic GPU's wgmma takes K in multiples of 64; ~5% of the same rows' work);
  diag -- each candidate's own key as a row-wise dot product in registers, not a whole QK and P.V block
          (every candidate tile: ~5% of the D=64 ragged rows' work, ~1.3% at D=128 T=2k, run H);
  all  -- the three together.
AB_VARIANTS (comma-separated names, default all six) picks the variants of a call, e.g. old,off,all first.
Configs are the runtime's choice on the shipped table (hash pinned to main's), the out-only call's and the
LSE call's under tanh.
1. accuracy: every variant at the shipped D=64 and D=128 tiles on adversarial bounds (which hold tiles whose first
   or second warpgroup is all padding) at T=512 and 1024, gains 1 and 4, outputs poisoned, against the float64
   oracle (verify.compare);
2. timing: the bench's six shapes, CUPTI under the engine's stopping rule, rounds alternating in order.
"""
import importlib
import json
import os
import re
import sys
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
    adversarial_bounds,
    make_device_tensors,
    ranker_bounds,
    useful_flops,
)
from kerneltune.kernels.ranker_attention.reference import reference_f64
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

CAP = 30.0
PKG = Path("kerneltune/kernels/ranker_attention")
api.kernel_source_hash = lambda: "461ffc14c9a1d4b4"  # choose configs as main's runtime does


def variant_module(name, skip, half, diag):
    src = (PKG / "kernel.py").read_text()
    for switch, value in (("_SKIP_PADDING_WARPGROUPS", skip), ("_HALF_TAIL_STEP", half), ("_ROW_DIAGONAL", diag)):
        src, n = re.subn(rf"^{switch} = \w+$", f"{switch} = {value}", src, flags=re.M)
        assert n == 1, switch
    (PKG / f"kernel_ab_{name}.py").write_text(src)
    return importlib.import_module(f"kerneltune.kernels.ranker_attention.kernel_ab_{name}")


SWITCHES = {"off": (False, False, False), "skip": (True, False, False), "half": (False, True, False),
            "diag": (False, False, True), "all": (True, True, True)}
VARIANTS = [(name, OLD if name == "old" else variant_module(name, *SWITCHES[name]))
            for name in os.environ.get("AB_VARIANTS", "old,off,skip,half,diag,all").split(",")]


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
    (out_dir / "ab_padding_wgs.json").write_text(json.dumps(results, indent=1))


def accuracy(out_dir, results):
    rng = np.random.default_rng(12)
    spec = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
    for head_dim, shape_name in ((64, "d64-b64-t1k"), (128, "d128-b16-t2k-gqa")):
        for t in ((512, 1024) if head_dim == 64 else (1024,)):
            bounds = adversarial_bounds(t, rng)
            b = bounds.shape[0]
            for cap in ("none", "tanh"):
                problem = problem_for(cap, batch=b, seq_len=t, q_heads=4, kv_heads=2, head_dim=head_dim)
                tiles_from = problem_for(cap, **spec[shape_name].problem)
                data = []
                for gain in (1.0, 4.0):
                    q = (rng.standard_normal((b, t, 4, head_dim)) * gain).astype(np.float32)
                    k = (rng.standard_normal((b, t, 2, head_dim)) * gain).astype(np.float32)
                    v = rng.standard_normal((b, t, 2, head_dim)).astype(np.float32)
                    qb, kb, vb = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
                    f = [np.asarray(x.astype(jnp.float32), np.float64) for x in (qb, kb, vb)]
                    data.append((gain, (qb, kb, vb), reference_f64(*f, bounds, sm_scale=problem.scale,
                                                                  cap_method=problem.cap_method, cap=problem.cap)))
                for label, shipped in configs_for(tiles_from):
                    config = shipped.for_problem(problem, **shipped.tile())
                    for name, mod in VARIANTS[1:]:
                        fn = mod.build_forward(problem, config, poisoned=True)
                        for gain, (qb, kb, vb), (ro, rl) in data:
                            row = dict(kind="accuracy", d=head_dim, t=t, cap=cap, call=label, variant=name,
                                       gain=gain)
                            try:
                                out, lse = fn(qb, kb, vb, jnp.asarray(bounds),
                                              jnp.full(qb.shape, jnp.nan, qb.dtype),
                                              jnp.full((b, 4, t), jnp.nan, jnp.float32))
                                c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), ro, rl, bounds,
                                            "bfloat16", problem.cap_method)
                                row.update(ok=c.ok, errors=list(c.errors)[:3], rel_fro=c.rel_fro,
                                           lse_max=c.lse_max_abs)
                            except Exception as e:
                                row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                            emit(out_dir, results, row)


JOBS = [("d64-b64-t1k-ragged", "none"), ("d64-b64-t1k-ragged", "tanh"), ("d64-b64-t1k", "none"),
        ("d64-b64-t1k", "tanh"), ("d128-b8-t4k-ragged", "none"), ("d128-b8-t4k-ragged", "tanh"),
        ("d128-b8-t4k-gqa8", "none"), ("d128-b16-t2k-gqa", "tanh")]


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
        if "timing-only" not in sys.argv:
            accuracy(out_dir, results)
            print("accuracy done", round(time.time() - t0), flush=True)
        if "accuracy-only" not in sys.argv:
            timing(out_dir, results)
    finally:
        summary(results)
        print("total s", round(time.time() - t0))
