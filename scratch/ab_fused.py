"""Attempt 27 (issue 23, run AN): the tanh instruction's cap under static_max with each register's tanh and exp2
emitted one register after another (`fused_cap_exp2`). The shipped kernel emits the tanh of every register of a KV
step's logits, then their exp2: in its SASS (run Z) all 64 MUFU.TANH of a step issue first (512 cycles of a
sub-partition's special-function unit) while the FMA pipe, which takes 5 of every 8 exp2 at D=64, waits for them.
Emitted register by register, one register's tanh can overlap another's exp2. The runtime's configs of the tanh bench
rows (the same kernels serve tanh_approx's out-only calls) with the field off (`shipped`) and on (`fused`).
1. outputs: both variants on each row's timing inputs, then against the float32 reference (verify.compare) on a
   random and the adversarial bounds, outputs poisoned; the two should agree bitwise (the same arithmetic; a
   masked key's p is 0 instead of ~2**-126);
2. timing: rounds alternating the order until AB_SECONDS run out.
Rule (written before the run): go on to adoption when every check is within tolerance, the geomean over the two
D=64 rows is at most 0.98 and no D=64 row is over 1.0; each D=128 entry takes the field where its row is at most
0.995.
Usage: OUT=dir AB_SECONDS=s python scratch/ab_fused.py
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
from kerneltune.kernels.ranker_attention.inputs import adversarial_bounds, make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
SPEC = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
ROWS = [("d64-b64-t1k-ragged", "tanh"), ("d64-b64-t1k", "tanh"), ("d128-b16-t2k-gqa", "tanh"),
        ("d128-b8-t4k-ragged", "tanh"), ("d128-b8-t4k-gqa8", "tanh")]


def main():
    from kerneltune.backends.cuda_jax import time_jax

    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []

    def emit(row):
        results.append(row)
        print(json.dumps(row), flush=True)
        (OUT / "ab_fused.json").write_text(json.dumps(results, indent=1))

    for shape, cap in ROWS:
        spec = SPEC[shape]
        problem = Problem(**spec.problem, cap_method=cap, cap=30.0 if cap != "none" else None)
        tiles = api.choose_config(problem, None, budget_for(problem.cap_method, False)).tile()
        configs = {n: KernelConfig.for_problem(problem, **{**tiles, "fused_cap_exp2": f})
                   for n, f in (("shipped", False), ("fused", True))}
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates,
                               np.random.default_rng(0))
        if not spec.ragged:
            bounds[:] = bounds[0]
        fns = {n: build_forward(problem, c) for n, c in configs.items()}
        poisoned = {n: build_forward(problem, c, poisoned=True) for n, c in configs.items()}
        q, k, v = make_device_tensors(problem, 0)
        rng = np.random.default_rng(24)
        cases = adversarial_bounds(problem.seq_len, rng)
        adv = np.tile(cases, (-(-problem.batch // len(cases)), 1))[: problem.batch]
        for case, b in (("timing", bounds), ("adversarial", adv)):
            jb = jnp.asarray(b)
            with jax.default_matmul_precision("highest"):
                ro, rl = reference_f32(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), jb,
                                       sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
            outs = {}
            for n, fn in poisoned.items():
                o, lse = fn(q, k, v, jb, jnp.full(q.shape, jnp.nan, q.dtype),
                            jnp.full((problem.batch, problem.q_heads, problem.seq_len), jnp.nan, jnp.float32))
                outs[n] = (np.asarray(o.astype(jnp.float32)), np.asarray(lse))
                c = compare(outs[n][0], outs[n][1], np.asarray(ro), np.asarray(rl), b, problem.dtype,
                            problem.cap_method)
                emit(dict(kind="check", shape=shape, cap=cap, case=case, variant=n, ok=c.ok, errors=list(c.errors)[:2],
                          rel_fro=c.rel_fro, lse_max=c.lse_max_abs, tiles=tiles if n == "shipped" else None))
            pairs = zip(outs["shipped"], outs["fused"], strict=True)
            same = all(np.array_equal(a, b2, equal_nan=True) for a, b2 in pairs)
            emit(dict(kind="bitwise", shape=shape, cap=cap, case=case, equal=same))
        jobs.append((shape, cap, problem, jnp.asarray(bounds), fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "60"))
    settings = MeasureSettings(max_seconds=0.5)
    rnd = 0
    while time.time() < deadline:
        for shape, cap, problem, jb, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            for n, fn in (list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]):
                tm = time_jax(fn, (q, k, v, jb), settings)
                emit(dict(kind="timing", shape=shape, cap=cap, variant=n, round=rnd, median_us=tm.median_us,
                          spread=tm.spread))
        rnd += 1
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing":
            t[r["shape"], r["cap"]][r["variant"]].append(r["median_us"])
    print("\n== fused over shipped, medians over rounds (per-round ratio quartiles) ==")
    d64 = []
    for (shape, cap), v in t.items():
        x = median(v["fused"]) / median(v["shipped"])
        q1, q3 = np.percentile(np.asarray(v["fused"]) / np.asarray(v["shipped"]), [25, 75])
        d64 += [x] if shape.startswith("d64") else []
        print(f"{shape} {cap}: shipped {median(v['shipped']):.1f} us, {len(v['shipped'])} rounds; "
              f"fused x{x:.3f} ({q1:.3f}-{q3:.3f})")
    ok = all(r["ok"] for r in results if r["kind"] == "check")
    same = all(r["equal"] for r in results if r["kind"] == "bitwise")
    gm = float(np.exp(np.mean(np.log(d64)))) if d64 else float("nan")
    print(f"checks ok: {ok}; bitwise equal: {same}; D=64 geomean x{gm:.3f}; worst D=64 x{max(d64, default=0):.3f}:",
          "GO ON TO ADOPTION" if ok and gm <= 0.98 and max(d64) <= 1.0 else "DO NOT ADOPT")


if __name__ == "__main__":
    main()
