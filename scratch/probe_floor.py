"""Run AL call 2 (issue 23, a timing probe, never to be adopted): how much of the D=64 kernel's time is its softmax.
The shipped configs (no cap; tanh) on the bench's D=64 even and ragged rows, with the KV step's softmax replaced at
trace time (`KT_PROBE`): `exp_only`, P = exp2 of the raw logits (the shipped FMA/SFU split; no cap, mask, max, row
sum or rescale); `nosoftmax`, P = the raw logits (the wgmmas, barriers, conversion and the tile's other work only).
Outputs are wrong by design; rounds alternate the order; CUPTI under the engine's stopping rule.
Usage: OUT=dir AB_SECONDS=s python scratch/probe_floor.py
"""

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import api
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.measure import MeasureSettings

api.kernel_source_hash = lambda: "c14a0802e022d760"  # main's: the shipped table's configs, the probe hook aside
OUT = Path(os.environ.get("OUT", "."))
SPEC = {s.name: s for s in load_spec(Path("search_spaces/bench_ranker_attention.toml")).shapes}
ROWS = [(shape, cap) for shape in ("d64-b64-t1k", "d64-b64-t1k-ragged") for cap in ("none", "tanh")]
PROBES = ("", "exp_only", "nosoftmax")


def main():
    from kerneltune.backends.cuda_jax import time_jax

    OUT.mkdir(parents=True, exist_ok=True)
    jobs, results = [], []
    for shape, cap in ROWS:
        spec = SPEC[shape]
        problem = Problem(**spec.problem, cap_method=cap, cap=30.0 if cap != "none" else None)
        tiles = api.choose_config(problem, None, budget_for(problem.cap_method, False)).tile()
        bounds = ranker_bounds(problem.batch, problem.seq_len, spec.history, spec.candidates,
                               np.random.default_rng(0))
        if not spec.ragged:
            bounds[:] = bounds[0]
        fns = {}
        for probe in PROBES:
            os.environ["KT_PROBE"] = probe
            fns[probe or "shipped"] = PLUGIN.build(problem, tiles)["plain"]
        os.environ["KT_PROBE"] = ""
        print(shape, cap, tiles, flush=True)
        jobs.append((shape, cap, problem, jnp.asarray(bounds), fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "90"))
    settings = MeasureSettings(max_seconds=0.5)
    rnd = 0
    while time.time() < deadline:
        for shape, cap, problem, jb, fns in jobs:
            q, k, v = make_device_tensors(problem, 0)
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                tm = time_jax(fn, (q, k, v, jb), settings)
                results.append(dict(shape=shape, cap=cap, variant=name, round=rnd, median_us=tm.median_us,
                                    spread=tm.spread))
        rnd += 1
        (OUT / "probe_floor.json").write_text(json.dumps(results, indent=1))
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        t[(r["shape"], r["cap"])][r["variant"]].append(r["median_us"])
    print("\n== each probe over the shipped kernel, medians over rounds ==")
    for key, v in t.items():
        base = median(v["shipped"])
        print(*key, f"shipped {base:.1f} us ({len(v['shipped'])} rounds);",
              *(f"{n} x{median(v[n]) / base:.3f}" for n in v if n != "shipped"))


if __name__ == "__main__":
    main()
