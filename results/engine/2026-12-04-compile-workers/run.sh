#!/usr/bin/env bash
# Compile workers on one H200 (issue 56): `bash results/engine/2026-12-04-compile-workers/run.sh CALL` from the
# repository root, the optional packages the GPU machine lacks in .devdeps (as the sweep-throughput record's).
#   call 1: the portable build's GPU test; exhaustive sweeps of the two unseen buckets (cold: no compile cache,
#           no ceilings cached); verify of the shipped table, cold.
#   call 2 (a fresh machine): verify of the shipped table, cold, then again on the same machine (warm).
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
S=search_spaces/ranker_attention_unseen.toml
W=kerneltune-out/compile-workers
R=$OUT/call$1
mkdir -p "$R" "$W"
nproc > "$R/nproc.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-before.csv"
step() {  # step NAME TIMEOUT CMD...: console to NAME.txt, wall seconds and exit code to steps.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
case $1 in
1)
  step gpu-portable-test 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/ranker_attention/test_gpu.py \
       -k another_process
  step sweep-cold 230 python3 -m kerneltune sweep ranker-attention --space $S --bucket d64-none-ragged \
       --bucket d128-gqa8-none-ragged --out $W
  step verify-cold 180 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  ;;
2)
  step verify-cold 180 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm 170 python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  ;;
esac
cp -r $W/journals $W/logs "$R/" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 12 "$f"; done
tar -czf "$OUT/call$1.tar.gz" -C "$OUT" "call$1" && rm -rf "$R"
