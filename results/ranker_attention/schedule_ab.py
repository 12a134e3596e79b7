"""A/B of the persistent kernel's tile order (run G): a fixed stride of CTAs against tiles claimed
from a global counter. Run once per kernel version (PYTHONPATH picks it), A B A on one GPU.

Each shape runs persistent q64 kv128 s2 on ranker rows: the bench's and two buckets', equal rows with
padding tiles (where the stride aliases with the tiles per head) and the dense problem (what the
claim costs when every wave is whole). Outputs come from a poisoned launch (NaN-filled buffers): every
element of the whole batch must be written (no NaN) and rows 0 and B-1 must match the float32
reference. Timing: CUPTI kernel time per call (the engine's), and the host's wall time per call
over 200 back-to-back calls (which also sees any kernel CUPTI's sum leaves out, such as a memset).

Usage: python3 schedule_ab.py LABEL OUT.json
"""

import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax

SETTINGS = MeasureSettings(max_seconds=0.5)


def rows(batch, seq_len, history, candidates):
    return ranker_bounds(batch, seq_len, history, candidates, np.random.default_rng(0))


def equal(batch, row):
    return np.tile(np.array([row], np.int32), (batch, 1))


# name: (problem fields, bounds)
SHAPES = {
    "t2k-equal-1664-pad (B33)": (dict(batch=33, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128),
                                 equal(33, (0, 1664, 1664, 1664))),
    "t2k-dense (B33)": (dict(batch=33, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128),
                        equal(33, (0, 2048, 2048, 2048))),
    "bench t2k none (equal)": (dict(batch=16, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128),
                               equal(16, (0, 1754, 1754, 2010))),
    "bench t2k rows tanh": (dict(batch=16, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128, cap_method="tanh",
                                 cap=30.0), rows(16, 2048, (1536, 1792), 256)),
    "bench t8k none (equal)": (dict(batch=4, seq_len=8192, q_heads=16, kv_heads=16, head_dim=128),
                               equal(4, (0, 7130, 7130, 8154))),
    "bench t8k rows tanh": (dict(batch=4, seq_len=8192, q_heads=16, kv_heads=16, head_dim=128, cap_method="tanh",
                                 cap=30.0), rows(4, 8192, (6912, 7168), 1024)),
    "bench d64 none (equal)": (dict(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64),
                               equal(64, (0, 877, 877, 1005))),
    "bench d64 rows tanh": (dict(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="tanh",
                                 cap=30.0), rows(64, 1024, (768, 896), 128)),
    "bucket d64-softsign rows": (dict(batch=32, seq_len=2048, q_heads=4, kv_heads=4, head_dim=64,
                                      cap_method="softsign", cap=20.0), rows(32, 2048, (1800, 1900), 32)),
    "bucket d128-tanh-long rows": (dict(batch=8, seq_len=4096, q_heads=8, kv_heads=8, head_dim=128,
                                        cap_method="tanh", cap=30.0), rows(8, 4096, (3400, 3584), 512)),
    "t2k half padding (B32)": (dict(batch=32, seq_len=2048, q_heads=8, kv_heads=8, head_dim=128),
                               equal(32, (0, 900, 900, 1000))),
}


def wall_us(fn, args, calls=200) -> float:
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls * 1e6


def run_shapes(label: str, path: str, shapes: dict) -> None:
    """Check, then time, persistent q64 kv128 s2 on each shape; print a line per shape, write OUT.json."""
    results = []
    for name, (fields, host_bounds) in shapes.items():
        problem = Problem(**fields)
        config = KernelConfig.for_problem(problem, block_q=64, block_kv=128, num_stages=2, persistent=True)
        q, k, v = make_device_tensors(problem, 0)
        bounds = jnp.asarray(host_bounds)
        poisoned = build_forward(problem, config, poisoned=True)
        b, t, h, d = problem.batch, problem.seq_len, problem.q_heads, problem.head_dim
        out, lse = poisoned(q, k, v, bounds, jnp.full((b, t, h, d), jnp.nan, problem.dtype),
                            jnp.full((b, h, t), jnp.nan, jnp.float32))
        out, lse = np.asarray(out.astype(jnp.float32)), np.asarray(lse)
        errors = [f"{int(np.isnan(out).sum())} NaN in out, {int(np.isnan(lse).sum())} in lse"] \
            if np.isnan(out).any() or np.isnan(lse).any() else []
        for i in (0, b - 1):
            with jax.default_matmul_precision("highest"):
                ro, rl = reference_f32(*(x[i:i + 1].astype(jnp.float32) for x in (q, k, v)), bounds[i:i + 1],
                                       sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
            c = compare(out[i:i + 1], lse[i:i + 1], np.asarray(ro), np.asarray(rl), host_bounds[i:i + 1],
                        "bfloat16", problem.cap_method)
            errors += [f"row {i}: {e}" for e in c.errors]
        fn = build_forward(problem, config)
        timing = time_jax(fn, (q, k, v, bounds), SETTINGS)
        results.append(dict(shape=name, median_us=timing.median_us, spread=timing.spread,
                            wall_us=wall_us(fn, (q, k, v, bounds)), errors=errors))
        r = results[-1]
        verdict = errors if errors else "OK"
        print(f"{label} {name:28} {r['median_us']:9.1f} us  wall {r['wall_us']:9.1f} us  {verdict}", flush=True)
        with open(path, "w") as f:  # after every shape, so a process cut at its limit keeps what it measured
            json.dump(dict(label=label, stamps=system_stamps(), results=results), f, indent=1)


def main() -> None:
    run_shapes(sys.argv[1], sys.argv[2], SHAPES)


if __name__ == "__main__":
    main()
