"""TPE at a quarter of each bucket, replayed on run F's journals (the default space with the persistent
grid), ten seeds per bucket: how often it lands within 3% of the exhaustive best (CPU only, ~2 min).

Usage: python results/ranker_attention/tpe_replay_f.py
"""

import logging, tempfile
from pathlib import Path
logging.disable(logging.WARNING)
import optuna; optuna.logging.set_verbosity(optuna.logging.ERROR)
from kerneltune.tuning.runners import ReplayRunner
from kerneltune.tuning.sweep import SweepOptions, run_sweep
J = Path("results/ranker_attention/2026-11-30-h200x2-run-f/sweep/journals")
REC = list(ReplayRunner(J).recorded.values())
BUCKETS = sorted({r["bucket"] for r in REC})
best = {b: min(r["timing"]["median_us"] for r in REC if r["bucket"] == b and r["status"] == "ok") for b in BUCKETS}
feas = {b: sum(1 for r in REC if r["bucket"] == b and r["status"] != "constraint") for b in BUCKETS}
for b in BUCKETS:
    ratios = []
    for seed in range(10):
        [r] = run_sweep(SweepOptions(kernel="ranker_attention", space_path=Path("search_spaces/ranker_attention.toml"),
                                     out=Path(tempfile.mkdtemp()), buckets=(b,), strategy="tpe", budget=feas[b] // 4,
                                     seed=seed, replay=J))
        ratios.append(r.entry["median_us"] / best[b])
    print(f"{b:28} budget {feas[b]//4:2}/{feas[b]}: within 3% in {sum(x <= 1.03 for x in ratios)}/10, worst {max(ratios):.3f}", flush=True)
