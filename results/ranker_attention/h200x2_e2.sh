#!/usr/bin/env bash
# Run E, call 2 (2x H200), results packed after each phase:
#   GPU 0 (this tree, kernel hash 2629c2184673c60b = the shipped table's): `kerneltune verify
#     ranker-attention` on all six entries, then `kerneltune bench ranker-attention` (now with
#     tanh_approx rows);
#   GPU 1 (a copy with run-e/overlap-softmax.patch applied): what ptxas says about the overlapped
#     kernel against the plain one (wgmma serialisation, registers), then the A/B sweep of
#     run-e/ab-space.toml (overlapped tiles against the plain kernel's ping-pong tiles, same run).
# Usage: bash results/ranker_attention/h200x2_e2.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
E=results/ranker_attention/2026-11-30-h200x2-run-e
export PYTHONUNBUFFERED=1
R=/tmp/run-e2  # outside $OUT: only the packed archives come back
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
( export CUDA_VISIBLE_DEVICES=0 PYTHONPATH=.:.devdeps
  t=$(date +%s)
  timeout -s INT 200 python3 -m kerneltune verify ranker-attention > "$R/verify-console.txt" 2>&1
  echo "verify rc=$? wall $(( $(date +%s) - t )) s" >> "$R/verify-console.txt"
  tar czf "$OUT/verify.tgz" -C "$R" verify-console.txt gpus.csv
  t=$(date +%s)
  timeout -s INT 330 python3 -m kerneltune bench ranker-attention --out "$R/bench" > "$R/bench-console.txt" 2>&1
  echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt"
  tar czf "$OUT/bench.tgz" -C "$R" bench bench-console.txt ) &
( export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/exp:$ROOT/.devdeps
  rm -rf /tmp/exp && mkdir -p /tmp/exp && cp -r kerneltune search_spaces /tmp/exp/
  (cd /tmp/exp && patch -p1 -s < "$ROOT/$E/overlap-softmax.patch")
  mkdir -p "$R/ptxas"
  i=0
  for cfg in '{"block_q":64,"block_kv":128,"num_stages":2}' \
             '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false}' \
             '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false,"p_in_registers":false}' \
             '{"block_q":64,"block_kv":64,"num_stages":3,"overlap_softmax":true}'; do
    mkdir -p "$R/ptxas/c$i"; echo "$cfg" > "$R/ptxas/c$i/config.json"
    MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_SASS=1 MOSAIC_GPU_DUMP_TO="$R/ptxas/c$i" \
        timeout -s INT 60 python3 "$ROOT/results/ranker_attention/ptxas_probe.py" "$cfg" > "$R/ptxas/c$i/console.txt" 2>&1
    echo "rc=$?" >> "$R/ptxas/c$i/console.txt"
    i=$((i + 1))
  done
  tar czf "$OUT/ptxas.tgz" -C "$R" ptxas
  t=$(date +%s)
  (cd /tmp/exp && timeout -s INT 300 python3 -m kerneltune sweep ranker-attention --space "$ROOT/$E/ab-space.toml" \
      --out "$R/ab" --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$R/ab-console.txt" 2>&1)
  echo "ab sweep rc=$? wall $(( $(date +%s) - t )) s" >> "$R/ab-console.txt"
  tar czf "$OUT/ab.tgz" --exclude=jax-cache -C "$R" ab ab-console.txt ) &
wait
grep -il "serializ" "$R"/ptxas/*/* 2>/dev/null | head; grep -h "rc=" "$R"/ptxas/*/console.txt
tail -n 8 "$R/verify-console.txt"; tail -n 6 "$R/ab-console.txt"; tail -n 50 "$R/bench-console.txt"
