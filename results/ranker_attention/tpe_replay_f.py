"""TPE at a quarter of each bucket, replayed on run F's journals (the default space with the persistent
grid), ten seeds per bucket: how often it lands within 3% of the exhaustive best (CPU only, ~2 min).

Usage: python results/ranker_attention/tpe_replay_f.py
"""

import logging
import tempfile
from pathlib import Path

import optuna

from kerneltune.tuning.runners import ReplayRunner
from kerneltune.tuning.sweep import SweepOptions, run_sweep

JOURNALS = Path("results/ranker_attention/2026-11-30-h200x2-run-f/sweep/journals")
SPACE = Path("search_spaces/ranker_attention.toml")


def main() -> None:
    logging.disable(logging.WARNING)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    records = list(ReplayRunner(JOURNALS).recorded.values())
    for bucket in sorted({r["bucket"] for r in records}):
        best = min(r["timing"]["median_us"] for r in records if r["bucket"] == bucket and r["status"] == "ok")
        feasible = sum(1 for r in records if r["bucket"] == bucket and r["status"] != "constraint")
        ratios = []
        for seed in range(10):
            [r] = run_sweep(SweepOptions(kernel="ranker_attention", space_path=SPACE, out=Path(tempfile.mkdtemp()),
                                         buckets=(bucket,), strategy="tpe", budget=feasible // 4, seed=seed,
                                         replay=JOURNALS))
            ratios.append(r.entry["median_us"] / best)
        within = sum(x <= 1.03 for x in ratios)
        print(f"{bucket:28} budget {feasible // 4:2}/{feasible}: within 3% in {within}/10, worst {max(ratios):.3f}")


if __name__ == "__main__":
    main()
