#!/usr/bin/env bash
# Issue 56 on one H200: `bash results/engine/2026-12-06-busy-verify/run.sh CALL` from the repository root, the
# optional packages the GPU machine lacks in .devdeps, the package before the compile queue in base/
# (`mkdir -p base && git archive f8c40f9 kerneltune | tar -x -C base` in this folder).
#   call 1: verify of the shipped table from an empty user cache, then again; the two unseen buckets'
#           exhaustive sweep from an empty user cache with 14 compile workers, this tree (up to 64
#           candidates handed over to the compile workers, each bucket's check programs compiled by one of
#           them) then base/ (one round of 14, the references compiled in the timing worker).
#   call 2: the same sweep with 16 compile workers (this tree); the check references' compile under XLA
#           compiler options (probe.py reference); the compile workers' throughput (probe.py compile).
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
export KERNELTUNE_CACHE=/tmp/kt-cache
D=results/engine/2026-12-06-busy-verify
ROOT=$PWD
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
  step sweep-new-w14 "$(left 480)" "${SWEEP[@]}" --compile-workers 14 --out kerneltune-out/new-w14
  rm -rf /tmp/kt-cache
  (  # base/'s package: run from base/, where it is the first on the path (the workers start in that folder too)
    cd "$D/base" && PYTHONPATH=$ROOT/.devdeps step sweep-base-w14 "$(left 585)" "${SWEEP[@]/#search_spaces/$ROOT/search_spaces}" \
      --compile-workers 14 --out "$ROOT/kerneltune-out/base-w14"
  )
  for run in new-w14 base-w14; do
    for j in kerneltune-out/$run/journals/*.jsonl; do cp "$j" "$R/$run-$(basename "$j")"; done
    cp kerneltune-out/$run/logs/timing-gpu*.log "$R/$run-timing.log"
  done
  ;;
2)
  rm -rf /tmp/kt-cache
  step sweep-new-w16 "$(left 120)" "${SWEEP[@]}" --compile-workers 16 --out kerneltune-out/new-w16
  for j in kerneltune-out/new-w16/journals/*.jsonl; do cp "$j" "$R/new-w16-$(basename "$j")"; done
  i=0
  for spec in "d128-clamp-very-long default" "d128-clamp-very-long autotune0" \
              "d64-tanh-many-rows default" "d64-tanh-many-rows autotune0"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    step "reference-$i" "$(left 250)" python3 $D/probe.py reference "$R" $spec
  done
  for spec in "14 default" "14 nojaxcache" "16 default"; do
    # shellcheck disable=SC2086
    step "compile-${spec// /-}" "$(left 585)" python3 $D/probe.py compile "$R" $spec
  done
  ;;
esac
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 7 "$f" | cut -c1-240; done
cat "$R"/reference.jsonl "$R"/compile.jsonl 2>/dev/null
