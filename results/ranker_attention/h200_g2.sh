#!/usr/bin/env bash
# Run G, call 2 (1x H200): A/B/A of the persistent kernel's tile order. A = the committed kernel (a fixed
# stride of CTAs), B = the working tree (tiles claimed from a global counter: claimed-tiles.patch).
# Then the gpu-marked kernel tests on B.
# Usage: bash results/ranker_attention/h200_g2.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
R=/tmp/run-g2 && mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
rm -rf /tmp/kA && mkdir -p /tmp/kA && cp -r kerneltune /tmp/kA/ \
  && (cd /tmp/kA && patch -R -p1 < "$ROOT/results/ranker_attention/2026-11-30-h200-run-g/claimed-tiles.patch") > "$R/patch.txt" 2>&1
AB=results/ranker_attention/schedule_ab.py
for L in A1 B A2; do
  case $L in B) P=$ROOT ;; *) P=/tmp/kA ;; esac
  t=$(date +%s)
  PYTHONPATH=$P:$ROOT/.devdeps timeout -s INT 200 python3 $AB $L "$R/ab-$L.json" > "$R/ab-$L.txt" 2>&1
  echo "$L rc=$? wall $(( $(date +%s) - t )) s" >> "$R/ab-$L.txt"
done
t=$(date +%s)
PYTHONPATH=.:.devdeps timeout -s INT 200 python3 -m pytest -q -m gpu tests/kernels/ranker_attention/test_gpu.py > "$R/gpu-tests.txt" 2>&1
echo "gpu tests rc=$? wall $(( $(date +%s) - t )) s" >> "$R/gpu-tests.txt"
cp "$R"/* "$OUT"/
cat "$R"/ab-*.txt | grep -v "^$" | tail -n 40; tail -n 4 "$R/gpu-tests.txt"
