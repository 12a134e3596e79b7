"""What the cap costs, against the dense rate the bench's targets divide by (run H).

For each bench shape (the default bench file) and each cap (none, tanh_approx, tanh), in one process:

* the kernel on the dense problem (bounds (0, T, T, T): every row history, no mask inside any block,
  the same work as cuDNN's dense SDPA), with the table's config for that problem: ours / cuDNN's dense
  rate, so the cap's own cost is separated from the mask's;
* the kernel on the bench's rows (the bench's bounds, seed 0), with the table's config and, for
  tanh_approx, the other configs that fit (the table has no tanh_approx bucket: is the tanh entry the
  right one for it?).

Rows 0 and B-1 of every output are checked against the float32 reference before timing.

Usage: python3 cap_cost_probe.py OUT.json SHAPE_NAME...
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.bench.spec import load_spec
from kerneltune.kernels.ranker_attention import baselines
from kerneltune.kernels.ranker_attention.api import choose_config
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, infeasibility
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds, useful_flops
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.paths import SPACES
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax, time_torch

SETTINGS = MeasureSettings(max_seconds=0.5)
CAPS = (("none", None), ("tanh_approx", 30.0), ("tanh", 30.0))
OTHER_TILES = (dict(block_q=64, block_kv=128, num_stages=2), dict(block_q=64, block_kv=128, num_stages=3),
               dict(block_q=64, block_kv=64, num_stages=4), dict(block_q=64, block_kv=64, num_stages=3))


def checked_us(problem: Problem, config: KernelConfig, q, k, v, host_bounds) -> tuple[float, list[str]]:
    bounds = jnp.asarray(host_bounds)
    fn = build_forward(problem, config)
    out, lse = (np.asarray(x.astype(jnp.float32)) for x in fn(q, k, v, bounds))
    errors = []
    for i in (0, problem.batch - 1):
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(*(x[i:i + 1].astype(jnp.float32) for x in (q, k, v)), bounds[i:i + 1],
                                   sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
        errors += [f"row {i}: {e}" for e in compare(out[i:i + 1], lse[i:i + 1], np.asarray(ro), np.asarray(rl),
                                                     host_bounds[i:i + 1], problem.dtype,
                                                     problem.cap_method).errors]
    return time_jax(fn, (q, k, v, bounds), SETTINGS).median_us, errors


def main() -> None:
    path, names = sys.argv[1], set(sys.argv[2:])
    spec = load_spec(SPACES / "bench_ranker_attention.toml")
    rows = []
    for shape in (s for s in spec.shapes if s.name in names):
        base = Problem(**shape.problem)
        b, t = base.batch, base.seq_len
        q, k, v = make_device_tensors(base, 0)
        dense_bounds = np.tile(np.array([[0, t, t, t]], np.int32), (b, 1))
        bench_bounds = ranker_bounds(b, t, shape.history, shape.candidates, np.random.default_rng(0))
        dense_flops = 4 * b * base.q_heads * t * t * base.head_dim
        cudnn, _ = baselines.dense_sdpa(q, k, v, base.scale, "cudnn")
        cudnn_us = time_torch(lambda r=cudnn: r.fn(*r.args), SETTINGS).median_us
        cudnn_rate = dense_flops / cudnn_us
        rows.append(dict(shape=shape.name, impl="cudnn_dense", median_us=cudnn_us))
        print(f"{shape.name}: cuDNN dense {cudnn_us:.1f} us", flush=True)
        for method, cap in CAPS:
            problem = Problem(**shape.problem, cap_method=method, cap=cap)
            table = choose_config(problem, None)
            runs = [("dense", table, dense_bounds), ("bench", table, bench_bounds)]
            if method == "tanh_approx":
                for tiles in OTHER_TILES:
                    config = KernelConfig.for_problem(problem, **tiles, persistent=True, fast_math=True)
                    if config != table and infeasibility(config, problem) is None:
                        runs.append(("bench", config, bench_bounds))
            for kind, config, host_bounds in runs:
                us, errors = checked_us(problem, config, q, k, v, host_bounds)
                flops = dense_flops if kind == "dense" else useful_flops(problem, host_bounds)
                tiles = f"q{config.block_q} kv{config.block_kv} s{config.num_stages}" + \
                    (" P" if config.persistent else "")
                rows.append(dict(shape=shape.name, cap_method=method, bounds=kind, tiles=tiles,
                                 table_config=config == table, median_us=us, rate_over_cudnn=flops / us / cudnn_rate,
                                 errors=errors))
                print(f"{shape.name} {method:12} {kind:6} {tiles:16} {us:9.1f} us  rate/cuDNN dense "
                      f"{rows[-1]['rate_over_cudnn']:.3f}  {errors if errors else 'OK'}", flush=True)
    with open(path, "w") as f:
        json.dump(dict(stamps=system_stamps(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
