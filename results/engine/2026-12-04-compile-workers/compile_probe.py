"""Where a ranker candidate's 7 s of compile go, whether a serialized executable runs in another process,
and how compile throughput scales with processes against threads (issue 56). One H200.
Usage: python probe/compile_probe.py JOURNAL OUTDIR   (children: ... --child MODE ARGS)"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def configs(journal: str, head_dim: int, n: int) -> list[tuple[dict, dict]]:
    seen, out = set(), []
    for line in open(journal):
        r = json.loads(line)
        if r.get("status") == "ok" and r["problem"]["head_dim"] == head_dim and r["key"] not in seen:
            seen.add(r["key"])
            out.append((r["problem"], r["tiles"]))
    return out[:n]


def build(problem_d, tiles, poisoned, phases=None):
    from kerneltune.kernels.ranker_attention.config import KernelConfig
    from kerneltune.kernels.ranker_attention.kernel import build_forward
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN
    from kerneltune.kernels.ranker_attention.program import arg_specs

    problem = PLUGIN.problem(problem_d)
    cfg = KernelConfig.for_problem(problem, **tiles)
    t0 = time.perf_counter()
    fwd = build_forward(problem, cfg, poisoned=poisoned)
    traced = fwd.trace(*arg_specs(problem, poisoned=poisoned))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    if phases is not None:
        phases.update(trace=t1 - t0, lower=t2 - t1, compile=t3 - t2)
    return problem, compiled


def inputs(problem):
    import jax.numpy as jnp
    from kerneltune.kernels.ranker_attention.inputs import check_inputs

    q, k, v, timing, _ = check_inputs(problem, {}, 0)
    return q, k, v, jnp.asarray(timing)


def child_split(args):
    """Phases of one config's two entry points in a fresh process; serialize both; save outputs."""
    import jax
    import numpy as np
    from jax.experimental.serialize_executable import serialize

    problem_d, tiles, out = json.loads(args[0]), json.loads(args[1]), Path(args[2])
    rows = {}
    for poisoned in (False, True):
        ph = {}
        problem, c = build(problem_d, tiles, poisoned, ph)
        a = inputs(problem)
        if poisoned:
            import jax.numpy as jnp
            a = (*a, jnp.full(a[0].shape, jnp.nan, a[0].dtype),
                 jnp.full((problem.batch, problem.q_heads, problem.seq_len), jnp.nan, jnp.float32))
        t0 = time.perf_counter(); r = jax.block_until_ready(c(*a)); ph["first_call"] = time.perf_counter() - t0
        t0 = time.perf_counter(); r = jax.block_until_ready(c(*a)); ph["second_call"] = time.perf_counter() - t0
        t0 = time.perf_counter(); payload, it, ot = serialize(c); ph["serialize"] = time.perf_counter() - t0
        blob = pickle.dumps((payload, it, ot))
        ph["bytes"] = len(blob)
        name = "poisoned" if poisoned else "plain"
        (out / f"{name}.exe").write_bytes(blob)
        np.savez(out / f"{name}-out.npz", out=np.asarray(r[0].astype("float32")), lse=np.asarray(r[1]))
        rows[name] = ph
    print(json.dumps(rows))


def child_load(args):
    """Load the serialized entry points in a fresh process, run them on the same inputs, compare bitwise."""
    import jax
    import numpy as np
    from jax.experimental.serialize_executable import deserialize_and_load
    from kerneltune.kernels.ranker_attention.plugin import PLUGIN

    problem_d, out = json.loads(args[0]), Path(args[1])
    problem = PLUGIN.problem(problem_d)
    jax.devices()
    rows = {}
    for name in ("plain", "poisoned"):
        ph = {}
        t0 = time.perf_counter()
        payload, it, ot = pickle.loads((out / f"{name}.exe").read_bytes())
        c = deserialize_and_load(payload, it, ot)
        ph["load"] = time.perf_counter() - t0
        a = inputs(problem)
        if name == "poisoned":
            import jax.numpy as jnp
            a = (*a, jnp.full(a[0].shape, jnp.nan, a[0].dtype),
                 jnp.full((problem.batch, problem.q_heads, problem.seq_len), jnp.nan, jnp.float32))
        t0 = time.perf_counter(); r = jax.block_until_ready(c(*a)); ph["first_call"] = time.perf_counter() - t0
        t0 = time.perf_counter(); r = jax.block_until_ready(c(*a)); ph["second_call"] = time.perf_counter() - t0
        ref = np.load(out / f"{name}-out.npz")
        o = np.asarray(r[0].astype("float32"))
        ph["same_out"] = bool(np.array_equal(o, ref["out"], equal_nan=True))
        ph["same_lse"] = bool(np.array_equal(np.asarray(r[1]), ref["lse"], equal_nan=True))
        rows[name] = ph
    print(json.dumps(rows))


def child_compile(args):
    """Compile the given configs' two entry points with T threads; print the wall."""
    import jax

    work, threads = json.loads(args[0]), int(args[1])
    jax.devices()
    t0 = time.perf_counter()

    def one(pt):
        build(pt[0], pt[1], False); build(pt[0], pt[1], True)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, work))
    print(json.dumps({"wall": time.perf_counter() - t0, "n": len(work)}))


def run_child(*args, timeout=400):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.stderr.write(p.stderr[-3000:])
        return {"error": p.stderr[-500:], "proc_wall": wall}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "proc_wall": wall}


def scaling(work, procs, out_rows, label):
    """Split `work` over `procs` fresh processes (1 thread each), all started at once."""
    t0 = time.perf_counter()
    shares = [work[i::procs] for i in range(procs)]
    ps = [subprocess.Popen([sys.executable, __file__, "--child", "compile", json.dumps(s), "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in shares if s]
    res = [p.communicate() for p in ps]
    wall = time.perf_counter() - t0
    inner = [json.loads(o.strip().splitlines()[-1])["wall"] if o.strip() else None for o, _ in res]
    out_rows.append({"label": label, "procs": procs, "configs": len(work), "wall": wall,
                     "configs_per_min": 60 * len(work) / wall, "inner": inner})
    print(json.dumps(out_rows[-1]), flush=True)


def main():
    if sys.argv[1] == "--child":
        {"split": child_split, "load": child_load, "compile": child_compile}[sys.argv[2]](sys.argv[3:])
        return
    journal, outdir = sys.argv[1], Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    report = {"split": {}, "load": {}, "scaling": []}
    for d in (128, 64):
        p, t = configs(journal, d, 1)[0]
        sub = outdir / f"d{d}"; sub.mkdir(exist_ok=True)
        report["split"][d] = run_child("split", json.dumps(p), json.dumps(t), str(sub))
        print("split", d, json.dumps(report["split"][d]), flush=True)
        report["load"][d] = run_child("load", json.dumps(p), str(sub))
        print("load", d, json.dumps(report["load"][d]), flush=True)
    work = configs(journal, 128, 16)
    t0 = time.perf_counter()
    r = run_child("compile", json.dumps(work[:8]), "1")
    report["scaling"].append({"label": "1 process, 1 thread", "configs": 8, **r}); print(report["scaling"][-1], flush=True)
    r = run_child("compile", json.dumps(work), "8")
    report["scaling"].append({"label": "1 process, 8 threads", "configs": 16, **r}); print(report["scaling"][-1], flush=True)
    for procs in (4, 8, 14):
        scaling(work, procs, report["scaling"], f"{procs} processes")
    (outdir / "report.json").write_text(json.dumps(report, indent=1))
    print("total", time.perf_counter() - t0)


if __name__ == "__main__":
    main()
