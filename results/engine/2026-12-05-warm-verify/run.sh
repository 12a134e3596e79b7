#!/usr/bin/env bash
# verify warm and the GPU tests warm on one H200 (issue 56): `bash results/engine/2026-12-05-warm-verify/run.sh CALL`
# from the repository root, the optional packages the GPU machine lacks in .devdeps.
#   call 1: an exhaustive sweep of one unseen bucket (the refactored engine: typed requests, backend hooks);
#           verify of the shipped table cold, then again on the same machine (warm).
#   call 2 (the same machine, warm): the GPU tests.
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
S=search_spaces/ranker_attention_unseen.toml
W=kerneltune-out/warm-verify
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
  step sweep-cold 150 python3 -m kerneltune sweep ranker-attention --space $S --bucket d64-none-ragged --out $W
  step verify-cold 190 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm 190 python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  ;;
2)
  step gpu-tests 560 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=15 tests
  ;;
esac
cp -r $W/journals $W/logs "$R/" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 8 "$f"; done
tar -czf "$OUT/call$1.tar.gz" -C "$OUT" "call$1" && rm -rf "$R"
