"""Attempt 17e (issue 23; prepared after run AE, never run): attempt 17d at D=64 only. The persistent kernel's
memory warpgroup stores padding tiles (variant B; in interpret mode the compute warpgroups write its two SMEM
blocks) where `config.stores_padding_in_memory_warpgroup` says (head dim 64), and the cubic's exponent is the
funnel shift that keeps it on the integer pipe (attempt 15). At D=128 the lowered programs are main's (`kerneltune
rekey` carries all 14 D=128 programs of the shipped table), so its rows here are a check of the measurement.

Against main's kernel (main_ranker/, a copy of main's ranker package), both at the runtime's configs on the
shipped table:
1. accuracy (AB_ACCURACY=quick: adversarial bounds T=1024 and 300 rows two thirds empty T=512, D=64 and D=128
   tanh), outputs poisoned (NaN), against the float64 oracle (verify.compare), and bitwise against main's;
2. timing: CUPTI under the engine's stopping rule, rounds alternating in order until AB_SECONDS run out.

The rule (written after run AE measured attempt 17d, which applied the padding path at every head dim, and before
any run of this build). The bench's D=64 ragged tanh row misses its 0.62 target by 1% while its even row is 0.75,
20% over it: a change that trades a little of the even rows for the ragged ones is worth it, within bounds.
Adopt when every accuracy check holds with outputs bitwise equal to main's, and
- the D=64 ragged rows (tanh, 3 draws; none) have a geometric mean of at most 0.985 and none over 1.0;
- the D=64 even rows (tanh, none) are at most 1.010, and the ragged geomean's gain is at least twice the worst
  even row's loss;
- the D=128 rows (ragged tanh, GQA 4:1 tanh: main's programs) are within 0.995-1.005.
Run AE's 17d would pass the first two (ragged 0.977-0.984, even 1.006-1.007); this run checks that they hold.
Usage (main's package copied to main_ranker/ beside this file): OUT=dir AB_SECONDS=s python ab_padding.py
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
import main_ranker.config as main_config
import main_ranker.kernel as main_kernel
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
RAGGED = [("d64-b64-t1k-ragged", "tanh", seed) for seed in range(3)] + [("d64-b64-t1k-ragged", "none", 0)]
CONTROLS = [("d64-b64-t1k", "tanh", 0), ("d64-b64-t1k", "none", 0)]
UNCHANGED = [("d128-b8-t4k-ragged", "tanh", 0), ("d128-b16-t2k-gqa", "tanh", 0)]
VARIANTS = ("main", "padding")


def compiled(name, problem, config, args, **kw):
    """Build one variant (main's package or this tree's) at the same tiles and compile it now."""
    if name == "main":
        problem = main_config.Problem(**{f: getattr(problem, f) for f in problem.__dataclass_fields__})
        config = main_config.KernelConfig.for_problem(problem, **config.tile())
        fn = main_kernel.build_forward(problem, config, **kw)
    else:
        fn = build_forward(problem, config, **kw)
    jax.block_until_ready(fn(*args))
    return fn


def problem_for(shape, cap):
    return Problem(**SPEC[shape].problem, cap_method=cap, cap=CAPS[cap])


def config_for(problem):
    return api.choose_config(problem, None, budget_for(problem.cap_method, False))


def emit(results, row):
    results.append(row)
    print(json.dumps({k: v for k, v in row.items() if k not in ("clocks", "trace")}), flush=True)
    (OUT / "ab_padding.json").write_text(json.dumps(results, indent=1))


def mostly_empty(rng):
    bounds = ranker_bounds(300, 512, (64, 448), 64, rng)
    bounds[rng.random(300) < 2 / 3] = 0
    bounds[-40:] = 0  # the last tiles of the grid are padding: the claims run past the end while skipping
    return bounds


def accuracy(results):
    rng = np.random.default_rng(17)
    cases = [("adversarial", 1024, adversarial_bounds(1024, rng)),
             ("ragged-200", 512, ranker_bounds(200, 512, (64, 448), 64, rng)),
             ("mostly-empty-300", 512, mostly_empty(rng))]
    quick = os.environ.get("AB_ACCURACY") == "quick"  # the adversarial and mostly empty rows, the capped tiles
    if quick:
        cases = cases[::2]
    for shape, cap, d in (("d64-b64-t1k", "tanh", 64), ("d64-b64-t1k", "none", 64), ("d128-b16-t2k-gqa", "tanh", 128)):
        if quick and cap == "none":
            continue
        shipped = config_for(problem_for(shape, cap))
        for case, t, bounds in cases:
            b = bounds.shape[0]
            problem = Problem(batch=b, seq_len=t, q_heads=4, kv_heads=2, head_dim=d, cap_method=cap, cap=CAPS[cap])
            config = KernelConfig.for_problem(problem, **shipped.tile())
            q = rng.standard_normal((b, t, 4, d)).astype(np.float32)
            k = rng.standard_normal((b, t, 2, d)).astype(np.float32)
            v = rng.standard_normal((b, t, 2, d)).astype(np.float32)
            qb, kb, vb = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
            f = [np.asarray(x.astype(jnp.float32), np.float64) for x in (qb, kb, vb)]
            row = dict(kind="accuracy", cap=cap, head_dim=d, case=case, tiles=config.tile())
            try:
                ro, rl = reference_f64(*f, bounds, sm_scale=problem.scale, cap_method=problem.cap_method,
                                       cap=problem.cap)
                outs = {}
                for name in VARIANTS:
                    args = (qb, kb, vb, jnp.asarray(bounds), jnp.full(qb.shape, jnp.nan, qb.dtype),
                            jnp.full((b, 4, t), jnp.nan, jnp.float32))
                    fn = compiled(name, problem, config, args, poisoned=True)
                    out, lse = fn(*args)
                    outs[name] = (np.asarray(out.astype(jnp.float32)), np.asarray(lse))
                cs = {name: compare(*outs[name], ro, rl, bounds, "bfloat16", problem.cap_method) for name in outs}
                c = cs["padding"]
                same_out = bool(np.array_equal(outs["main"][0], outs["padding"][0], equal_nan=True))
                same_lse = bool(np.array_equal(outs["main"][1], outs["padding"][1], equal_nan=True))
                row.update(ok=all(x.ok for x in cs.values()), main_ok=cs["main"].ok, bitwise_out=same_out,
                           bitwise_lse=same_lse, errors=list(c.errors)[:3], rel_fro=c.rel_fro,
                           lse_max=c.lse_max_abs, main_rel_fro=cs["main"].rel_fro, main_lse_max=cs["main"].lse_max_abs)
            except Exception as e:
                row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
            emit(results, row)


def timing(results, deadline):
    from kerneltune.backends.cuda_jax import time_jax

    settings = MeasureSettings(max_seconds=1.0)
    jobs = []
    for shape, cap, seed in RAGGED + CONTROLS + UNCHANGED:
        problem = problem_for(shape, cap)
        spec = SPEC[shape]
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates,
                               np.random.default_rng(seed))
        if not spec.ragged:  # the bench's rule: one history length for every row
            bounds[:] = bounds[0]
        config = config_for(problem)
        jb = jnp.asarray(bounds)
        q, k, v = make_device_tensors(problem, 0)
        fns = {}
        for name in VARIANTS:
            try:
                fns[name] = compiled(name, problem, config, (q, k, v, jb))
            except Exception as e:
                emit(results, dict(kind="build", shape=shape, cap=cap, seed=seed, variant=name,
                                   error=f"{type(e).__name__}: {e}"[:600]))
        emit(results, dict(kind="config", shape=shape, cap=cap, seed=seed, tiles=config.tile()))
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
    bad = [r for r in acc if not r.get("ok")]
    print(f"\n== accuracy: {len(acc) - len(bad)} of {len(acc)} ok ==")
    for r in acc:
        print("ok" if r.get("ok") else "NOT OK", r["cap"], r["head_dim"], r["case"],
              f"bitwise out/lse {r.get('bitwise_out')}/{r.get('bitwise_lse')}",
              f"rel_fro {r.get('rel_fro', float('nan')):.2e} (main {r.get('main_rel_fro', float('nan')):.2e})",
              f"lse_max {r.get('lse_max', float('nan')):.2e} (main {r.get('main_lse_max', float('nan')):.2e})",
              r.get("errors") or "", r.get("error", "")[:300])
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing" and "error" not in r:
            t[(r["shape"], r["cap"], r["seed"])][r["variant"]].append(r["median_us"])
    ratios = {k: median(v["padding"]) / median(v["main"]) for k, v in t.items() if v["padding"] and v["main"]}
    print("== timing: padding over main, medians over rounds ==")
    for k, x in ratios.items():
        pairs = [p / m for p, m in zip(t[k]["padding"], t[k]["main"], strict=False)]
        q1, q3 = np.percentile(pairs, [25, 75]) if pairs else (float("nan"),) * 2
        print(*k, f"main {median(t[k]['main']):.1f} us, padding x{x:.3f} (per-round quartiles {q1:.3f}-{q3:.3f}),"
              f" rounds {len(t[k]['padding'])}")
    ragged = [x for k, x in ratios.items() if k in RAGGED]
    control = [x for k, x in ratios.items() if k in CONTROLS]
    unchanged = [x for k, x in ratios.items() if k in UNCHANGED]
    gm = math.exp(sum(map(math.log, ragged)) / len(ragged)) if ragged else float("nan")
    errors = [r for r in results if "error" in r]
    bitwise = all(r.get("bitwise_out") and r.get("bitwise_lse") for r in acc)
    print(f"D=64 ragged geomean x{gm:.3f} over {len(ragged)}, worst x{max(ragged, default=float('nan')):.3f}; "
          f"D=64 even {[round(x, 3) for x in control]}; D=128 {[round(x, 3) for x in unchanged]}; "
          f"errors {len(errors)}; bitwise {bitwise}")
    complete = len(ragged) == len(RAGGED) and len(control) == len(CONTROLS) and len(unchanged) == len(UNCHANGED)
    ok = (acc and not bad and bitwise and not errors and complete
          and gm <= 0.985 and max(ragged) <= 1.0
          and max(control) <= 1.010 and (1 - gm) >= 2 * max(0.0, max(control) - 1)
          and all(0.995 <= x <= 1.005 for x in unchanged))
    print("ADOPT" if ok else "DO NOT ADOPT")
    return ok


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    accuracy(results)
    timing(results, time.time() + float(os.environ.get("AB_SECONDS", "300")))
    sys.exit(0 if decide(results) else 1)
