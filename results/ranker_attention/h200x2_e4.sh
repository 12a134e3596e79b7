#!/usr/bin/env bash
# Run E, call 4 (one GPU): ptxas's own report (MOSAIC_GPU_DUMP_PTXAS, only the *.ptxas files kept) on
# the plain kernel and the overlapped one with P in registers and in SMEM, d128-tanh-long's shape,
# from a copy with run-e/overlap-softmax.patch applied. Calls 2 and 3 dumped the MLIR and SASS too;
# their archives were too large to come back.
# Usage: bash results/ranker_attention/h200x2_e4.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
E=results/ranker_attention/2026-11-30-h200x2-run-e
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/exp:$ROOT/.devdeps
R=/tmp/run-e4
rm -rf /tmp/exp "$R" && mkdir -p /tmp/exp "$R/ptxas" && cp -r kerneltune search_spaces tests /tmp/exp/
(cd /tmp/exp && patch -p1 -s < "$ROOT/$E/overlap-softmax.patch")
i=0
for cfg in '{"block_q":64,"block_kv":128,"num_stages":2}' \
           '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false}' \
           '{"block_q":64,"block_kv":128,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false,"p_in_registers":false}' \
           '{"block_q":64,"block_kv":64,"num_stages":2,"overlap_softmax":true,"schedule_barrier":false}'; do
  d="$R/dump/c$i"; mkdir -p "$d" "$R/ptxas/c$i"; echo "$cfg" > "$R/ptxas/c$i/config.json"
  MOSAIC_GPU_DUMP_PTXAS=1 MOSAIC_GPU_DUMP_TO="$d" \
      timeout -s INT 60 python3 "$ROOT/results/ranker_attention/ptxas_probe.py" "$cfg" > "$R/ptxas/c$i/console.txt" 2>&1
  echo "rc=$?" >> "$R/ptxas/c$i/console.txt"
  ls -la "$d" > "$R/ptxas/c$i/dump-files.txt"
  cp "$d"/*.ptxas "$R/ptxas/c$i/" 2>/dev/null
  i=$((i + 1))
done
tar czf "$OUT/ptxas.tgz" -C "$R" ptxas
for d in "$R"/ptxas/c*; do echo "== $(cat $d/config.json)"; cat "$d"/*.ptxas | grep -v "^$" | head -12; done
