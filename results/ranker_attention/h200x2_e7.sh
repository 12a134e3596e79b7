#!/usr/bin/env bash
# Run E, call 7 (2x H200): attempt 5 again, the persistent grid (run-e/persistent.patch,
# applied to a copy; its one-CTA-per-tile path now raises the compute registers where that dominates the
# compute code, as the shipped kernel does), against the same tiles without it, in one run per GPU:
# GPU 0 the T=2k buckets of run-e/ab5-space.toml, GPU 1 d128-tanh-long and the D=64 no-cap one. Each candidate is checked against the float32
# reference (outputs poisoned) before it is timed.
# Usage: bash results/ranker_attention/h200x2_e7.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
E=results/ranker_attention/2026-11-30-h200x2-run-e
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/exp:$ROOT/.devdeps
R=/tmp/run-e7  # outside $OUT: only the packed archive comes back
rm -rf /tmp/exp "$R" && mkdir -p /tmp/exp "$R" && cp -r kerneltune search_spaces /tmp/exp/
(cd /tmp/exp && patch -p1 -s < "$ROOT/$E/persistent.patch")
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
ab() {  # ab GPU NAME BUCKET...
  local gpu=$1 name=$2; shift 2
  local args=(); for b in "$@"; do args+=(--bucket "$b"); done
  (cd /tmp/exp && CUDA_VISIBLE_DEVICES=$gpu timeout -s INT 75 python3 -m kerneltune sweep ranker-attention \
      --space "$ROOT/$E/ab5-space.toml" "${args[@]}" --out "$R/$name" --max-seconds 0.5 --compile-threads 4 \
      --run-timeout 90 > "$R/$name-console.txt" 2>&1; echo "rc=$?" >> "$R/$name-console.txt")
}
ab 0 ab5-t2k b16-t2k-gqa-none b16-t2k-gqa-tanh &
ab 1 ab5-t4k-d64 d128-tanh-long b64-t1k-d64-none &
wait
tar czf "$OUT/ab5b.tgz" --exclude=jax-cache -C "$R" .
tail -n 7 "$R"/ab5-*-console.txt
