#!/usr/bin/env bash
# Run AG, call 4: attempt 19 A/B (scratch/ab_late.py) on branch attempt-19-rowsum-late.
set -u
FINAL=$1
OUT=/tmp/ag4; rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-150} timeout 400 python3 scratch/ab_late.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? $(( $(date +%s) - t )) s" >> "$OUT/ab-console.txt"
gzip -k "$OUT/ab_late.json"
cp "$OUT/ab-console.txt" "$OUT/ab_late.json.gz" "$FINAL/"
grep -v '^{' "$OUT/ab-console.txt" | grep -v "^ranker_attention:" | tail -12
