#!/usr/bin/env bash
# Run F (2x H200), calls 2 on: the exhaustive sweep of every bucket of the default space with the
# persistent grid adopted (kernel hash 73af1297b5c6f141, so all six buckets again), as one shared Optuna
# study (SQLite) worked by two workers, one per GPU, resumed from results/ranker_attention/
# 2026-11-30-h200x2-run-f/sweep/ (study database, per-worker journals, ceilings; call 1 began it).
# When every bucket is done and time is left, the new table is installed in results/tables/ (on the
# device's copy) and checked: GPU 0 runs `kerneltune verify ranker-attention`, GPU 1 `kerneltune bench
# ranker-attention` and then tile_cost_probe.py.
# Usage: bash results/ranker_attention/h200x2_sweep_f.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
PREV=results/ranker_attention/2026-11-30-h200x2-run-f/sweep
TABLE=results/tables/nvidia-h200/ranker_attention.json
R=/tmp/run-f  # outside $OUT: only the packed archive comes back
RUN=$R/sweep
mkdir -p "$RUN/journals" "$RUN/logs"
cp "$PREV/study.db" "$RUN/study.db"
cp "$PREV"/journals/*.jsonl "$RUN/journals/"
cp "$PREV/logs/ceilings.json" "$RUN/logs/"
cp "$PREV/walls.txt" "$RUN/"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
worker() {  # worker GPU
  timeout -s INT "$(left)" python3 -m kerneltune sweep ranker-attention --out "$RUN" \
      --storage "sqlite:///$RUN/study.db" --study run-f --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/w$1-console-$start.txt" 2>&1
}
worker 0 & worker 1 &
wait
echo "sweep call from $start: $(( $(date +%s) - start )) s" >> "$RUN/walls.txt"
pkill -f kerneltune.tuning.worker
entries=$(python3 -c "import json; print(len(json.load(open('$RUN/tables/nvidia-h200/ranker_attention.json'))['entries']))")
echo "table entries: $entries, $(left) s left" | tee "$R/finish.txt"
if [ "$entries" = 6 ] && [ "$(left)" -gt 200 ]; then
  cp "$RUN/tables/nvidia-h200/ranker_attention.json" "$TABLE"
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 timeout -s INT "$(left)" python3 -m kerneltune verify ranker-attention \
        > "$R/verify-console.txt" 2>&1
    echo "verify rc=$? wall $(( $(date +%s) - t )) s" >> "$R/verify-console.txt" ) &
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT "$(left)" python3 -m kerneltune bench ranker-attention \
        --out "$R/bench" > "$R/bench-console.txt" 2>&1
    echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt"
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT "$(left)" python3 results/ranker_attention/tile_cost_probe.py \
        "$R/tile-cost.json" > "$R/tile-cost-console.txt" 2>&1
    echo "probe rc=$? wall $(( $(date +%s) - t )) s" >> "$R/tile-cost-console.txt" ) &
  wait
fi
tar czf "$OUT/run-f.tgz" --exclude=jax-cache -C "$R" .
tail -n 4 "$RUN/w0-console-$start.txt"; wc -l "$RUN"/journals/*.jsonl
tail -n 10 "$R/verify-console.txt" 2>/dev/null; tail -n 40 "$R/bench-console.txt" 2>/dev/null
tail -n 8 "$R/tile-cost-console.txt" 2>/dev/null
