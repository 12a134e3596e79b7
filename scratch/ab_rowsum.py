"""Attempt 18 (issue 23; run AG): each row's sum of P on the tensor core (`rowsum_mma`: P times a block of ones
into an 8-column accumulator kept across the tile) instead of an FADD per logit and the row reduction.

Why (run AG call 1, Nsight Compute on the shipped kernel): no pipe is near its peak (D=64 tanh: special-function
unit 50%, FMA 29%, tensor 36%; issue slots 54%); the steady KV step is one warp's instruction stream at a time
(655 instructions a warp at D=64 tanh), and its FADDs include one per logit for the row sum. The tensor core has
room for a 64x8 wgmma per step. The row sum then adds the bfloat16 P that P.V multiplies (not the float32 p): out
is normalised by the same P it sums, the LSE carries P's rounding (up to 2^-8 relative).

Both variants are this tree at the runtime's configs from the shipped table; `rowsum_mma=False` lowers to main's
programs (digests equal to main's, checked on the CPU), `True` is the attempt.
1. accuracy: adversarial bounds T=1024 and 200 ragged rows T=512, gains 1 and 4 (q and k scaled, as the sweep's
   check), outputs poisoned, float64 oracle (verify.compare), D=64 and D=128 with tanh and without a cap;
2. timing: CUPTI under the engine's stopping rule, rounds alternating the two until AB_SECONDS run out.

The rule (written before the run): the attempt goes on to adoption work when
- out: every check's out within compare's tolerance and its relative Frobenius error at most 2x the shipped
  variant's (the default out budget); the LSE is reported, not judged here (an LSE over the check's 1e-3 would
  make the field one that serves only calls returning `out`, as the tanh instruction does under `tanh`);
- time: the D=64 rows' geometric mean at most 0.97 with none over 1.005, and no D=128 row over 1.01.
Usage: OUT=dir AB_SECONDS=s python scratch/ab_rowsum.py
"""

import json
import math
import os
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import api
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import adversarial_bounds, make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f64
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

MAIN_HASH = "9443bda36b5a7bfd"  # the shipped table's entries are keyed by main's kernel
api.kernel_source_hash = lambda: MAIN_HASH
OUT = Path(os.environ.get("OUT", "."))
SPEC = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
CAPS = {"tanh": 30.0, "none": None}
D64 = [("d64-b64-t1k", "tanh", 0), ("d64-b64-t1k", "none", 0), ("d64-b64-t1k-ragged", "tanh", 0),
       ("d64-b64-t1k-ragged", "tanh", 1), ("d64-b64-t1k-ragged", "none", 0)]
D128 = [("d128-b16-t2k-gqa", "tanh", 0), ("d128-b16-t2k-gqa", "none", 0), ("d128-b4-t8k", "none", 0),
        ("d128-b8-t4k-ragged", "none", 0)]
VARIANTS = {"shipped": False, "rowsum": True}


def problem_for(shape, cap):
    return Problem(**SPEC[shape].problem, cap_method=cap, cap=CAPS[cap])


def config_for(problem, rowsum):
    shipped = api.choose_config(problem, None, budget_for(problem.cap_method, False))
    return KernelConfig.for_problem(problem, **{**shipped.tile(), "rowsum_mma": rowsum})


def emit(results, row):
    results.append(row)
    print(json.dumps({k: v for k, v in row.items() if k not in ("clocks", "trace")}), flush=True)
    (OUT / "ab_rowsum.json").write_text(json.dumps(results, indent=1))


def accuracy(results):
    rng = np.random.default_rng(18)
    cases = [("adversarial", 1024, adversarial_bounds(1024, rng)),
             ("ragged-200", 512, ranker_bounds(200, 512, (64, 448), 64, rng))]
    for shape, cap, d in (("d64-b64-t1k", "tanh", 64), ("d64-b64-t1k", "none", 64),
                          ("d128-b16-t2k-gqa", "tanh", 128), ("d128-b16-t2k-gqa", "none", 128)):
        tiles = {n: config_for(problem_for(shape, cap), r).tile() for n, r in VARIANTS.items()}
        for case, t, bounds in cases:
            b = bounds.shape[0]
            problem = Problem(batch=b, seq_len=t, q_heads=4, kv_heads=2, head_dim=d, cap_method=cap, cap=CAPS[cap])
            q = rng.standard_normal((b, t, 4, d)).astype(np.float32)
            k = rng.standard_normal((b, t, 2, d)).astype(np.float32)
            v = rng.standard_normal((b, t, 2, d)).astype(np.float32)
            fns = {name: build_forward(problem, KernelConfig.for_problem(problem, **tiles[name]), poisoned=True)
                   for name in VARIANTS}
            for gain in (1.0, 4.0):
                qb, kb, vb = (jnp.asarray(x, jnp.bfloat16) for x in (q * gain, k * gain, v))
                f = [np.asarray(x.astype(jnp.float32), np.float64) for x in (qb, kb, vb)]
                row = dict(kind="accuracy", cap=cap, head_dim=d, case=case, gain=gain, tiles=tiles["rowsum"])
                try:
                    ro, rl = reference_f64(*f, bounds, sm_scale=problem.scale, cap_method=problem.cap_method,
                                           cap=problem.cap)
                    cs = {}
                    for name, fn in fns.items():
                        out, lse = fn(qb, kb, vb, jnp.asarray(bounds), jnp.full(qb.shape, jnp.nan, qb.dtype),
                                      jnp.full((b, 4, t), jnp.nan, jnp.float32))
                        cs[name] = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), ro, rl, bounds,
                                           "bfloat16", problem.cap_method)
                    c, s = cs["rowsum"], cs["shipped"]
                    out_errors = [e for e in c.errors if not e.startswith("lse: max error")]
                    row.update(out_ok=not out_errors and c.rel_fro <= 2 * s.rel_fro, shipped_ok=s.ok,
                               errors=list(c.errors)[:3], rel_fro=c.rel_fro, lse_max=c.lse_max_abs,
                               shipped_rel_fro=s.rel_fro, shipped_lse_max=s.lse_max_abs)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                emit(results, row)


