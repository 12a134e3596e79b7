#!/usr/bin/env bash
# Run AG, call 5: attempt 20's A/B (scratch/ab_fold.py) on branch attempt-20-fold-scale.
set -u
FINAL=$1
OUT=/tmp/ag5; rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-90} timeout 200 python3 scratch/ab_fold.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? $(( $(date +%s) - t )) s" >> "$OUT/ab-console.txt"
gzip -k "$OUT/ab_fold.json"
cp "$OUT/ab-console.txt" "$OUT/ab_fold.json.gz" "$FINAL/"
grep -v '^{' "$OUT/ab-console.txt" | grep -v "^ranker_attention:" | tail -9
grep '"bitwise"' "$OUT/ab-console.txt"
