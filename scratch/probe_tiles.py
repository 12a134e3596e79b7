"""Run AK: where the D=64 kernel's time goes outside its KV steps (the bench: ragged rows reach 0.72 of the dense
rate against 0.89 for even ones, and a two-point fit puts ~3 us on each tile).

A. CUPTI times (the engine's stopping rule, 2 alternating rounds) of the shipped D=64 no-cap and tanh tiles on even
   rows (history h, candidates c: h in 128..896, c in {0, 128}), the bench's even and ragged draws: a fit of
   time = tiles * a + KV steps * s (+ diagonal steps * d) per SM.
B. Mosaic GPU's on-device profiler (scratch/profiled_kernel.py's named scopes) on the bench's even and ragged rows:
   per warpgroup, each tile's time split into its KV steps' parts (qk, softmax, wait_v, pv), the diagonal, the
   epilogue and the waits; the tail (each CTA's end before the kernel's).
Usage: OUT=dir python3 scratch/probe_tiles.py"""

import glob
import gzip
import json
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.backends.cuda_jax import time_jax
from kerneltune.kernels.ranker_attention import _kernel_profiled as kp
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
TILES = {
    "tanh": dict(block_q=64, block_kv=128, cap_impl="tanh_instr", exp2_fma_eighths=5, num_stages=3, persistent=True,
                 static_max=True),
    "none": dict(block_q=64, block_kv=128, num_stages=3, persistent=True, scale_in_exp2=True),
}
B, T, H = 64, 1024, 4


def problem(cap):
    return Problem(batch=B, seq_len=T, q_heads=H, kv_heads=H, head_dim=64, cap_method=cap,
                   cap=None if cap == "none" else 30.0)


def bounds_sets():
    sets = {}
    for h in range(128, 1024, 128):
        for c in (0, 128):
            if h + c <= T:
                sets[f"h{h}c{c}"] = ranker_bounds(B, T, h, c, np.random.default_rng(0))
    sets["bench_even"] = ranker_bounds(B, T, (768, 896), 128, np.random.default_rng(1))
    sets["bench_ragged"] = ranker_bounds(B, T, (256, 896), 128, np.random.default_rng(1))
    return sets


