#!/usr/bin/env bash
# Issue 78 on one H200: `bash results/engine/2026-12-06-playoff/run.sh` from the repository root, the packages the
# GPU machine lacks carried as wheels in .whl. Three cold sweeps (an empty user cache each, the shipped table
# warm-starting them) of the two unseen buckets with the default settings, each ending in the leaders' playoff:
# the same winner, or winners within the recorded margin? The playoff's share of each sweep's wall.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-tables XLA_PYTHON_CLIENT_PREALLOCATE=false
R=${OUT:-/tmp/out}
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu.csv"
for i in 1 2 3; do
  export KERNELTUNE_CACHE=/tmp/kt-cache-$i  # cold: no builds, no ceilings
  t0=$(date +%s%N)
  timeout 170 python3 -m kerneltune sweep ranker-attention --space search_spaces/ranker_attention_unseen.toml \
    --bucket d64-none-ragged --bucket d128-gqa8-none-ragged --out kt-out/p$i > "$R/sweep-$i.txt" 2>&1
  echo "sweep-$i rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
  cp kt-out/p$i/tables/nvidia-h200/ranker_attention.json "$R/table-$i.json"
done
tar -czf "$R/journals.tgz" kt-out/p*/journals
python3 - "$R" <<'PY' | tee "$R/summary.txt"
import json, sys
from pathlib import Path
R = Path(sys.argv[1])
walls = {l.split()[0]: int(l.split("wall_ms=")[1]) / 1e3 for l in (R / "steps.txt").read_text().splitlines()}
for i in (1, 2, 3):
    t = json.loads((R / f"table-{i}.json").read_text())
    play = sum((e.get("playoff") or {}).get("seconds", 0.0) for e in t["entries"].values())
    print(f"sweep {i}: wall {walls[f'sweep-{i}']:.1f} s, playoffs {play:.1f} s ({100 * play / walls[f'sweep-{i}']:.1f}%)")
    for e in t["entries"].values():
        p = e.get("playoff") or {}
        print(f"  {e['bucket_name']}: {e['config']} {e['median_us']:.1f} us settled={e.get('settled')} "
              f"margin={p.get('margin')} ties={p.get('ties')} leaders={p.get('leaders')}")
PY
