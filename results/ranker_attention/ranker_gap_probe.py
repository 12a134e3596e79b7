"""Where the ranker row at T=2k, no cap, loses against the dense rate (written after run F; not run yet).

Run F's tile-cost probe put the kernel at 0.96x cuDNN on the dense problem at T=2k and the work
accounting at 1.055 pairs computed per pair kept, which predicts 0.91 of the dense rate; the bench
measured 0.865. This probe times, in one process, on a whole-wave shape (B=33, 8 query heads over 2 KV
heads, D=128, T=2048: 33 * 8 * 16 tiles = 32 waves of 132), the persistent q64 kv128 kernel on:

* the dense problem, bounds (0, T, T, T), and cuDNN on it;
* history only (no candidates), history 1664 (13 whole 128-key blocks: no masked step) and 1754
  (one masked tail block per tile);
* history 1754 plus 256 candidates (the bench's bounds: the diagonal blocks too).

Time per KV step (the kernel's step rule, per tile and warpgroup pair) against the dense problem's
says what a masked step and a diagonal step cost; the row-0 output of every case is checked against
the float32 reference first.

Usage: python3 ranker_gap_probe.py OUT.json
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import baselines
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax, time_torch

B, T, HQ, HKV, D = 33, 2048, 8, 2, 128
BLOCK_Q, BLOCK_KV = 64, 128
CASES = {"dense": (0, T, T, T), "history-1664": (0, 1664, 1664, 1664), "history-1754": (0, 1754, 1754, 1754),
         "history-1754+256": (0, 1754, 1754, 2010)}
SETTINGS = MeasureSettings(max_seconds=0.5)


def steps(bounds: tuple[int, int, int, int]) -> int:
    """KV steps over all tiles of one (batch row, head), by kernel.py's plan()."""
    hl, hu, cl, cu = bounds
    total = 0
    for base in range(0, T, 2 * BLOCK_Q):
        end = base + 2 * BLOCK_Q
        if not ((hl < hu and base < hu and end > hl) or (cl < cu and base < cu and end > cl)):
            continue
        total += -(-hu // BLOCK_KV) - hl // BLOCK_KV if hl < hu else 0
        lo, hi = max(cl, base), min(cu, end)
        total += -(-hi // BLOCK_KV) - lo // BLOCK_KV if lo < hi else 0
    return total


def main() -> None:
    problem = Problem(batch=B, seq_len=T, q_heads=HQ, kv_heads=HKV, head_dim=D)
    keys = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(keys[0], (B, T, HQ, D), jnp.bfloat16)
    k, v = (jax.random.normal(kk, (B, T, HKV, D), jnp.bfloat16) for kk in keys[1:])
    cudnn, _ = baselines.dense_sdpa(q, k, v, problem.scale, "cudnn")
    rows = [dict(case="cudnn-dense", median_us=time_torch(lambda: cudnn.fn(*cudnn.args), SETTINGS).median_us,
                 steps=steps(CASES["dense"]))]
    config = KernelConfig.for_problem(problem, block_q=BLOCK_Q, block_kv=BLOCK_KV, num_stages=2, persistent=True)
    fn = build_forward(problem, config)
    for name, case in CASES.items():
        bounds = jnp.asarray(np.tile(np.array([case], np.int32), (B, 1)))
        out, lse = fn(q, k, v, bounds)
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(*(x[:1].astype(jnp.float32) for x in (q, k, v)), bounds[:1],
                                   sm_scale=problem.scale, cap_method="none", cap=None)
        c = compare(np.asarray(out[:1].astype(jnp.float32)), np.asarray(lse[:1]), np.asarray(ro), np.asarray(rl),
                    np.asarray(bounds[:1]), "bfloat16", "none")
        if not c.ok:
            raise SystemExit(f"{name}: wrong output: {c.errors}")
        rows.append(dict(case=name, median_us=time_jax(fn, (q, k, v, bounds), SETTINGS).median_us,
                         steps=steps(case), rel_error=c.rel_fro))
    dense = next(r for r in rows if r["case"] == "dense")
    per_step = dense["median_us"] / dense["steps"]
    with open(sys.argv[1], "w") as f:
        json.dump(dict(stamps=system_stamps(), rows=rows), f, indent=1)
    print(f"{'case':18} {'us':>8} {'steps/row-head':>14} {'us per step / dense':>20}")
    for r in rows:
        print(f"{r['case']:18} {r['median_us']:8.1f} {r['steps']:14d} {r['median_us'] / r['steps'] / per_step:20.3f}")


if __name__ == "__main__":
    main()
