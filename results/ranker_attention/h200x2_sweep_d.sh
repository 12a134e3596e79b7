#!/usr/bin/env bash
# Run D (2x H200): the exhaustive sweep of every bucket of the default space (now with the FMA-pipe
# exp2, `exp2_on_fma`), as one shared Optuna study (SQLite) worked by two workers, one per GPU.
# Resumable across calls: the study database and the per-worker journals of an earlier call are
# taken from results/ranker_attention/2026-11-30-h200x2-run-d/sweep/ when they are there.
# Usage: bash results/ranker_attention/h200x2_sweep_d.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
PREV=results/ranker_attention/2026-11-30-h200x2-run-d/sweep
RUN=$OUT/sweep
mkdir -p "$RUN/journals"
[ -f "$PREV/study.db" ] && cp "$PREV/study.db" "$RUN/study.db"
[ -d "$PREV/journals" ] && cp "$PREV"/journals/*.jsonl "$RUN/journals/"
mkdir -p "$RUN/logs"  # the ceilings are measured by this run's first call, reused by the next
[ -f "$PREV/logs/ceilings.json" ] && cp "$PREV/logs/ceilings.json" "$RUN/logs/"
start=$(date +%s)
for w in 0 1; do
  timeout -s INT "$LIMIT" python3 -m kerneltune sweep ranker-attention --out "$RUN" \
      --storage "sqlite:///$RUN/study.db" --study run-d --worker "w$w" --gpus "$w" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 > "$RUN/w$w-console-$start.txt" 2>&1 &
done
wait
echo "sweep call from $start: $(( $(date +%s) - start )) s" >> "$RUN/walls.txt"
pkill -f kerneltune.tuning.worker
tar czf "$OUT/sweep.tgz" --exclude=jax-cache -C "$OUT" sweep
tail -n 8 "$RUN/w0-console-$start.txt"; wc -l "$RUN"/journals/*.jsonl
