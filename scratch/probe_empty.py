"""Run AK: what a padding (empty) tile and a tile's fixed work cost the persistent D=64 no-cap kernel, by CUPTI
time alone (no profiler): the same valid rows (history h, candidates c) in a longer sequence add only padding
tiles; a doubled batch doubles every tile. Shipped D=64 no-cap tile; outputs checked against the float32
reference on each shape first. Usage: OUT=dir python3 scratch/probe_empty.py"""

import json
import os
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
TILE = dict(block_q=64, block_kv=128, num_stages=3, persistent=True, scale_in_exp2=True)
CASES = [  # (batch, seq_len, history, candidates)
    (64, 384, 256, 128), (64, 1024, 256, 128), (128, 384, 256, 128), (128, 1024, 256, 128),
    (64, 128, 128, 0), (64, 1024, 128, 0),
]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []
    for b, t, h, c in CASES:
        p = Problem(batch=b, seq_len=t, q_heads=4, kv_heads=4, head_dim=64, cap_method="none")
        q, k, v = make_device_tensors(p, 0)
        bounds = ranker_bounds(b, t, h, c, np.random.default_rng(0))
        fn = build_forward(p, KernelConfig.for_problem(p, **TILE))
        args = (q, k, v, jnp.asarray(bounds))
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(*(x.astype(jnp.float32) for x in (q, k, v)), args[3], sm_scale=p.scale)
        out, lse = jax.block_until_ready(fn(*args))
        ok = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), np.asarray(ro), np.asarray(rl), bounds,
                     "bfloat16", "none")
        tiles = b * 4 * (t // 128)
        valid = b * 4 * -(-(h + c) // 128)
        results.append(dict(kind="check", case=[b, t, h, c], ok=ok.ok, errors=list(ok.errors)))
        print(json.dumps(results[-1]), flush=True)
        jobs.append(((b, t, h, c), fn, args, tiles, valid))
    settings = MeasureSettings(max_seconds=0.25)
    for rnd in range(3):
        for case, fn, args, tiles, valid in (jobs if rnd % 2 == 0 else jobs[::-1]):
            results.append(dict(kind="timing", case=list(case), round=rnd, tiles=tiles, valid=valid,
                                median_us=time_jax(fn, args, settings).median_us))
    (OUT / "probe_empty.json").write_text(json.dumps(results, indent=1))
    print("\n== padding tiles: CUPTI medians over 3 rounds ==")
    med = {}
    for case, _, _, tiles, valid in jobs:
        us = median(r["median_us"] for r in results if r["kind"] == "timing" and tuple(r["case"]) == case)
        med[case] = us
        print(f"B={case[0]:3} T={case[1]:4} h={case[2]} c={case[3]}: {us:7.2f} us, tiles {tiles}, valid {valid}, "
              f"empty/SM {(tiles - valid) / 132:.2f}")
    for b in (64, 128):
        d = med[(b, 1024, 256, 128)] - med[(b, 384, 256, 128)]
        print(f"B={b}: an empty tile costs {d / ((b * 4 * 5) / 132):.3f} us of kernel time per SM's share")
    d = med[(64, 1024, 128, 0)] - med[(64, 128, 128, 0)]
    print(f"h=128 c=0: an empty tile costs {d / ((64 * 4 * 7) / 132):.3f} us per SM's share")


if __name__ == "__main__":
    main()
