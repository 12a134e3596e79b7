#!/usr/bin/env bash
# Run E (2x H200): the exhaustive sweep of every bucket of the default space, now with the
# intra-warpgroup overlap (`overlap_softmax`), as one shared Optuna study (SQLite) worked by two
# workers, one per GPU. Resumable across calls: the study database, the per-worker journals and the
# ceilings of an earlier call are taken from results/ranker_attention/2026-11-30-h200x2-run-e/sweep/
# when they are there. With TESTS=1, GPU 1 first runs the overlapped half of the gpu-marked kernel
# tests (packed on their own), then joins the sweep for the time left.
# Usage: [TESTS=1] bash results/ranker_attention/h200x2_sweep_e.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
PREV=results/ranker_attention/2026-11-30-h200x2-run-e/sweep
RUN=$OUT/sweep
mkdir -p "$RUN/journals" "$RUN/logs"
[ -f "$PREV/study.db" ] && cp "$PREV/study.db" "$RUN/study.db"
[ -d "$PREV/journals" ] && cp "$PREV"/journals/*.jsonl "$RUN/journals/"
[ -f "$PREV/logs/ceilings.json" ] && cp "$PREV/logs/ceilings.json" "$RUN/logs/"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
start=$(date +%s)
worker() {  # worker GPU SECONDS
  timeout -s INT "$2" python3 -m kerneltune sweep ranker-attention --out "$RUN" \
      --storage "sqlite:///$RUN/study.db" --study run-e --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/w$1-console-$start.txt" 2>&1
}
worker 0 "$LIMIT" &
if [ "${TESTS:-0}" = 1 ]; then
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rs -k True \
        tests/kernels/ranker_attention/test_gpu.py > "$OUT/pytest-gpu-overlap.txt" 2>&1
    echo "pytest rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/pytest-gpu-overlap.txt"
    tar czf "$OUT/pytest.tgz" -C "$OUT" pytest-gpu-overlap.txt gpus.csv
    worker 1 $(( LIMIT - ($(date +%s) - start) )) ) &
else
  worker 1 "$LIMIT" &
fi
wait
echo "sweep call from $start: $(( $(date +%s) - start )) s" >> "$RUN/walls.txt"
pkill -f kerneltune.tuning.worker
tar czf "$OUT/sweep.tgz" --exclude=jax-cache -C "$OUT" sweep gpus.csv
tail -n 4 "$OUT/pytest-gpu-overlap.txt" 2>/dev/null; tail -n 8 "$RUN/w0-console-$start.txt"; wc -l "$RUN"/journals/*.jsonl
