#!/usr/bin/env bash
# Run E, call 5 (2x H200): attempt 4, the softmax's exp2 on packed bf16 pairs (run-e/exp2-packed.patch,
# applied to a copy), against the same tiles without it, in one run per GPU: GPU 0 the D=128 buckets
# of run-e/ab4-space.toml, GPU 1 the D=64 ones. Each candidate is checked against the float32
# reference (outputs poisoned) before it is timed.
# Usage: bash results/ranker_attention/h200x2_e5.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
E=results/ranker_attention/2026-11-30-h200x2-run-e
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/exp:$ROOT/.devdeps
R=/tmp/run-e5  # outside $OUT: only the packed archive comes back
rm -rf /tmp/exp "$R" && mkdir -p /tmp/exp "$R" && cp -r kerneltune search_spaces /tmp/exp/
(cd /tmp/exp && patch -p1 -s < "$ROOT/$E/exp2-packed.patch")
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
ab() {  # ab GPU NAME BUCKET...
  local gpu=$1 name=$2; shift 2
  local args=(); for b in "$@"; do args+=(--bucket "$b"); done
  (cd /tmp/exp && CUDA_VISIBLE_DEVICES=$gpu timeout -s INT 240 python3 -m kerneltune sweep ranker-attention \
      --space "$ROOT/$E/ab4-space.toml" "${args[@]}" --out "$R/$name" --max-seconds 0.5 --compile-threads 4 \
      --run-timeout 90 > "$R/$name-console.txt" 2>&1; echo "rc=$?" >> "$R/$name-console.txt")
}
ab 0 ab4-d128 d128-tanh-long d128-tanh-approx-long d128-none-long d128-gqa-tanh-short &
ab 1 ab4-d64 d64-tanh-many-rows d64-none-many-rows &
wait
tar czf "$OUT/ab4.tgz" --exclude=jax-cache -C "$R" .
tail -n 7 "$R"/ab4-*-console.txt
