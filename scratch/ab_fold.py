"""Attempt 20 (run AG, call 5): without a cap, the row max taken on the raw logits and the scale folded into the
exp2 argument's FMA (`KT_VARIANT=fold`, read at trace time), which removes the multiply per logit that only fed
the max: 64 of the D=64 step's 501 instructions a warp, 64 of the D=128 step's 556 (run AG call 1's SASS).
Both variants this tree at the runtime's configs (no cap), rounds alternating, CUPTI under the engine's stopping
rule; each row's outputs compared first (the same arithmetic up to rounding: max |d out| and |d lse| reported).
Rule (written before the run): go on to adoption when every row's outputs agree (|d out| <= 1e-2, |d lse| <= 1e-4),
the geometric mean over the rows is at most 0.98 and no row is over 1.005.
Usage: OUT=dir AB_SECONDS=s python scratch/ab_fold.py
"""

import json
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

sys.path.insert(0, str(Path(__file__).parent))
from ab_rowsum import SPEC, problem_for

from kerneltune.kernels.ranker_attention import api
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.measure import MeasureSettings

api.kernel_source_hash = lambda: "9443bda36b5a7bfd"
OUT = Path(os.environ.get("OUT", "."))
ROWS = [("d64-b64-t1k", "none", 0), ("d64-b64-t1k-ragged", "none", 0), ("d128-b16-t2k-gqa", "none", 0),
        ("d128-b8-t4k-ragged", "none", 0)]


def main():
    from kerneltune.backends.cuda_jax import time_jax

    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []
    for shape, cap, seed in ROWS:
        problem = problem_for(shape, cap)
        spec = SPEC[shape]
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates,
                               np.random.default_rng(seed))
        if not spec.ragged:
            bounds[:] = bounds[0]
        jb = jnp.asarray(bounds)
        q, k, v = make_device_tensors(problem, 0)
        config = api.choose_config(problem, None, budget_for(problem.cap_method, False))
        fns = {}
        outs = {}
        for name in ("shipped", "fold"):
            os.environ["KT_VARIANT"] = "" if name == "shipped" else name
            fns[name] = build_forward(problem, config)
            outs[name] = jax.block_until_ready(fns[name](q, k, v, jb))  # traced and compiled under this variant
        os.environ["KT_VARIANT"] = ""
        d_out = float(jnp.max(jnp.abs(outs["shipped"][0].astype(jnp.float32) - outs["fold"][0].astype(jnp.float32))))
        lse_a, lse_b = outs["shipped"][1], outs["fold"][1]
        finite = jnp.isfinite(lse_a)
        d_lse = float(jnp.max(jnp.where(finite, jnp.abs(lse_a - lse_b), 0.0)))
        same_inf = bool(jnp.array_equal(finite, jnp.isfinite(lse_b)))
        results.append(dict(kind="bitwise", shape=shape, cap=cap, seed=seed, d_out=d_out, d_lse=d_lse,
                            equal=same_inf and d_out <= 1e-2 and d_lse <= 1e-4))
        print(json.dumps(results[-1]), flush=True)
        jobs.append((shape, cap, seed, problem, jb, fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "150"))
    settings = MeasureSettings(max_seconds=1.0)
    rnd = 0
    while time.time() < deadline:
        for shape, cap, seed, problem, jb, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                row = dict(kind="timing", shape=shape, cap=cap, seed=seed, variant=name, round=rnd)
                try:
                    tm = time_jax(fn, (q, k, v, jb), settings)
                    row.update(median_us=tm.median_us, spread=tm.spread, samples=tm.samples)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
        rnd += 1
        (OUT / "ab_fold.json").write_text(json.dumps(results, indent=1))
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r.get("kind") == "timing" and "error" not in r:
            t[(r["shape"], r["cap"], r["seed"])][r["variant"]].append(r["median_us"])
    print("\n== fold over the shipped kernel, medians over rounds ==")
    ratios = []
    for key, v in t.items():
        base = median(v["shipped"])
        pairs = [a / b for a, b in zip(v["fold"], v["shipped"], strict=False)]
        q1, q3 = np.percentile(pairs, [25, 75])
        ratios.append(median(v["fold"]) / base)
        print(*key, f"shipped {base:.1f} us, rounds {len(v['shipped'])}; fold x{ratios[-1]:.3f} "
              f"(per-round quartiles {q1:.3f}-{q3:.3f})")
    bitwise = all(r["equal"] for r in results if r.get("kind") == "bitwise")
    errors = [r for r in results if "error" in r]
    gm = float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
    print(f"geomean x{gm:.3f}, worst x{max(ratios, default=float('nan')):.3f}, bitwise {bitwise}, errors {len(errors)}")
    ok = bitwise and not errors and len(ratios) == len(ROWS) and gm <= 0.98 and max(ratios) <= 1.005
    print("GO ON TO ADOPTION" if ok else "DO NOT ADOPT")


if __name__ == "__main__":
    main()
