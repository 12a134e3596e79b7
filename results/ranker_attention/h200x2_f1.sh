#!/usr/bin/env bash
# Run F, call 1 (2x H200).
# GPU 0: A/B/A of the cross-tile ping-pong (run-f/pingpong-across-tiles.patch, applied to a copy) against
#   the persistent grid as committed, on run-f/ab6-space.toml (each candidate checked against the float32
#   reference, outputs poisoned); ab_decide.py decides; if it says adopt, the patch is applied to this
#   tree for the rest of the call. Then the exhaustive sweep of the default space (h200x2_sweep_f.sh's
#   worker, shared study run-f).
# GPU 1: the gpu-marked kernel tests, one-CTA-per-tile half first (the same code in both kernels), then
#   the persistent half once the decision is made (on the chosen kernel); then joins the sweep.
# Usage: bash results/ranker_attention/h200x2_f1.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
ROOT=$(pwd)
F=results/ranker_attention/2026-11-30-h200x2-run-f
export PYTHONUNBUFFERED=1
R=/tmp/run-f  # outside $OUT: only the packed archive comes back
mkdir -p "$R/sweep/journals" "$R/sweep/logs" "$R/ab"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
start=$(date +%s)
rm -rf /tmp/kA /tmp/kB && mkdir -p /tmp/kA /tmp/kB
cp -r kerneltune /tmp/kA/ && cp -r kerneltune /tmp/kB/
(cd /tmp/kB && patch -p1 -s < "$ROOT/$F/pingpong-across-tiles.patch")
ab() {  # ab COPY NAME
  (cd "/tmp/$1" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH="/tmp/$1:$ROOT/.devdeps" timeout -s INT 120 \
      python3 -m kerneltune sweep ranker-attention --space "$ROOT/$F/ab6-space.toml" --out "$R/ab/$2" \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$R/ab/$2-console.txt" 2>&1
   echo "rc=$?" >> "$R/ab/$2-console.txt")
}
worker() {  # worker GPU SECONDS
  PYTHONPATH=.:.devdeps timeout -s INT "$2" python3 -m kerneltune sweep ranker-attention --out "$R/sweep" \
      --storage "sqlite:///$R/sweep/study.db" --study run-f --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$R/sweep/w$1-console-$start.txt" 2>&1
}
gpu_tests() {  # gpu_tests NAME K_EXPR SECONDS
  local t=$(date +%s)
  CUDA_VISIBLE_DEVICES=1 PYTHONPATH=.:.devdeps timeout -s INT "$3" python3 -m pytest -m gpu -q \
      -p no:cacheprovider -rs -k "$2" tests/kernels/ranker_attention/test_gpu.py > "$R/pytest-$1.txt" 2>&1
  echo "pytest rc=$? wall $(( $(date +%s) - t )) s" >> "$R/pytest-$1.txt"
}
( ab kA A1; ab kB B; ab kA A2
  python3 results/ranker_attention/ab_decide.py "$R/ab/A1" "$R/ab/B" "$R/ab/A2" > "$R/ab/decision.txt" 2>&1
  if [ $? = 0 ]; then patch -p1 -s < "$F/pingpong-across-tiles.patch" && echo "applied B" >> "$R/ab/decision.txt"; fi
  touch "$R/ab/decided"
  worker 0 $(( LIMIT - ($(date +%s) - start) )) ) &
( gpu_tests one-cta False 240
  while [ ! -f "$R/ab/decided" ]; do sleep 2; done
  gpu_tests persistent True 240
  worker 1 $(( LIMIT - ($(date +%s) - start) )) ) &
wait
echo "sweep call from $start: $(( $(date +%s) - start )) s" >> "$R/sweep/walls.txt"
pkill -f kerneltune.tuning.worker
tar czf "$OUT/run-f1.tgz" --exclude=jax-cache -C "$R" .
cat "$R/ab/decision.txt"; tail -n 3 "$R"/pytest-*.txt
tail -n 6 "$R/sweep/w0-console-$start.txt"; wc -l "$R"/sweep/journals/*.jsonl
