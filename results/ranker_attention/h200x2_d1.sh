#!/usr/bin/env bash
# Run D, step 1 (2x H200), results packed after each phase:
#   GPU 0: `kerneltune bench ranker-attention` (issue 9: T=8k no longer out of memory, attention_mgpu scaled);
#   GPU 1: `kerneltune verify ranker-attention` on the shipped table (issue 5), then the gpu-marked tests.
# Usage: bash results/ranker_attention/h200x2_d1.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=$OUT/r
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
( CUDA_VISIBLE_DEVICES=0 timeout -s INT 400 python3 -m kerneltune bench ranker-attention --out "$R/bench" \
      > "$R/bench-console.txt" 2>&1; echo "bench rc=$?" >> "$R/bench-console.txt"
  tar czf "$OUT/bench.tgz" -C "$R" bench bench-console.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  t0=$(date +%s)
  timeout -s INT 200 python3 -m kerneltune verify ranker-attention > "$R/verify-console.txt" 2>&1
  echo "verify rc=$? wall $(( $(date +%s) - t0 )) s" >> "$R/verify-console.txt"
  tar czf "$OUT/verify.tgz" -C "$R" verify-console.txt gpus.csv
  timeout -s INT 180 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/kernels/ranker_attention/test_gpu.py \
      tests/bench > "$R/pytest-gpu.txt" 2>&1
  echo "pytest rc=$?" >> "$R/pytest-gpu.txt"
  tar czf "$OUT/pytest.tgz" -C "$R" pytest-gpu.txt ) &
wait
tail -n 40 "$R/verify-console.txt"; tail -n 6 "$R/pytest-gpu.txt"; tail -n 45 "$R/bench-console.txt"
