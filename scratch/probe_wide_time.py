"""Run AJ, call 3: where 192-key blocks lose at D=64 (run AJ's sweep: 1.07x the time without a cap, 1.12x with tanh,
on histories of 768-896). The shipped winners at 128 and 192 keys, timed in alternating rounds (CUPTI, the engine's
stopping rule) on histories that give the 192-key kernel no clipped block (768: every block whole for both), a
64-key one (832), a 128-key one (896), and the bench's ragged rows; outputs checked against the float32 reference
first. Usage: OUT=dir AB_SECONDS=s python3 scratch/probe_wide_time.py"""

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
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
TILES = {
    "tanh": dict(block_q=64, cap_impl="tanh_instr", exp2_fma_eighths=5, num_stages=3, persistent=True,
                 static_max=True),
    "none": dict(block_q=64, num_stages=3, persistent=True, scale_in_exp2=True),
}
HISTORIES = {"h768": 768, "h832": 832, "h896": 896, "ragged": (256, 896)}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []
    for cap in ("none", "tanh"):
        problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method=cap,
                          cap=None if cap == "none" else 30.0)
        q, k, v = make_device_tensors(problem, 0)
        fns = {kv: build_forward(problem, KernelConfig.for_problem(problem, **TILES[cap], block_kv=kv))
               for kv in (128, 192)}
        for hname, h in HISTORIES.items():
            bounds = ranker_bounds(problem.batch, problem.seq_len, h, 128, np.random.default_rng(1))
            args = (q, k, v, jnp.asarray(bounds))
            with jax.default_matmul_precision("highest"):
                ro, rl = reference_f32(*(x.astype(jnp.float32) for x in (q, k, v)), args[3],
                                       sm_scale=problem.scale, cap_method=cap, cap=problem.cap)
            for kv, fn in fns.items():
                out, lse = jax.block_until_ready(fn(*args))
                c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), np.asarray(ro), np.asarray(rl),
                            bounds, "bfloat16", cap)
                results.append(dict(kind="check", cap=cap, hist=hname, kv=kv, ok=c.ok, errors=list(c.errors)))
                print(json.dumps(results[-1]), flush=True)
            jobs.append((cap, hname, args, fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "120"))
    settings = MeasureSettings(max_seconds=0.5)
    rnd = 0
    while time.time() < deadline:
        for cap, hname, args, fns in jobs:
            for kv, fn in (list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]):
                tm = time_jax(fn, args, settings)
                results.append(dict(kind="timing", cap=cap, hist=hname, kv=kv, round=rnd, median_us=tm.median_us))
        rnd += 1
        (OUT / "probe_wide_time.json").write_text(json.dumps(results, indent=1))
    t = defaultdict(list)
    for r in results:
        if r["kind"] == "timing":
            t[(r["cap"], r["hist"], r["kv"])].append(r["median_us"])
    print("\n== 192-key blocks over 128-key blocks, medians over rounds ==")
    for cap in ("none", "tanh"):
        for hname in HISTORIES:
            a, b = median(t[(cap, hname, 128)]), median(t[(cap, hname, 192)])
            print(f"{cap:5} {hname:7} kv128 {a:7.1f} us  kv192 {b:7.1f} us  x{b / a:.3f}  ({len(t[(cap, hname, 128)])} rounds)")


if __name__ == "__main__":
    main()
