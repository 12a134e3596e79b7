#!/usr/bin/env bash
# Run G, call 1 (1x H200): ranker_gap_probe.py (where T=2k without a cap loses against the dense rate).
# Usage: bash results/ranker_attention/h200_g1.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=/tmp/run-g1 && mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
t=$(date +%s)
timeout -s INT 300 python3 results/ranker_attention/ranker_gap_probe.py "$R/gap-probe.json" > "$R/gap-probe.txt" 2>&1
echo "probe rc=$? wall $(( $(date +%s) - t )) s" >> "$R/gap-probe.txt"
cp "$R"/* "$OUT"/
tail -n 20 "$R/gap-probe.txt"
