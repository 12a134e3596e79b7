"""Run AJ, call 4: the bench's paired rounds on d128-b16-t2k-gqa without a cap (ours: the user's jitted call on the
shipped table; cuDNN's dense SDPA), with the SM clock, power and temperature sampled beside them (nvidia-smi -lms),
so each turn's clock and power can be read (run AI: in its paired rounds ours took 1.12x its short-batch time,
cuDNN 1.01x). Turns of TURN_S seconds, ROUNDS rounds, order reversed every other round.
Usage: OUT=dir TURN_S=0.25 ROUNDS=60 python3 scratch/probe_clock.py"""

import json
import os
import subprocess
import time
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import baselines, ranker_attention
from kerneltune.kernels.ranker_attention.bench.runner import _sampler
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds

OUT = Path(os.environ.get("OUT", "."))
TURN_S = float(os.environ.get("TURN_S", "0.25"))
ROUNDS = int(os.environ.get("ROUNDS", "60"))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    problem = Problem(batch=16, seq_len=2048, q_heads=8, kv_heads=2, head_dim=128)
    bounds = ranker_bounds(16, 2048, (1536, 1792), 256, np.random.default_rng(0))
    bounds[:] = bounds[0]
    q, k, v = make_device_tensors(problem, 0)
    jb = jnp.asarray(bounds)
    fn = jax.jit(lambda a, b, c, d: ranker_attention(a, b, c, d, cap_method="none"))
    jax.block_until_ready(fn(q, k, v, jb))
    ours = baselines.Runnable("jax", fn, (q, k, v, jb))
    cudnn, _ = baselines.dense_sdpa(q, k, v, problem.scale, "cudnn")
    samplers = {"ours": _sampler(ours), "cudnn": _sampler(cudnn)}
    for s in samplers.values():
        s(5)
    first = {name: median(s(20)) for name, s in samplers.items()}
    log = OUT / "smi.csv"
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,"
                            "clocks_event_reasons.active", "--format=csv,noheader,nounits", "-lms", "20"],
                           stdout=log.open("w"))
    time.sleep(1.0)
    turns = []
    for r in range(ROUNDS):
        order = list(samplers) if r % 2 == 0 else list(samplers)[::-1]
        for name in order:
            # At most 50 calls a sampler batch, as the bench's paired rounds (each call's output lives to its end).
            batch = max(3, min(50, int(TURN_S / (first[name] * 1e-6))))
            t0, times = time.time(), []
            while time.time() - t0 < TURN_S:
                times += samplers[name](batch)
            turns.append(dict(round=r, impl=name, start=t0, end=time.time(), median_us=median(times),
                              calls=len(times)))
    time.sleep(0.5)
    smi.terminate()
    smi.wait()
    samples = []
    for line in log.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            ts = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + parts[0].split(".")[1])
            samples.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), parts[4]))
        except (ValueError, IndexError):
            continue
    offset = 0.0  # nvidia-smi's timestamps are local wall time, as time.time() is on this machine
    for t in turns:
        inside = [s for s in samples if t["start"] + offset <= s[0] <= t["end"] + offset]
        t["smi_samples"] = len(inside)
        if inside:
            t["sm_mhz"] = float(np.mean([s[1] for s in inside]))
            t["power_w"] = float(np.mean([s[2] for s in inside]))
            t["temp_c"] = float(np.mean([s[3] for s in inside]))
            t["reasons"] = sorted({s[4] for s in inside})
    (OUT / "probe_clock.json").write_text(json.dumps(dict(first=first, turns=turns), indent=1))
    print("short-batch medians (us):", {k: round(v, 1) for k, v in first.items()})
    for name in samplers:
        ts = [t for t in turns if t["impl"] == name]
        mhz = [t["sm_mhz"] for t in ts if "sm_mhz" in t]
        pw = [t["power_w"] for t in ts if "power_w" in t]
        print(f"{name:6} turns {len(ts)}: median {median(t['median_us'] for t in ts):.1f} us "
              f"({median(t['median_us'] for t in ts) / first[name]:.3f}x its short-batch time); "
              f"SM clock {np.mean(mhz) if mhz else float('nan'):.0f} MHz (min {min(mhz, default=float('nan')):.0f}), "
              f"power {np.mean(pw) if pw else float('nan'):.0f} W; smi samples a turn "
              f"{np.mean([t['smi_samples'] for t in ts]):.1f}")
    ratios = [next(t for t in turns if t["round"] == r and t["impl"] == "cudnn")["median_us"]
              / next(t for t in turns if t["round"] == r and t["impl"] == "ours")["median_us"] for r in range(ROUNDS)]
    print(f"cudnn over ours, median of {ROUNDS} rounds: {median(ratios):.3f} "
          f"(quartiles {np.percentile(ratios, 25):.3f}-{np.percentile(ratios, 75):.3f})")
    print("reasons seen:", sorted({r for t in turns for r in t.get("reasons", [])}))


if __name__ == "__main__":
    main()