def counts(bounds, bq=128, bk=128):
    tiles = steps = diag = 0
    for hl, hu, cl, cu in bounds.tolist():
        for t0 in range(0, T, bq):
            t1 = t0 + bq
            valid = (hl < hu and t0 < hu and t1 > hl) or (cl < cu and t0 < cu and t1 > cl)
            if not valid:
                continue
            tiles += 1
            steps += -(-hu // bk) - hl // bk if hl < hu else 0
            lo, hi = max(cl, t0), min(cu, t1)
            diag += (-(-hi // bk) - lo // bk) if lo < hi else 0
    return tiles * H, steps * H, diag * H


def part_a(results):
    sets = bounds_sets()
    jobs = []
    for cap in ("none", "tanh"):
        p = problem(cap)
        q, k, v = make_device_tensors(p, 0)
        fn = build_forward(p, KernelConfig.for_problem(p, **TILES[cap]))
        for name in ("bench_ragged",):
            bnd = jnp.asarray(sets[name])
            with jax.default_matmul_precision("highest"):
                ro, rl = reference_f32(*(x.astype(jnp.float32) for x in (q, k, v)), bnd, sm_scale=p.scale,
                                       cap_method=cap, cap=p.cap)
            out, lse = jax.block_until_ready(fn(q, k, v, bnd))
            c = compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), np.asarray(ro), np.asarray(rl),
                        sets[name], "bfloat16", cap)
            results.append(dict(kind="check", cap=cap, bounds=name, ok=c.ok, errors=list(c.errors)))
            print(json.dumps(results[-1]), flush=True)
        for name, bnd in sets.items():
            jobs.append((cap, name, fn, (q, k, v, jnp.asarray(bnd)), counts(bnd)))
    settings = MeasureSettings(max_seconds=0.25)
    for rnd in range(2):
        for cap, name, fn, args, cnt in (jobs if rnd % 2 == 0 else jobs[::-1]):
            tm = time_jax(fn, args, settings)
            results.append(dict(kind="timing", cap=cap, bounds=name, round=rnd, median_us=tm.median_us,
                                tiles=cnt[0], steps=cnt[1], diag=cnt[2]))
    t = defaultdict(list)
    for r in results:
        if r["kind"] == "timing":
            t[(r["cap"], r["bounds"])].append(r)
    print("\n== A: times and counts (per SM: /132) ==")
    for cap in ("none", "tanh"):
        rows = []
        for (c, name), rs in t.items():
            if c != cap:
                continue
            us = median(r["median_us"] for r in rs)
            rows.append((name, us, rs[0]["tiles"] / 132, rs[0]["steps"] / 132, rs[0]["diag"] / 132))
            print(f"{cap:5} {name:13} {us:8.1f} us  tiles/SM {rows[-1][2]:6.2f} steps/SM {rows[-1][3]:7.2f} "
                  f"diag/SM {rows[-1][4]:5.2f}")
        fit = [r for r in rows if r[0].startswith("h")]
        a = np.array([[1.0, r[2], r[3], r[4]] for r in fit])
        y = np.array([r[1] for r in fit])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        pred = a @ coef
        print(f"{cap:5} fit on even rows: fixed {coef[0]:.2f} us, per tile {coef[1]:.3f} us, per KV step "
              f"{coef[2]:.3f} us, per diagonal step {coef[3]:.3f} us; worst residual "
              f"{np.max(np.abs(pred - y) / y):.3f}")
        for r in rows:
            if not r[0].startswith("h"):
                p_us = coef @ np.array([1.0, *r[2:]])
                print(f"{cap:5} {r[0]:13} measured {r[1]:.1f} us, fit {p_us:.1f} us ({r[1] / p_us:.3f}x)")
        results.append(dict(kind="fit", cap=cap, fixed_us=coef[0], per_tile_us=coef[1], per_step_us=coef[2],
                            per_diag_us=coef[3]))


def analyse(trace):
    """Per compute warpgroup and tile: the time in each named part; per CTA, its end before the kernel's."""
    by_tid = defaultdict(list)
    for e in trace["traceEvents"]:
        by_tid[e["tid"]].append(e)
    tiles, ends, starts = [], {}, {}
    mem = defaultdict(float)
    for tid, evs in by_tid.items():
        wg = (tid - 1) % 3
        block = (tid - 1) // 3
        ends[block] = max(ends.get(block, 0), evs[-1]["ts"])
        starts[block] = min(starts.get(block, 1e30), evs[0]["ts"])
        stack, open_names, cur = [], defaultdict(int), None
        for e in evs:
            n = e["name"]
            if e["ph"] == "B":
                stack.append((n, e["ts"], open_names[n] == 0))
                open_names[n] += 1
                if n == "tile" and open_names[n] == 1 and wg < 2:
                    cur = dict(wg=wg, block=block, start=e["ts"], parts=defaultdict(float), qk=0)
            else:
                n0, ts0, outer = stack.pop()
                open_names[n0] -= 1
                if not outer:
                    continue
                d = e["ts"] - ts0
                if wg == 2:
                    mem[n0] += d
                elif n0 == "tile":
                    if cur is not None:
                        cur["dur"] = d
                        tiles.append(cur)
                    cur = None
                elif cur is not None:
                    cur["parts"][n0] += d
                    if n0 == "qk":
                        cur["qk"] += 1
                else:
                    pass
    kernel_end = max(ends.values())
    kernel_start = min(starts.values())
    tail = [kernel_end - e for e in ends.values()]
    span = kernel_end - kernel_start
    by_steps = defaultdict(list)
    for t in tiles:
        by_steps[t["qk"]].append(t)
    summary = dict(span_us=span, tail_mean_us=float(np.mean(tail)), tail_max_us=float(np.max(tail)),
                   tiles=len(tiles), memory=dict(mem), by_steps={})
    for n, ts in sorted(by_steps.items()):
        names = sorted({k for t in ts for k in t["parts"]})
        summary["by_steps"][n] = dict(count=len(ts), dur=float(np.mean([t["dur"] for t in ts])),
                                      **{k: float(np.mean([t["parts"].get(k, 0.0) for t in ts])) for k in names})
    return summary


def part_b(results):
    sets = bounds_sets()
    kp.PROFILE_DIR = str(OUT / "traces")
    for cap in ("none", "tanh"):
        p = problem(cap)
        q, k, v = make_device_tensors(p, 0)
        for name in ("bench_even", "bench_ragged"):
            d = OUT / "traces" / f"{cap}-{name}"
            d.mkdir(parents=True, exist_ok=True)
            kp.PROFILE_DIR = str(d)
            fn = kp.build_forward(p, KernelConfig.for_problem(p, **TILES[cap]))
            bnd = jnp.asarray(sets[name])
            for _ in range(2):
                jax.block_until_ready(fn(q, k, v, bnd))
            time.sleep(1.0)
            jax.effects_barrier()
            files = sorted(glob.glob(str(d / "*-trace.json")))
            if not files:
                print(f"{cap} {name}: no trace written", flush=True)
                continue
            trace = json.loads(Path(files[-1]).read_text())
            s = analyse(trace)
            results.append(dict(kind="profile", cap=cap, bounds=name, **s))
            print(f"\n== B: {cap} {name}: span {s['span_us']:.1f} us, tail mean {s['tail_mean_us']:.1f} max "
                  f"{s['tail_max_us']:.1f} us, {s['tiles']} warpgroup-tiles; memory wg {s['memory']}", flush=True)
            for n, row in s["by_steps"].items():
                print(f"  {n} KV steps x{row['count']:5}: " + ", ".join(
                    f"{k} {v:.2f}" for k, v in row.items() if k != "count"), flush=True)
            with open(files[-1], "rb") as src, gzip.open(OUT / f"trace-{cap}-{name}.json.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            shutil.rmtree(d)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        part_a(results)
    finally:
        (OUT / "probe_tiles.json").write_text(json.dumps(results, indent=1, default=float))
    try:
        part_b(results)
    finally:
        (OUT / "probe_tiles.json").write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
