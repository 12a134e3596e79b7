#!/usr/bin/env bash
# The user's build cache on one H200 (issue 56): `bash results/engine/2026-12-05-build-cache/run.sh CALL` from the
# repository root, the optional packages the GPU machine lacks in .devdeps.
#   calls 1 and 2: verify of the shipped table with an empty user cache (cold), then again on the same machine
#           (warm); call 1 with verify's references written to disk, call 2 without.
#   call 3 (the machine of call 2): the GPU tests as `make test-gpu` runs them.
#   call 4 (the same machine): the third unseen bucket's exhaustive sweep, for the warm-start record.
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
export KERNELTUNE_CACHE=/tmp/kt-cache
R=$OUT/call$1
mkdir -p "$R"
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
1|2)
  rm -rf /tmp/kt-cache
  step verify-cold 260 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  (ls /tmp/kt-cache/builds | wc -l; du -sb /tmp/kt-cache/builds) > "$R/build-cache-size.txt" 2>&1
  step verify-warm 200 python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  ;;
3)
  if command -v make > /dev/null; then
    step gpu-tests 560 make test-gpu PYTHON=python3
  else
    echo "no make here: the Makefile's two commands" > "$R/no-make.txt"
    step gpu-tests 560 bash -c 'python3 -m pytest -q -m "gpu and not timing" -n 4 --dist loadgroup --durations=10 && python3 -m pytest -q -m "gpu and timing" --durations=5'
  fi
  ;;
4)
  step sweep-clamp 420 python3 -m kerneltune sweep ranker-attention --space search_spaces/ranker_attention_unseen.toml \
    --bucket d128-gqa4-clamp-long --out kerneltune-out/clamp
  cp -r kerneltune-out/clamp/journals "$R/"
  ;;
esac
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 6 "$f"; done
