#!/usr/bin/env bash
# Run AE, call 3: the null variant's SASS (compile only), then its A/B against main's kernel (timing only: its dead
# code never runs). Usage (repo root, main's package in main_ranker/): bash run_ae3.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user "$OUT/ab"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
PROBE_VARIANTS=null bash probe/run.sh "$OUT" > "$OUT/probe-console.txt" 2>&1
cat "$OUT/probe-console.txt"
OUT="$OUT/ab" AB_SECONDS=200 AB_ACCURACY_DONE=1 timeout -s INT -k 8 360 python3 ab_null.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$?"
gzip "$OUT/ab/ab_null.json"
grep -A30 "^== timing" "$OUT/ab-console.txt"
