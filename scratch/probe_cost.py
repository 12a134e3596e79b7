"""Run AG probe (not a candidate: its outputs are wrong): what leaving work out of the shipped kernel's KV step buys.
`KT_PROBE=nosum` drops the row sum of p (an FADD per logit and the row reduction), `notanh` the tanh instruction
(D=64 tanh only: the fused exp2 path). Each over the shipped kernel, same tree, the runtime's configs, rounds
alternating, CUPTI under the engine's stopping rule. If time followed the instruction count, nosum would save
~10% of the D=64 step (64 of its 655 instructions a warp) and notanh ~10% too.
Usage: OUT=dir AB_SECONDS=s python scratch/probe_cost.py
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
ROWS = [("d64-b64-t1k", "tanh", 0), ("d64-b64-t1k", "none", 0), ("d64-b64-t1k-ragged", "tanh", 0),
        ("d64-b64-t1k-ragged", "none", 0), ("d128-b16-t2k-gqa", "tanh", 0), ("d128-b16-t2k-gqa", "none", 0)]


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
        for name in ("shipped", "nosum", "notanh"):
            if name == "notanh" and not (cap == "tanh" and problem.head_dim == 64):
                continue
            os.environ["KT_PROBE"] = "" if name == "shipped" else name
            fns[name] = build_forward(problem, config)
            jax.block_until_ready(fns[name](q, k, v, jb))  # traced and compiled under this probe
        os.environ["KT_PROBE"] = ""
        jobs.append((shape, cap, seed, problem, jb, fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "150"))
    settings = MeasureSettings(max_seconds=1.0)
    rnd = 0
    while time.time() < deadline:
        for shape, cap, seed, problem, jb, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                row = dict(shape=shape, cap=cap, seed=seed, variant=name, round=rnd)
                try:
                    tm = time_jax(fn, (q, k, v, jb), settings)
                    row.update(median_us=tm.median_us, spread=tm.spread, samples=tm.samples)
                except Exception as e:
                    row.update(error=f"{type(e).__name__}: {e}"[:600], trace=traceback.format_exc()[-1500:])
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
        rnd += 1
        (OUT / "probe_cost.json").write_text(json.dumps(results, indent=1))
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if "error" not in r:
            t[(r["shape"], r["cap"], r["seed"])][r["variant"]].append(r["median_us"])
    print("\n== over the shipped kernel, medians over rounds ==")
    for key, v in t.items():
        base = median(v["shipped"])
        print(*key, f"shipped {base:.1f} us, rounds {len(v['shipped'])};",
              ", ".join(f"{n} x{median(x) / base:.3f}" for n, x in v.items() if n != "shipped"))


if __name__ == "__main__":
    main()
