#!/usr/bin/env bash
# Run AE, call 4: attempt 17d's SASS (compile only), then its A/B against main's kernel under attempt 17c's rule
# (ab_padding.py, quick accuracy). Usage (repo root of branch attempt-17d-padding-funnel, main's package in
# main_ranker/, this tree's kerneltune in probe/v_17d): bash run_ae4.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user "$OUT/ab"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
PROBE_VARIANTS=17d bash probe/run.sh "$OUT" > "$OUT/probe-console.txt" 2>&1
cat "$OUT/probe-console.txt"
OUT="$OUT/ab" AB_SECONDS="${AB_SECONDS:-170}" AB_ACCURACY=quick timeout -s INT -k 8 420 python3 ab_padding.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$?"
gzip "$OUT/ab/ab_padding.json"
grep -A40 "^== accuracy" "$OUT/ab-console.txt"
