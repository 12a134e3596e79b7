"""Per-tile fixed cost and per-step rate of the ranker kernel against dense kernels, on the GPU.

The kernel on bounds (0, T, T, T) (every row history, no candidates, no mask inside any block)
computes plain dense attention, the same work as cuDNN SDPA and JAX's ``attention_mgpu``. Timing
all three at T = 512 .. 4096 with B=33, 8 query heads over 2 KV heads, D=128 (33 * 8 * T / 128
is a whole number of 132-SM waves for 64-, 128- and 256-row tiles, so no wave tail) and fitting

    time / (B * Hq * T) = per_row_fixed + per_pair * T

separates a cost paid once per query tile (ramp, epilogue, launch) from the per-(query, key) rate:
``per_row_fixed / per_pair`` is the fixed cost in keys' worth of work per row, i.e. in KV steps of
``block_kv`` keys it is that divided by block_kv. Each output of ours is checked against cuDNN's
(rel. Frobenius error) before it is timed.

Usage: python3 tile_cost_probe.py OUT.json
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import baselines
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax, time_torch

B, HQ, HKV, D = 33, 8, 2, 128
SEQS = (512, 1024, 2048, 4096)
TILES = {
    "q64kv128": dict(block_q=64, block_kv=128, num_stages=2),
    "q64kv128-persistent": dict(block_q=64, block_kv=128, num_stages=2, persistent=True),
    "q128kv64": dict(block_q=128, block_kv=64, num_stages=2),
    "q128kv64-persistent": dict(block_q=128, block_kv=64, num_stages=2, persistent=True),
}
FIXED = dict(p_in_registers=True, schedule_barrier=True, mask_interior=False, fast_math=True)
SETTINGS = MeasureSettings(max_seconds=0.5)


def main() -> None:
    rows = []
    for t in SEQS:
        problem = Problem(batch=B, seq_len=t, q_heads=HQ, kv_heads=HKV, head_dim=D)
        keys = jax.random.split(jax.random.key(t), 3)
        q = jax.random.normal(keys[0], (B, t, HQ, D), jnp.bfloat16)
        k, v = (jax.random.normal(kk, (B, t, HKV, D), jnp.bfloat16) for kk in keys[1:])
        bounds = jnp.asarray(np.tile(np.array([[0, t, t, t]], np.int32), (B, 1)))
        ref_run, ref = baselines.dense_sdpa(q, k, v, problem.scale, "cudnn")
        timing = time_torch(lambda r=ref_run: r.fn(*r.args), SETTINGS)
        rows.append(dict(impl="cudnn_dense", seq_len=t, median_us=timing.median_us, spread=timing.spread))
        mg_run, mg = baselines.jax_attention_mgpu(q, k, v, problem.scale)
        timing = time_jax(mg_run.fn, mg_run.args, SETTINGS)
        rows.append(dict(impl="jax_mgpu_dense", seq_len=t, median_us=timing.median_us, spread=timing.spread,
                         rel_error=float(np.linalg.norm(mg - ref) / np.linalg.norm(ref))))
        for name, tile in TILES.items():
            config = KernelConfig.for_problem(problem, **tile, **FIXED)
            fn = build_forward(problem, config)
            out = np.asarray(fn(q, k, v, bounds)[0].astype(jnp.float32))
            rel = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
            timing = time_jax(fn, (q, k, v, bounds), SETTINGS)
            rows.append(dict(impl=name, seq_len=t, median_us=timing.median_us, spread=timing.spread,
                             rel_error=rel))
            print(f"T={t} {name}: {timing.median_us:.1f} us rel {rel:.2e}", flush=True)
    fits = {}
    for impl in sorted({r["impl"] for r in rows}):
        ts = np.array([r["seq_len"] for r in rows if r["impl"] == impl], float)
        us = np.array([r["median_us"] for r in rows if r["impl"] == impl], float)
        per_row = us / (B * HQ * ts)
        slope, intercept = np.polyfit(ts, per_row, 1)
        resid = per_row - (slope * ts + intercept)
        fits[impl] = dict(per_pair_ps=slope * 1e6, per_row_fixed_ps=intercept * 1e6,
                          fixed_in_keys=intercept / slope, max_rel_residual=float(np.max(np.abs(resid) / per_row)),
                          tflops_at={int(tt): 4 * D * B * HQ * tt * tt / (u * 1e-6) / 1e12
                                     for tt, u in zip(ts, us, strict=True)})
    with open(sys.argv[1], "w") as f:
        json.dump(dict(stamps=system_stamps(), shape=dict(batch=B, q_heads=HQ, kv_heads=HKV, head_dim=D),
                       rows=rows, fits=fits), f, indent=1)
    print(f"{'impl':22} {'ps/pair':>8} {'fixed keys':>10} {'resid':>6}  dense TFLOP/s at T=" + " ".join(map(str, SEQS)))
    for impl, f in fits.items():
        rates = " ".join(f"{f['tflops_at'][t]:6.0f}" for t in SEQS)
        print(f"{impl:22} {f['per_pair_ps']:8.3f} {f['fixed_in_keys']:10.0f} {f['max_rel_residual']:6.3f}  {rates}")


if __name__ == "__main__":
    main()
