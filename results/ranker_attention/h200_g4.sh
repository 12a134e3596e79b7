#!/usr/bin/env bash
# Run G, call 4 (1x H200): claim_vs_one_cta.py, the persistent kernel with claimed tiles against one CTA
# per tile on the shapes where tile_order_model.py expects the claim to lose most.
# Usage: bash results/ranker_attention/h200_g4.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
t=$(date +%s)
(cd results/ranker_attention && PYTHONPATH=$ROOT:$ROOT/.devdeps timeout -s INT 300 python3 claim_vs_one_cta.py \
    "$OUT/claim-vs-one-cta.json") > "$OUT/claim-vs-one-cta.txt" 2>&1
echo "rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/claim-vs-one-cta.txt"
tail -n 12 "$OUT/claim-vs-one-cta.txt"
