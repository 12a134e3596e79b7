#!/usr/bin/env bash
# Run AG, call 3: the instruction-cost probe (scratch/probe_cost.py) on branch probe-ag-instruction-cost.
set -u
FINAL=$1
OUT=/tmp/ag3; rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-150} timeout 400 python3 scratch/probe_cost.py > "$OUT/probe-console.txt" 2>&1
echo "probe rc=$? $(( $(date +%s) - t )) s" >> "$OUT/probe-console.txt"
gzip -k "$OUT/probe_cost.json"
cp "$OUT/probe-console.txt" "$OUT/probe_cost.json.gz" "$FINAL/"
grep -v '^{' "$OUT/probe-console.txt" | grep -v "^ranker_attention:" | tail -12
