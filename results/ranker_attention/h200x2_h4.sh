#!/usr/bin/env bash
# Run H, call 4 (2x H200): A/B of the softmax without a running max under a bounding cap (attempt 9).
# A = the working tree (the committed kernel), B = a copy with static-max.patch applied. GPU 0 runs A then
# B, GPU 1 runs B then A (static_max_ab.py, one process per version; results written after every
# shape, so a process cut at its limit keeps what it measured).
# Usage: bash results/ranker_attention/h200x2_h4.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
rm -rf /tmp/kB && mkdir -p /tmp/kB && cp -r kerneltune tests /tmp/kB/ \
  && (cd /tmp/kB && patch -p1 < "$ROOT/results/ranker_attention/2026-11-30-h200-run-h/static-max.patch") \
  > "$OUT/patch.txt" 2>&1
run() {  # GPU LABEL KERNEL_ROOT
  local gpu=$1 label=$2 root=$3
  local t
  t=$(date +%s)
  (cd results/ranker_attention && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$root:$ROOT/.devdeps \
      timeout -s INT 170 python3 static_max_ab.py "$label" "$OUT/$label.json") > "$OUT/$label.txt" 2>&1
  echo "$label rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/$label.txt"
}
( run 0 gpu0-A "$ROOT"; run 0 gpu0-B /tmp/kB ) &
( run 1 gpu1-B /tmp/kB; run 1 gpu1-A "$ROOT" ) &
wait
grep -h "us  wall\|rc=" "$OUT"/gpu*.txt
