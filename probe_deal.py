"""Run Y, after attempt 14's A/B: where longest first's time goes. At the runtime's config, four variants of
the persistent kernel: batch (main's path), lpt (longest first), probe_rank (each CTA ranks the rows, tiles
dealt in batch order) and probe_deal (ranked, and every claimed ticket mapped by tile_of_ticket, whose result
is then dropped: batch order at longest first's per-tile cost). CUPTI, rounds alternating in order.
Usage: OUT=dir AB_SECONDS=s python probe_deal.py
"""

import os
import sys
import time
from collections import defaultdict
from statistics import median

import jax.numpy as jnp
import numpy as np

import ab_longest_first as ab
from kerneltune.kernels.ranker_attention.config import KernelConfig
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.measure import MeasureSettings

JOBS = [("d64-b64-t1k-ragged", "tanh", 0), ("d64-b64-t1k-ragged", "tanh", 1), ("d64-b64-t1k-ragged", "none", 0),
        ("d64-b64-t1k", "tanh", 0), ("d64-b64-t1k", "none", 0), ("d128-b8-t4k-ragged", "tanh", 1)]
VARIANTS = ("batch", "longest_first", "probe_rank", "probe_deal")


def variant(config, order):
    return KernelConfig(**{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "tile_order": order})


def main():
    from kerneltune.backends.cuda_jax import time_jax

    deadline = time.time() + float(os.environ.get("AB_SECONDS", "300"))
    settings = MeasureSettings(max_seconds=1.0)
    results, jobs = [], []
    for shape, cap, seed in JOBS:
        sh = ab.SPEC[shape]
        problem = ab.problem_for(cap, **sh.problem)
        bounds = ranker_bounds(problem.batch, problem.seq_len, sh.history, sh.candidates, np.random.default_rng(seed))
        if not sh.ragged:
            bounds[:] = bounds[0]
        config = ab.config_for(problem)
        fns = {v: build_forward(problem, variant(config, v)) for v in VARIANTS}
        jb = jnp.asarray(bounds)
        q, k, v = make_device_tensors(problem, 0)
        outs = {name: np.asarray(fn(q, k, v, jb)[0].astype(jnp.float32)) for name, fn in fns.items()}
        same = {name: bool(np.array_equal(outs[name], outs["batch"], equal_nan=True)) for name in VARIANTS}
        ab.emit(results, dict(kind="config", shape=shape, cap=cap, seed=seed, tiles=config.tile(),
                              equal_to_batch=same))
        jobs.append((shape, cap, seed, jb, fns))
    rnd = 0
    while time.time() < deadline:
        for shape, cap, seed, jb, fns in jobs:
            if time.time() >= deadline:
                break
            q, k, v = make_device_tensors(ab.problem_for(cap, **ab.SPEC[shape].problem), 0)
            names = list(VARIANTS)[rnd % 4:] + list(VARIANTS)[:rnd % 4]
            for name in names:
                tm = time_jax(fns[name], (q, k, v, jb), settings)
                ab.emit(results, dict(kind="timing", shape=shape, cap=cap, seed=seed, variant=name, round=rnd,
                                      median_us=tm.median_us, spread=tm.spread, samples=tm.samples))
        rnd += 1
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing":
            t[(r["shape"], r["cap"], r["seed"])][r["variant"]].append(r["median_us"])
    print("\n== over batch, medians over rounds ==")
    for key, v in t.items():
        base = median(v["batch"])
        print(*key, f"batch {base:.1f} us", *(f"{n} x{median(v[n]) / base:.3f}" for n in VARIANTS[1:]),
              f"rounds {len(v['batch'])}")


if __name__ == "__main__":
    ab.OUT = ab.Path(os.environ.get("OUT", "."))
    ab.OUT.mkdir(parents=True, exist_ok=True)
    sys.exit(main())
