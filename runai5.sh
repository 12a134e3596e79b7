#!/usr/bin/env bash
# Run AI, call 5: scratch/probe_lazy.py with VARIANTS=off,lazy,lazy_warp (no dumps). Usage: bash runai5.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu-call5.csv"
VARIANTS=off,lazy,lazy_warp OUT="$OUT" DUMP=/tmp/none AB_SECONDS=70 timeout -s INT 170 python3 scratch/probe_lazy.py \
  > "$OUT/probe-console.txt" 2>&1; echo "probe rc=$?"
tail -n 12 "$OUT/probe-console.txt"
