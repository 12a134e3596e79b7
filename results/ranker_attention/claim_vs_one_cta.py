"""Persistent (tiles claimed when a tile starts) against one CTA per tile on the shapes where
tile_order_model.py expects the claim to lose most (run G, after adopting claimed tiles).

The model's 294 random ranker shapes (its seed and draws) are ranked by claim-at-start time over
greedy placement with one CTA per tile's fixed cost (1.5 steps against 1.2); the worst six and the
three nearest the median run here, D=128, no cap, q64 kv128 s2, each with and without the persistent
grid. Outputs are poisoned: every element of the batch must be written (no NaN), rows 0 and B-1 must
match the float32 reference.

Usage: python3 claim_vs_one_cta.py OUT.json
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import tile_order_model as model

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax

ONE_CTA_FIXED = 1.5


def ranked_shapes():
    """(model ratio, seq_len, heads, bounds) of the model's random shapes, worst first."""
    shapes = []
    for t, h, bounds in model.random_shapes():
        one_cta = [model.PAD if s is None else s + ONE_CTA_FIXED
                   for row in bounds for _ in range(h) for s in model.tile_steps(row, t)]
        shapes.append((model.claim_at_start(model.costs(bounds, t, h)) / model.greedy(one_cta), t, h, bounds))
    shapes.sort(key=lambda s: -s[0])
    return shapes[:6] + shapes[len(shapes) // 2 - 1:len(shapes) // 2 + 2]


def checked_time(problem, config, q, k, v, host_bounds):
    bounds = jnp.asarray(host_bounds)
    b, t, h, d = problem.batch, problem.seq_len, problem.q_heads, problem.head_dim
    out, lse = build_forward(problem, config, poisoned=True)(
        q, k, v, bounds, jnp.full((b, t, h, d), jnp.nan, problem.dtype), jnp.full((b, h, t), jnp.nan, jnp.float32))
    out, lse = np.asarray(out.astype(jnp.float32)), np.asarray(lse)
    errors = [f"{int(np.isnan(out).sum())} NaN in out"] if np.isnan(out).any() or np.isnan(lse).any() else []
    for i in (0, b - 1):
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(*(x[i:i + 1].astype(jnp.float32) for x in (q, k, v)), bounds[i:i + 1],
                                   sm_scale=problem.scale, cap_method="none", cap=None)
        errors += compare(out[i:i + 1], lse[i:i + 1], np.asarray(ro), np.asarray(rl), host_bounds[i:i + 1],
                          "bfloat16", "none").errors
    return time_jax(build_forward(problem, config), (q, k, v, bounds), MeasureSettings(max_seconds=0.5)).median_us, \
        errors


def main() -> None:
    rows = []
    for predicted, t, h, bounds in ranked_shapes():
        problem = Problem(batch=len(bounds), seq_len=t, q_heads=h, kv_heads=h, head_dim=128)
        q, k, v = make_device_tensors(problem, 0)
        times, errors = {}, []
        for persistent in (True, False):
            config = KernelConfig.for_problem(problem, block_q=64, block_kv=128, num_stages=2, persistent=persistent)
            times[persistent], e = checked_time(problem, config, q, k, v, bounds)
            errors += e
        rows.append(dict(seq_len=t, heads=h, batch=len(bounds), tiles=len(bounds) * h * t // 128,
                         predicted=predicted, persistent_us=times[True], one_cta_us=times[False],
                         measured=times[True] / times[False], errors=errors))
        r = rows[-1]
        print(f"T={t:5d} H={h:2d} B={r['batch']:2d} tiles {r['tiles']:5d}: persistent / one CTA predicted "
              f"{predicted:.3f}, measured {r['measured']:.3f} ({r['persistent_us']:.1f} / {r['one_cta_us']:.1f} us) "
              f"{errors if errors else 'OK'}", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(dict(stamps=system_stamps(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
