"""The warm-start record (issue 56, item 5): TPE over each unseen bucket, replayed from that bucket's exhaustive
journal measured on the H200, with the warm start (the shipped H200 table's nearest buckets) and without it.

For each bucket: the exhaustive best, and for seeds 0-4 how many candidates each search measured before one came
within 1% of it. `python3 warm_start.py JOURNAL OUT.json` from the repository root (no GPU: a replay).
"""

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ["KERNELTUNE_TABLES"] = tempfile.mkdtemp()  # the shipped tables alone, no user's

from kerneltune.tuning.journal import Journal
from kerneltune.tuning.sweep import ReplayOptions, SearchOptions, SweepOptions, run_sweep

SPACE = Path("search_spaces/ranker_attention_unseen.toml")
journal = Path(sys.argv[1])
recorded = [r for r in Journal(journal).records() if r.get("status") in ("ok", "pruned")]  # every one measured
result = {"journal": str(journal), "space": str(SPACE), "buckets": {}}
for bucket in sorted({r["bucket"] for r in recorded}):
    mine = [r for r in recorded if r["bucket"] == bucket]
    best = min(r["timing"]["median_us"] for r in mine if r["status"] == "ok")
    row = {"feasible": len(mine), "exhaustive_best_us": best}
    for warm in (True, False):
        needed = []
        for seed in range(5):
            with tempfile.TemporaryDirectory() as out:
                opts = SweepOptions(kernel="ranker_attention", space_path=SPACE, out=Path(out), buckets=(bucket,),
                                    search=SearchOptions(strategy="tpe", budget=len(mine), seed=seed,
                                                         warm_start=warm),
                                    replay=ReplayOptions(journal))
                run_sweep(opts)
                order = [r for r in Journal(opts.journal_path).records() if r.get("status") in ("ok", "pruned")]
            hit = next(i + 1 for i, r in enumerate(order)
                       if r["status"] == "ok" and r["timing"]["median_us"] <= 1.01 * best)
            needed.append(hit)
        row["warm" if warm else "cold"] = {"candidates_to_1pct": needed, "median": statistics.median(needed),
                                           "share_of_feasible": statistics.median(needed) / len(mine)}
    result["buckets"][bucket] = row
    print(bucket, json.dumps(row), flush=True)
Path(sys.argv[2]).write_text(json.dumps(result, indent=1) + "\n")