def timing(results, deadline):
    from kerneltune.backends.cuda_jax import time_jax

    settings = MeasureSettings(max_seconds=1.0)
    jobs = []
    for shape, cap, seed in D64 + D128:
        problem = problem_for(shape, cap)
        spec = SPEC[shape]
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates,
                               np.random.default_rng(seed))
        if not spec.ragged:  # the bench's rule: one history length for every row
            bounds[:] = bounds[0]
        jb = jnp.asarray(bounds)
        q, k, v = make_device_tensors(problem, 0)
        fns = {}
        for name, rowsum in VARIANTS.items():
            try:
                fns[name] = build_forward(problem, config_for(problem, rowsum))
                jax.block_until_ready(fns[name](q, k, v, jb))
            except Exception as e:
                emit(results, dict(kind="build", shape=shape, cap=cap, seed=seed, variant=name,
                                   error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:]))
                fns.pop(name, None)
        emit(results, dict(kind="config", shape=shape, cap=cap, seed=seed, tiles=config_for(problem, True).tile()))
        jobs.append((shape, cap, seed, problem, jb, fns))
    rnd = 0
    while time.time() < deadline:
        for shape, cap, seed, problem, jb, fns in jobs:
            if time.time() >= deadline:
                break
            q, k, v = make_device_tensors(problem, 0)
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                row = dict(kind="timing", shape=shape, cap=cap, seed=seed, variant=name, round=rnd)
                try:
                    tm = time_jax(fn, (q, k, v, jb), settings)
                    row.update(median_us=tm.median_us, spread=tm.spread, samples=tm.samples, clocks=tm.clocks)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                emit(results, row)
        rnd += 1


def decide(results):
    acc = [r for r in results if r["kind"] == "accuracy"]
    bad = [r for r in acc if not r.get("out_ok")]
    print(f"\n== accuracy: out ok in {len(acc) - len(bad)} of {len(acc)} ==")
    for r in acc:
        print("ok" if r.get("out_ok") else "NOT OK", r["cap"], r["head_dim"], r["case"], f"gain {r['gain']:g}",
              f"rel_fro {r.get('rel_fro', float('nan')):.2e} (shipped {r.get('shipped_rel_fro', float('nan')):.2e})",
              f"lse_max {r.get('lse_max', float('nan')):.2e} (shipped {r.get('shipped_lse_max', float('nan')):.2e})",
              r.get("errors") or "", r.get("error", "")[:300])
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing" and "error" not in r:
            t[(r["shape"], r["cap"], r["seed"])][r["variant"]].append(r["median_us"])
    ratios = {k: median(v["rowsum"]) / median(v["shipped"]) for k, v in t.items() if v["rowsum"] and v["shipped"]}
    print("== timing: rowsum over shipped, medians over rounds ==")
    for k, x in ratios.items():
        pairs = [p / m for p, m in zip(t[k]["rowsum"], t[k]["shipped"], strict=False)]
        q1, q3 = np.percentile(pairs, [25, 75]) if pairs else (float("nan"),) * 2
        print(*k, f"shipped {median(t[k]['shipped']):.1f} us, rowsum x{x:.3f} (per-round quartiles {q1:.3f}-{q3:.3f}),"
              f" rounds {len(t[k]['rowsum'])}")
    d64 = [x for k, x in ratios.items() if k in D64]
    d128 = [x for k, x in ratios.items() if k in D128]
    gm = math.exp(sum(map(math.log, d64)) / len(d64)) if d64 else float("nan")
    errors = [r for r in results if "error" in r]
    print(f"D=64 geomean x{gm:.3f} over {len(d64)}, worst x{max(d64, default=float('nan')):.3f}; "
          f"D=128 {[round(x, 3) for x in d128]}; errors {len(errors)}")
    complete = len(d64) == len(D64) and len(d128) == len(D128)
    ok = bool(acc and not bad and not errors and complete and gm <= 0.97 and max(d64) <= 1.005
              and max(d128) <= 1.01)
    print("GO ON TO ADOPTION" if ok else "DO NOT ADOPT")
    return ok


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    accuracy(results)
    timing(results, time.time() + float(os.environ.get("AB_SECONDS", "300")))
    sys.exit(0 if decide(results) else 1)
