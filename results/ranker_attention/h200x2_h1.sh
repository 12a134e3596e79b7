#!/usr/bin/env bash
# Run H, call 1 (2x H200): A/B/A of claim-at-end.patch against the committed kernel (claims at a tile's
# start). GPU 0: schedule_ab.py A1 B A2, one process each (about 170 s each). GPU 1: claim_vs_one_cta.py
# with the patched kernel (B persistent against one CTA per tile, same process), then the gpu-marked
# persistent tests on the patched copy. Every result is copied into OUT as soon as it exists.
# Usage: bash results/ranker_attention/h200x2_h1.sh OUTDIR
set -u
OUT=$1
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
rm -rf /tmp/kB && mkdir -p /tmp/kB && cp -r kerneltune tests pyproject.toml /tmp/kB/ \
  && (cd /tmp/kB && patch -p1 < "$ROOT/results/ranker_attention/2026-11-30-h200-run-g/claim-at-end.patch") \
  > "$OUT/patch.txt" 2>&1
run() {  # GPU LABEL KERNEL_ROOT LIMIT SCRIPT ARGS...
  local gpu=$1 label=$2 root=$3 limit=$4; shift 4
  local t
  t=$(date +%s)
  (cd results/ranker_attention && CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$root:$ROOT/.devdeps \
      timeout -s INT "$limit" python3 "$@") > "$OUT/$label.txt" 2>&1
  echo "$label rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/$label.txt"
}
(
  run 0 ab-A1 "$ROOT" 200 schedule_ab.py A1 "$OUT/ab-A1.json"
  run 0 ab-B /tmp/kB 200 schedule_ab.py B "$OUT/ab-B.json"
  run 0 ab-A2 "$ROOT" 200 schedule_ab.py A2 "$OUT/ab-A2.json"
) &
(
  run 1 small-B /tmp/kB 330 claim_vs_one_cta.py "$OUT/small-B.json"
  t=$(date +%s)
  (cd /tmp/kB && CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/kB:$ROOT/.devdeps timeout -s INT 150 \
      python3 -m pytest -q -p no:cacheprovider -m gpu -k True tests/kernels/ranker_attention/test_gpu.py) \
      > "$OUT/gpu-tests-B.txt" 2>&1
  echo "rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/gpu-tests-B.txt"
) &
wait
for f in ab-A1 ab-B ab-A2 small-B; do tail -n 14 "$OUT/$f.txt"; done
tail -n 4 "$OUT/gpu-tests-B.txt"
