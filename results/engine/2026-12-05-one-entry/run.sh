#!/usr/bin/env bash
# One compile a candidate on one H200 (issue 56): `bash results/engine/2026-12-05-one-entry/run.sh CALL` from the
# repository root, the optional packages the GPU machine lacks in .devdeps.
#   call 1 (one call, under 600 s, each step bounded by what is left): probe.py (every shipped item's two entry
#           points: compile phases, kernels, outputs, times in turns); the two unseen buckets' exhaustive sweep
#           from an empty user cache with 8, then 14 compile workers, then again into a new folder with the build
#           cache kept (the first candidate on a warm machine); three buckets' references eager and jitted;
#           the ranker's GPU tests with the time left.
#   call 2: verify of the shipped table cold then warm, then `make test-gpu`.
#   call 3 (the check's references jitted, compile workers by default the cores less two): the two unseen
#           buckets' sweep from an empty user cache, again into a new folder with the build cache kept, verify
#           cold (under 280 s: what was left of the session's device time).
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
export KERNELTUNE_CACHE=/tmp/kt-cache
R=$OUT/call$1
mkdir -p "$R"
nproc > "$R/nproc.txt"
git log -1 --format=%H > "$R/head.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-before.csv"
step() {  # step NAME TIMEOUT CMD...: console to NAME.txt, wall seconds and exit code to steps.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
SWEEP=(python3 -m kerneltune sweep ranker-attention --space search_spaces/ranker_attention_unseen.toml
       --bucket d64-none-ragged --bucket d128-gqa8-none-ragged)
T0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - T0) )); echo $(( l > 5 ? l : 5 )); }  # seconds to mark $1, at least 5
case $1 in
1)
  step probe 250 python3 results/engine/2026-12-05-one-entry/probe.py "$R/probe"
  for w in 8 14; do
    rm -rf /tmp/kt-cache
    step "sweep-cold-w$w" 150 "${SWEEP[@]}" --compile-workers "$w" --out "kerneltune-out/w$w"
    ls -R "kerneltune-out/w$w" > "$R/out-w$w.ls"
    for j in kerneltune-out/w$w/journals/*.jsonl; do cp "$j" "$R/w$w-$(basename "$j")"; done
  done
  step sweep-warm "$(left 520)" "${SWEEP[@]}" --compile-workers 14 --out kerneltune-out/warm
  for j in kerneltune-out/warm/journals/*.jsonl; do cp "$j" "$R/warm-$(basename "$j")"; done
  step references "$(left 530)" python3 results/engine/2026-12-05-one-entry/probe.py "$R/probe" --references
  step gpu-tests-ranker "$(left 575)" python3 -m pytest -q -p no:cacheprovider -m gpu -n 4 \
    tests/kernels/ranker_attention/test_gpu.py
  ;;
2)
  rm -rf /tmp/kt-cache
  step verify-cold 240 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm 150 python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  step gpu-tests "$(left 585)" make test-gpu PYTHON=python3
  ;;
3)
  rm -rf /tmp/kt-cache
  step sweep-cold "$(left 120)" "${SWEEP[@]}" --out kerneltune-out/cold
  for j in kerneltune-out/cold/journals/*.jsonl; do cp "$j" "$R/cold-$(basename "$j")"; done
  step sweep-warm "$(left 180)" "${SWEEP[@]}" --out kerneltune-out/warm3
  for j in kerneltune-out/warm3/journals/*.jsonl; do cp "$j" "$R/warm-$(basename "$j")"; done
  rm -rf /tmp/kt-cache
  step verify-cold "$(left 270)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  ;;
esac
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 8 "$f"; done
cd "$OUT" && tar czf "call$1.tgz" "call$1" && rm -rf "call$1"
