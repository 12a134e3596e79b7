#!/usr/bin/env bash
# Run F (2x H200): the exhaustive sweep of every bucket of the default space with the persistent grid
# adopted (kernel hash changed, so all six buckets again), as one shared Optuna study (SQLite) worked by
# two workers, one per GPU. Resumable across calls: the study database, the per-worker journals and the
# ceilings of an earlier call are taken from results/ranker_attention/2026-11-30-h200x2-run-f/sweep/ when
# they are there. With TESTS=1, GPU 1 first runs the gpu-marked kernel tests and tile_cost_probe.py,
# then joins the sweep for the time left.
# Usage: [TESTS=1] bash results/ranker_attention/h200x2_sweep_f.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
PREV=results/ranker_attention/2026-11-30-h200x2-run-f/sweep
RUN=/tmp/run-f  # outside $OUT: only the packed archive comes back
mkdir -p "$RUN/sweep/journals" "$RUN/sweep/logs"
[ -f "$PREV/study.db" ] && cp "$PREV/study.db" "$RUN/sweep/study.db"
[ -d "$PREV/journals" ] && cp "$PREV"/journals/*.jsonl "$RUN/sweep/journals/"
[ -f "$PREV/logs/ceilings.json" ] && cp "$PREV/logs/ceilings.json" "$RUN/sweep/logs/"
[ -f "$PREV/walls.txt" ] && cp "$PREV/walls.txt" "$RUN/sweep/"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$RUN/gpus.csv"
start=$(date +%s)
worker() {  # worker GPU SECONDS
  timeout -s INT "$2" python3 -m kerneltune sweep ranker-attention --out "$RUN/sweep" \
      --storage "sqlite:///$RUN/sweep/study.db" --study run-f --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/sweep/w$1-console-$start.txt" 2>&1
}
worker 0 "$LIMIT" &
if [ "${TESTS:-0}" = 1 ]; then
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT 260 python3 -m pytest -m gpu -q -p no:cacheprovider -rs \
        tests/kernels/ranker_attention/test_gpu.py > "$RUN/pytest-gpu.txt" 2>&1
    echo "pytest rc=$? wall $(( $(date +%s) - t )) s" >> "$RUN/pytest-gpu.txt"
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT 150 python3 results/ranker_attention/tile_cost_probe.py \
        "$RUN/tile-cost.json" > "$RUN/tile-cost-console.txt" 2>&1
    echo "probe rc=$? wall $(( $(date +%s) - t )) s" >> "$RUN/tile-cost-console.txt"
    worker 1 $(( LIMIT - ($(date +%s) - start) )) ) &
else
  worker 1 "$LIMIT" &
fi
wait
echo "sweep call from $start: $(( $(date +%s) - start )) s" >> "$RUN/sweep/walls.txt"
pkill -f kerneltune.tuning.worker
tar czf "$OUT/run-f.tgz" --exclude=jax-cache -C "$RUN" .
tail -n 4 "$RUN/pytest-gpu.txt" 2>/dev/null; tail -n 8 "$RUN/tile-cost-console.txt" 2>/dev/null
tail -n 8 "$RUN/sweep/w0-console-$start.txt"; wc -l "$RUN"/sweep/journals/*.jsonl
