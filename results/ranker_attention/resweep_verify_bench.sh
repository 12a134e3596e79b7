#!/usr/bin/env bash
# After a kernel change (new hash, stale table): re-measure the table on both GPUs of an x2 machine (one
# shared Optuna study over SPACE, one worker per GPU), install it on the device's copy, then check it:
# GPU 0 `kerneltune verify ranker-attention`, GPU 1 every gpu-marked ranker test, then the bench.
# Calling it again on the still-warm machine resumes the same study (the work folder is /tmp/STUDY).
# Small files are copied into OUT as they finish, the sweep folder (less its compile cache) is packed.
# Usage: bash results/ranker_attention/resweep_verify_bench.sh OUTDIR LIMIT SPACE STUDY
set -u
OUT=$1
LIMIT=$2
SPACE=$3
STUDY=$4
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
TABLE=results/tables/nvidia-h200/ranker_attention.json
R=/tmp/$STUDY
RUN=$R/sweep
mkdir -p "$RUN"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
pack() { tar czf "$OUT/$STUDY.tgz" --exclude=jax-cache -C "$R" . ; cp "$R"/*.txt "$OUT"/ 2>/dev/null; }
worker() {  # worker GPU
  timeout -s INT "$(( $(left) - 250 ))" python3 -m kerneltune sweep ranker-attention --space "$SPACE" \
      --out "$RUN" --storage "sqlite:///$RUN/study.db" --study "$STUDY" --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/w$1-console-$start.txt" 2>&1
  echo "worker $1 rc=$? at $(( $(date +%s) - start )) s (call started $start)" >> "$RUN/walls.txt"
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
    CUDA_VISIBLE_DEVICES=1 timeout -s INT "$(( $(left) - 15 ))" python3 -m pytest -q -m gpu \
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
