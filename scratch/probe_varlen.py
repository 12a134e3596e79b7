"""Run AM call 3 (a probe, issue 23): how close to its own dense rate does cuDNN come on the bench's ragged rows?
The D=64 ragged row's target is 0.88 of the best dense rate. cuDNN (jax.nn.dot_product_attention) with sequence
lengths does the ranker's history work without its mask: queries [0, L_b) against keys [0, h_b) (`cudnn_ranker`:
history rows attend the history, candidates attend it too; the ranker adds only each candidate's own key), and
the whole valid square (`cudnn_square`: [0, L_b) against [0, L_b)). Each one's useful rate over cuDNN's dense rate
on the same shape, beside ours (the user's call, no cap), in alternating rounds until PROBE_SECONDS run out.
Usage: OUT=dir PROBE_SECONDS=s python scratch/probe_varlen.py
"""

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.backends.cuda_jax import time_jax
from kerneltune.kernels.ranker_attention import ranker_attention
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds, useful_flops
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
SPEC = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
SHAPES = ("d64-b64-t1k-ragged", "d64-b64-t1k", "d128-b8-t4k-ragged")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []

    def emit(row):
        results.append(row)
        print(json.dumps(row), flush=True)
        (OUT / "probe_varlen.json").write_text(json.dumps(results, indent=1))

    for name in SHAPES:
        spec = SPEC[name]
        problem = Problem(**spec.problem)
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates, np.random.default_rng(0))
        if not spec.ragged:
            bounds[:] = bounds[0]
        q, k, v = make_device_tensors(problem, 0)
        jb = jnp.asarray(bounds)
        hist, end = jnp.asarray(bounds[:, 1]), jnp.asarray(bounds[:, 3])
        scale = problem.scale
        h_np, e_np = bounds[:, 1].astype(np.int64), bounds[:, 3].astype(np.int64)
        per_pair = 4 * problem.head_dim * problem.q_heads
        flops = {"ours": useful_flops(problem, bounds), "cudnn_ranker": per_pair * int((e_np * h_np).sum()),
                 "cudnn_square": per_pair * int((e_np * e_np).sum()),
                 "cudnn_dense": per_pair * problem.batch * problem.seq_len ** 2}

        def sdpa(ql=None, kl=None, scale=scale):
            return jax.jit(lambda a, b, c: jax.nn.dot_product_attention(
                a, b, c, scale=scale, query_seq_lengths=ql, key_value_seq_lengths=kl, implementation="cudnn"))

        fns = {"ours": (jax.jit(lambda a, b, c, d: ranker_attention(a, b, c, d, cap_method="none")), (q, k, v, jb)),
               "cudnn_dense": (sdpa(), (q, k, v)),
               "cudnn_ranker": (sdpa(end, hist), (q, k, v)),
               "cudnn_square": (sdpa(end, end), (q, k, v))}
        # A probe's sanity check: cuDNN's history-only keys give ours on the history rows (candidates differ by
        # design: ours adds each one's own key).
        ours = np.asarray(fns["ours"][0](*fns["ours"][1]).astype(jnp.float32))
        theirs = np.asarray(fns["cudnn_ranker"][0](*fns["cudnn_ranker"][1]).astype(jnp.float32))
        rows = np.arange(problem.seq_len)[None, :] < h_np[:, None]
        diff = float(np.abs(ours - theirs)[rows].max())
        emit(dict(kind="check", shape=name, history_rows_max_abs_diff=diff, ok=bool(diff < 2e-2)))
        jobs.append((name, flops, fns))
    deadline = time.time() + float(os.environ.get("PROBE_SECONDS", "90"))
    settings = MeasureSettings(max_seconds=0.4)
    rnd = 0
    while time.time() < deadline:
        for name, _, fns in jobs:
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for impl, (fn, args) in order:
                tm = time_jax(fn, args, settings)
                emit(dict(kind="timing", shape=name, impl=impl, round=rnd, median_us=tm.median_us))
        rnd += 1
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing":
            t[r["shape"]][r["impl"]].append(r["median_us"])
    print("\n== useful rate over cuDNN's dense rate on the same shape, medians over rounds ==")
    for name, flops, _ in jobs:
        v = {impl: median(x) for impl, x in t[name].items()}
        dense_rate = flops["cudnn_dense"] / v["cudnn_dense"]
        print(f"{name}: {len(t[name]['ours'])} rounds; " + "; ".join(
            f"{impl} {v[impl]:.1f} us, {flops[impl] / v[impl] / dense_rate:.3f}" for impl in v))


if __name__ == "__main__":
    main()
