#!/usr/bin/env bash
# Run AL call 3 (issue 23, attempt 24): pv_in_flight A/B on the attempt's branch. Carry .devdeps.
# Usage: bash scratch/runal3.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p /tmp/kt-user "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
t=$(date +%s)
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
OUT=$OUT AB_SECONDS=${AB_SECONDS:-45} timeout ${AB_LIMIT:-165} python3 scratch/ab_inflight.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? wall $(( $(date +%s) - t )) s" | tee -a "$OUT/walls.txt"
grep -E '"kind": "(check|bitwise)"' "$OUT/ab-console.txt" | cut -c1-220
grep -A8 "== inflight" "$OUT/ab-console.txt" || tail -n 15 "$OUT/ab-console.txt"
