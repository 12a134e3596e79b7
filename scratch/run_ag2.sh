#!/usr/bin/env bash
# Run AG, call 2: attempt 18's A/B (scratch/ab_rowsum.py; its docstring has the rule).  Usage: bash scratch/run_ag2.sh OUTDIR
set -u
FINAL=$1
OUT=/tmp/ag2; rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu-start.csv" 2>&1
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-200} timeout 560 python3 scratch/ab_rowsum.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? $(( $(date +%s) - t )) s" >> "$OUT/ab-console.txt"
gzip -k "$OUT/ab_rowsum.json"
cp "$OUT/ab-console.txt" "$OUT/ab_rowsum.json.gz" "$OUT/gpu-start.csv" "$FINAL/"
grep -v '^{' "$OUT/ab-console.txt" | tail -40
