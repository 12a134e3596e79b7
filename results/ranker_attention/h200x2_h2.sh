#!/usr/bin/env bash
# Run H, call 2 (2x H200): claim-at-end adopted (run G's claim-at-end.patch; new kernel hash), so the table is
# re-measured: run F's contenders in every bucket (resweep-space.toml: 55 configs, every persistent one and
# every one within 6% of run F's best), one shared Optuna study worked by two workers, one per GPU. When all
# six buckets have entries and time is left, the new table is installed (on the device's copy) and checked:
# GPU 0 runs `kerneltune verify ranker-attention`, GPU 1 the gpu-marked kernel tests, then the bench.
# Everything is packed into OUT before the call's limit (LIMIT seconds from the start).
# Usage: bash results/ranker_attention/h200x2_h2.sh OUTDIR LIMIT
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
G=results/ranker_attention/2026-11-30-h200-run-g
TABLE=results/tables/nvidia-h200/ranker_attention.json
R=/tmp/run-h2
RUN=$R/sweep
mkdir -p "$RUN"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
pack() { tar czf "$OUT/run-h2.tgz" --exclude=jax-cache -C "$R" . ; cp "$R"/*.txt "$OUT"/ 2>/dev/null; }
worker() {  # worker GPU
  timeout -s INT "$(( $(left) - 250 ))" python3 -m kerneltune sweep ranker-attention --space "$G/resweep-space.toml" \
      --out "$RUN" --storage "sqlite:///$RUN/study.db" --study run-h --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/w$1-console.txt" 2>&1
  echo "worker $1 rc=$? at $(( $(date +%s) - start )) s" >> "$RUN/walls.txt"
}
worker 0 & worker 1 &
wait
pkill -f kerneltune.tuning.worker
entries=$(python3 -c "import json; print(len(json.load(open('$RUN/tables/nvidia-h200/ranker_attention.json'))['entries']))")
echo "table entries: $entries, $(left) s left" | tee "$R/finish.txt"
pack
if [ "$entries" = 6 ] && [ "$(left)" -gt 150 ]; then
  cp "$RUN/tables/nvidia-h200/ranker_attention.json" "$TABLE"
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 timeout -s INT "$(( $(left) - 15 ))" python3 -m kerneltune verify ranker-attention \
        > "$R/verify-console.txt" 2>&1
    echo "verify rc=$? wall $(( $(date +%s) - t )) s" >> "$R/verify-console.txt" ) &
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT "$(( $(left) - 15 ))" python3 -m pytest -q -m gpu -k "True" \
        tests/kernels/ranker_attention/test_gpu.py > "$R/gpu-tests.txt" 2>&1
    echo "gpu tests rc=$? wall $(( $(date +%s) - t )) s" >> "$R/gpu-tests.txt"
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=1 timeout -s INT "$(( $(left) - 15 ))" python3 -m kerneltune bench ranker-attention \
        --out "$R/bench" > "$R/bench-console.txt" 2>&1
    echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt" ) &
  wait
  pack
fi
cat "$RUN/walls.txt" "$R/finish.txt"; tail -n 3 "$R"/verify-console.txt "$R"/gpu-tests.txt 2>/dev/null
tail -n 30 "$R/bench-console.txt" 2>/dev/null
