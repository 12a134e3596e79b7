#!/usr/bin/env bash
# The bench on each GPU of an x2 machine at once, as a replicate: each process's ratios are its own,
# and the two processes show how far a ratio moves between GPUs and runs.
# Usage: bash results/ranker_attention/bench_on_both_gpus.sh OUTDIR LIMIT
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
for g in 0 1; do
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=$g timeout -s INT "$LIMIT" python3 -m kerneltune bench ranker-attention \
        --out "/tmp/bench-gpu$g" > "$OUT/bench-gpu$g-console.txt" 2>&1
    echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/bench-gpu$g-console.txt"
    cp /tmp/bench-gpu$g/*.json "$OUT/bench-gpu$g.json" ) &
done
wait
tail -n 40 "$OUT/bench-gpu0-console.txt"; tail -n 2 "$OUT/bench-gpu1-console.txt"
