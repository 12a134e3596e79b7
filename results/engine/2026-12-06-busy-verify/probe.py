"""Probes for issue 56 on one H200 (run from the repository root, PYTHONPATH=.:.devdeps).

  probe.py compile OUT WORKERS VARIANT [N]   compile throughput of WORKERS compile workers on N unseen
                                             candidates (after a warm-up round), the sweep's own
                                             _CompileWorkers, empty build and JAX caches; VARIANT:
                                             default | nojaxcache | xla1 | pinned
  probe.py reference OUT BUCKET VARIANT      one shipped bucket's check references in a fresh process:
                                             first call (compile + compute) and second (compute),
                                             compiled as the plugin does with VARIANT's compiler options
                                             (default | autotune0 | notriton); a variant other than default
                                             is then compared with the default's outputs in-process
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
JOURNAL = ROOT / "results/engine/2026-12-05-one-entry/call1/w14-ranker_attention-live.jsonl"
TABLE = ROOT / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json"
OPTIONS = {"default": None, "autotune0": {"xla_gpu_autotune_level": 0},
           "notriton": {"xla_gpu_enable_triton_gemm": False}}


def _children() -> list[int]:
    me = str(os.getpid())
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            pids.append(int(stat.parent.name))
    return pids


def compile_throughput(out: Path, workers: int, variant: str, n: int) -> None:
    from kerneltune.build_cache import ENV as BUILD_CACHE_ENV
    from kerneltune.tuning.worker import COMPILE_CACHE_ENV
    from kerneltune.wire import candidate_request

    tmp = Path(tempfile.mkdtemp(prefix=f"kt-{variant}-{workers}-"))
    os.environ[BUILD_CACHE_ENV] = str(tmp / "builds")
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if variant != "nojaxcache":
        os.environ[COMPILE_CACHE_ENV] = str(tmp / "compile-cache")  # as a sweep's timing worker passes it on
    if variant == "xla1":
        os.environ["XLA_FLAGS"] = "--xla_gpu_force_compilation_parallelism=1"
    from kerneltune.tuning.compile_ahead import _CompileWorkers

    recs = [json.loads(line) for line in JOURNAL.read_text().splitlines()]
    cands = [r for r in recs if r.get("status") == "ok"]
    reqs = [candidate_request("ranker_attention", r["bucket"], r["problem"], r["tiles"], r["inputs"], r["seed"], {})
            for r in cands]
    pool = _CompileWorkers(workers, 300)
    t0 = time.perf_counter()
    warm = [pool.submit(r) for r in reqs[:workers]]
    for f in warm:
        f.result()
    warm_s = time.perf_counter() - t0
    if variant == "pinned":
        for core, pid in enumerate(sorted(_children())):
            subprocess.run(["taskset", "-a", "-p", "-c", str(core), str(pid)], capture_output=True, check=False)
    timed = reqs[workers:workers + n]
    t1 = time.perf_counter()
    futures = [pool.submit(r) for r in timed]
    compile_s = [f.result()[1] for f in futures]
    wall = time.perf_counter() - t1
    compile_s.sort()
    row = {"variant": variant, "workers": workers, "candidates": len(timed), "wall_s": wall,
           "per_minute": 60 * len(timed) / wall, "compile_median_s": compile_s[len(compile_s) // 2],
           "compile_p10_s": compile_s[len(compile_s) // 10], "compile_p90_s": compile_s[9 * len(compile_s) // 10],
           "startup_and_first_round_s": warm_s, "cores": os.cpu_count()}
    out.mkdir(parents=True, exist_ok=True)
    with (out / "compile.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row))
    for pid in _children():
        os.kill(pid, 9)
    os._exit(0)


def reference(out: Path, bucket: str, variant: str) -> None:
    import jax
    import numpy as np

    from kerneltune.kernels.ranker_attention import plugin as P
    from kerneltune.reference_cache import ReferenceCache
    from kerneltune.tuning.verify import VERIFY_SEED

    os.environ.pop("KERNELTUNE_BUILD_CACHE", None)  # every variant compiled here, none loaded
    table = json.loads(TABLE.read_text())
    entry = next(e for e in table["entries"].values() if e["bucket_name"] == bucket)
    problem = P.PLUGIN.problem(entry["problem"])

    if "--twin" in sys.argv:
        problem = dataclasses.replace(problem, cap_method="none", cap=None)
    t = time.perf_counter()
    inputs = P.PLUGIN.make_inputs(problem, entry.get("inputs", {}), VERIFY_SEED)
    jax.block_until_ready(inputs.q)
    inputs_s = time.perf_counter() - t

    def use(opts):  # the plugin's compile of the reference with these XLA options, no build cache
        P.REFERENCE_XLA_OPTIONS = opts or {}
        P._compiled_reference.cache_clear()

    cache = ReferenceCache(None)
    qkv = (inputs.q, inputs.k, inputs.v)
    use(OPTIONS[variant])
    times = []
    for case in (0, 1):
        inputs.memo.clear()
        t = time.perf_counter()
        ro, rl = P._reference(problem, inputs, 1.0, case, qkv, cache)
        jax.block_until_ready((ro, rl))
        times.append(time.perf_counter() - t)
    row = {"bucket": bucket, "twin": "--twin" in sys.argv, "variant": variant, "first_s": times[0],
           "second_s": times[1], "inputs_s": inputs_s}
    if variant != "default":
        use(None)
        inputs.memo.clear()
        do, dl = P._reference(problem, inputs, 1.0, 1, qkv, cache)
        fin = np.isfinite(np.asarray(dl))
        row["max_out_diff"] = float(np.max(np.abs(np.asarray(do) - np.asarray(ro))))
        row["max_lse_diff"] = float(np.max(np.abs(np.asarray(dl)[fin] - np.asarray(rl)[fin]))) if fin.any() else 0.0
        row["same_inf"] = bool((np.isfinite(np.asarray(dl)) == np.isfinite(np.asarray(rl))).all())
    out.mkdir(parents=True, exist_ok=True)
    with (out / "reference.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


if __name__ == "__main__":
    mode, out = sys.argv[1], Path(sys.argv[2])
    if mode == "compile":
        compile_throughput(out, int(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 56)
    else:
        reference(out, sys.argv[3], sys.argv[4])
