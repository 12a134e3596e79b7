"""Run AN call 4 (a probe, issue 23): what a masked history step costs at D=64. `mask_interior` (a tile field) masks
every history step instead of only a tile's first and last (the ones a history bound cuts); timing the runtime's
configs with it off (`shipped`) and on (`all_masked`) gives the cost of masking one KV step, and with the count of
masked steps the shipped kernel runs, the share of its time its masks take: the most a cheaper mask could win.
Outputs are checked against the float32 reference (poisoned) for both. Usage: OUT=dir PROBE_SECONDS=s python ...
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

from kerneltune.kernels.ranker_attention import api
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
SPEC = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
ROWS = [("d64-b64-t1k", "tanh"), ("d64-b64-t1k-ragged", "tanh"), ("d64-b64-t1k", "none"),
        ("d64-b64-t1k-ragged", "none")]


def step_counts(bounds, seq_len, heads, block_q, block_kv):
    """Tile-steps (a KV step of a tile's two warpgroups) of the history, and how many of them the shipped kernel
    masks (a tile's first when history_lower cuts its block, its last when history_upper does), as kernel.plan."""
    hist = masked = 0
    for hl, hu, cl, cu in bounds.tolist():
        for base in range(0, seq_len, 2 * block_q):
            end = base + 2 * block_q
            valid = (hl < hu and base < hu and end > hl) or (cl < cu and base < cu and end > cl)
            if not (valid and hl < hu):
                continue
            n = -(-hu // block_kv) - hl // block_kv
            lead = min(n, 1 if hl % block_kv else 0)
            tail = min(n - lead, 1 if hu % block_kv else 0)
            hist += n * heads
            masked += (lead + tail) * heads
    return hist, masked


def main():
    from kerneltune.backends.cuda_jax import time_jax

    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []

    def emit(row):
        results.append(row)
        print(json.dumps(row), flush=True)
        (OUT / "probe_mask.json").write_text(json.dumps(results, indent=1))

    for shape, cap in ROWS:
        spec = SPEC[shape]
        problem = Problem(**spec.problem, cap_method=cap, cap=30.0 if cap != "none" else None)
        tiles = api.choose_config(problem, None, budget_for(problem.cap_method, False)).tile()
        configs = {n: KernelConfig.for_problem(problem, **{**tiles, "mask_interior": f})
                   for n, f in (("shipped", False), ("all_masked", True))}
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates, np.random.default_rng(0))
        if not spec.ragged:
            bounds[:] = bounds[0]
        hist, masked = step_counts(bounds, problem.seq_len, problem.q_heads, tiles["block_q"], tiles["block_kv"])
        fns = {n: build_forward(problem, c) for n, c in configs.items()}
        q, k, v = make_device_tensors(problem, 0)
        jb = jnp.asarray(bounds)
        with jax.default_matmul_precision("highest"):
            ro, rl = reference_f32(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), jb,
                                   sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
        for n, c in configs.items():
            o, lse = build_forward(problem, c, poisoned=True)(
                q, k, v, jb, jnp.full(q.shape, jnp.nan, q.dtype),
                jnp.full((problem.batch, problem.q_heads, problem.seq_len), jnp.nan, jnp.float32))
            cmp = compare(np.asarray(o.astype(jnp.float32)), np.asarray(lse), np.asarray(ro), np.asarray(rl), bounds,
                          problem.dtype, problem.cap_method)
            emit(dict(kind="check", shape=shape, cap=cap, variant=n, ok=cmp.ok, rel_fro=cmp.rel_fro, tiles=tiles))
        emit(dict(kind="steps", shape=shape, cap=cap, history_tile_steps=hist, masked_tile_steps=masked))
        jobs.append((shape, cap, (q, k, v, jb), fns, hist, masked))
    deadline = time.time() + float(os.environ.get("PROBE_SECONDS", "60"))
    settings = MeasureSettings(max_seconds=0.5)
    rnd = 0
    while time.time() < deadline:
        for shape, cap, args, fns, _, _ in jobs:
            for n, fn in (list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]):
                emit(dict(kind="timing", shape=shape, cap=cap, variant=n, round=rnd,
                          median_us=time_jax(fn, args, settings).median_us))
        rnd += 1
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing":
            t[r["shape"], r["cap"]][r["variant"]].append(r["median_us"])
    sms = jax.devices()[0].core_count
    print(f"\n== masking every history step, medians over rounds ({sms} SMs) ==")
    for shape, cap, _, _, hist, masked in jobs:
        v = t[shape, cap]
        base, alls = median(v["shipped"]), median(v["all_masked"])
        per_step = (alls - base) * sms / (hist - masked)  # µs of a SM per masked tile-step, over an unmasked one
        print(f"{shape} {cap}: shipped {base:.1f} us, all masked x{alls / base:.3f} ({len(v['shipped'])} rounds); "
              f"{masked} of {hist} history tile-steps masked; a mask costs {per_step:.3f} us of a SM a tile-step; "
              f"the shipped masks' share of the time {masked * per_step / sms / base:.3f}")
    print("checks ok:", all(r["ok"] for r in results if r["kind"] == "check"))


if __name__ == "__main__":
    main()
