#!/usr/bin/env bash
# Issue 56 on one H200: `bash results/engine/2026-12-06-busy-verify/run.sh CALL` from the repository root, the
# optional packages the GPU machine lacks in .devdeps.
#   call 1: verify of the shipped table from an empty user cache, then again, with the references compiled
#           without autotuning; the two unseen buckets' exhaustive sweep with 16 compile workers from an empty
#           user cache; the check references' compile under XLA compiler options (probe.py reference).
#   call 2: the compile workers' throughput by count and environment (probe.py compile).
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
export KERNELTUNE_CACHE=/tmp/kt-cache
D=results/engine/2026-12-06-busy-verify
R=$OUT/call$1
mkdir -p "$R"
nproc > "$R/nproc.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-before.csv"
T0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - T0) )); echo $(( l > 5 ? l : 5 )); }  # seconds to mark $1, at least 5
step() {  # step NAME TIMEOUT CMD...: console to NAME.txt, wall seconds and exit code to steps.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
SWEEP=(python3 -m kerneltune sweep ranker-attention --space search_spaces/ranker_attention_unseen.toml
       --bucket d64-none-ragged --bucket d128-gqa8-none-ragged)
case $1 in
1)
  rm -rf /tmp/kt-cache
  step verify-cold "$(left 250)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm "$(left 370)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  rm -rf /tmp/kt-cache
  step sweep-cold-w16 "$(left 440)" "${SWEEP[@]}" --compile-workers 16 --out kerneltune-out/w16
  for j in kerneltune-out/w16/journals/*.jsonl; do cp "$j" "$R/w16-$(basename "$j")"; done
  i=0
  for spec in "d128-clamp-very-long default" "d128-clamp-very-long autotune0" \
              "d64-tanh-many-rows default" "d64-tanh-many-rows autotune0"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    step "reference-$i" "$(left 450)" python3 $D/probe.py reference "$R" $spec
  done
  ;;
2)
  for spec in "14 default" "14 nojaxcache" "16 default" "16 nojaxcache" "1 default 8"; do
    # shellcheck disable=SC2086
    step "compile-${spec// /-}" "$(left 585)" python3 $D/probe.py compile "$R" $spec
  done
  ;;
esac
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 7 "$f" | cut -c1-240; done
cat "$R"/reference.jsonl "$R"/compile.jsonl 2>/dev/null
