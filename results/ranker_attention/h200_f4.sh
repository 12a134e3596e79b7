#!/usr/bin/env bash
# Run F, call 4 (1x H200): `kerneltune bench ranker-attention` again, now that a tuned entry the problem
# refuses (call 3: the clamp entry's fast_math=False for tanh_approx at T=8k) is passed over for the next
# nearest, and equally near entries prefer the same cap. Same table (run F's sweep) and kernel as call 3.
# Usage: bash results/ranker_attention/h200_f4.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=/tmp/run-f4 && mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
t=$(date +%s)
timeout -s INT 240 python3 -m kerneltune bench ranker-attention --out "$R/bench" > "$R/bench-console.txt" 2>&1
echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt"
tar czf "$OUT/run-f4.tgz" -C "$R" .
grep -i "warn\|nearest\|not used" "$R/bench-console.txt" | head; tail -n 26 "$R/bench-console.txt"
