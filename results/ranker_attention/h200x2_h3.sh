#!/usr/bin/env bash
# Run H, call 3 (2x H200): cap_cost_probe.py, the cap's cost on the dense problem and the bench's rows,
# with the shipped table (kernel hash 7ce0d415176e0964). GPU 0: the T=8k shape; GPU 1: the other two.
# Usage: bash results/ranker_attention/h200x2_h3.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
probe() {  # GPU LABEL SHAPES...
  local gpu=$1 label=$2; shift 2
  local t
  t=$(date +%s)
  (cd results/ranker_attention && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$ROOT:$ROOT/.devdeps timeout -s INT 400 \
      python3 cap_cost_probe.py "$OUT/$label.json" "$@") > "$OUT/$label.txt" 2>&1
  echo "$label rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/$label.txt"
}
probe 0 cap-cost-gpu0 d128-b4-t8k &
probe 1 cap-cost-gpu1 d128-b16-t2k-gqa d64-b64-t1k &
wait
grep -h -v "^ranker_attention:" "$OUT"/cap-cost-gpu*.txt | tail -n 40
