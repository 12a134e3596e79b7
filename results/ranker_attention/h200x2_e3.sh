#!/usr/bin/env bash
# Run E, call 3 (2x H200), results packed after each phase:
#   GPU 0: `kerneltune bench ranker-attention` again, FlexAttention now compiled fresh for each shape
#     and cap (call 2's ninth flex row, d64 tanh_approx, ran eagerly past Dynamo's recompile limit);
#   GPU 1 (a copy with run-e/overlap-softmax.patch applied): what ptxas says (MOSAIC_GPU_DUMP_PTXAS)
#     about the plain kernel and the overlapped one with P in registers and in SMEM, at
#     d128-tanh-long's shape; call 2 kept the SASS too, and its archive was too large to come back.
# Usage: bash results/ranker_attention/h200x2_e3.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
E=results/ranker_attention/2026-11-30-h200x2-run-e
export PYTHONUNBUFFERED=1
R=/tmp/run-e3  # outside $OUT: only the packed archives come back
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
( export CUDA_VISIBLE_DEVICES=0 PYTHONPATH=.:.devdeps
  t=$(date +%s)
  timeout -s INT 330 python3 -m kerneltune bench ranker-attention --out "$R/bench" > "$R/bench-console.txt" 2>&1
  echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt"
  tar czf "$OUT/bench.tgz" -C "$R" bench bench-console.txt gpus.csv ) &
( export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/exp:$ROOT/.devdeps
  rm -rf /tmp/exp && mkdir -p /tmp/exp && cp -r kerneltune search_spaces tests /tmp/exp/
  (cd /tmp/exp && patch -p1 -s < "$ROOT/$E/overlap-softmax.patch")
  mkdir -p "$R/ptxas"
  i=0
  for cfg in '{"block_q":64,"block_kv":128,"num_stages":2}' \
             '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false}' \
             '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false,"p_in_registers":false}'; do
    mkdir -p "$R/ptxas/c$i"; echo "$cfg" > "$R/ptxas/c$i/config.json"
    MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO="$R/ptxas/c$i" \
        timeout -s INT 60 python3 "$ROOT/results/ranker_attention/ptxas_probe.py" "$cfg" > "$R/ptxas/c$i/console.txt" 2>&1
    echo "rc=$?" >> "$R/ptxas/c$i/console.txt"
    i=$((i + 1))
  done
  find "$R/ptxas" -type f | xargs ls -la > "$R/ptxas/files.txt"
  tar czf "$OUT/ptxas.tgz" -C "$R" ptxas ) &
wait
for d in "$R"/ptxas/c*; do echo "== $d $(cat $d/config.json)"; grep -ih "serializ\|registers\|spill\|warning" "$d"/* | head -8; done
tail -n 52 "$R/bench-console.txt"
