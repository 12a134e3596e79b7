#!/usr/bin/env bash
# Run AL call 2 (issue 23): the softmax-floor probe on main's kernel with the KT_PROBE hook (uncommitted; branch
# run-al-script). Carry .devdeps. Usage: bash scratch/runal2.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p /tmp/kt-user "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-90} timeout 280 python3 scratch/probe_floor.py > "$OUT/probe-console.txt" 2>&1
echo "probe rc=$? wall $(( $(date +%s) - t )) s" | tee -a "$OUT/walls.txt"
grep -A20 "== each probe" "$OUT/probe-console.txt" || tail -n 30 "$OUT/probe-console.txt"
