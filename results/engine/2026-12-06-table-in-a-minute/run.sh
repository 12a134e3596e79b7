#!/usr/bin/env bash
# Issue 82 on one H200: `bash results/engine/2026-12-06-table-in-a-minute/run.sh CALL` from the repository root, the
# packages the GPU machine lacks carried as wheels in .whl. Call 2 runs the tree before (main at 82632f7), unpacked
# beside first: `git archive 82632f7 kerneltune search_spaces pyproject.toml | tar -x -C THIS_FOLDER/before`.
#   call 1 (this tree, one call under 600 s): the two unseen buckets swept exhaustively from an empty user cache
#          (first candidate, candidates a minute, busy share, the playoff's share; the exhaustive best), again with
#          the build cache kept (warm); a new bucket warm-started from the shipped table on a budget, cold (the
#          table within a minute?); verify of the shipped table cold, then warm, with JUnit files.
#   call 2 (the tree before): verify cold and warm, and the cold sweep, side by side with call 1's figures.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
CALL=${1:-1}
R=${OUT:-/tmp/out}/call$CALL
mkdir -p "$R"
TREE=.
if [ "$CALL" = 2 ]; then TREE=$PWD/results/engine/2026-12-06-table-in-a-minute/before; fi
export PYTHONPATH=$TREE:/tmp/site PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
export KERNELTUNE_CACHE=/tmp/kt-cache-$CALL
nproc > "$R/nproc.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu.csv"
python3 -c 'import kerneltune, sys; print(kerneltune.__file__)' > "$R/tree.txt"
T0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - T0) )); echo $(( l > 5 ? l : 5 )); }  # seconds to mark $1, at least 5
step() {  # step NAME TIMEOUT CMD...: console to NAME.txt, wall and exit code to steps.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  (cd "$TREE" && timeout "$limit" "$@") > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
SWEEP=(python3 -m kerneltune sweep ranker-attention --space search_spaces/ranker_attention_unseen.toml)
O=/tmp/kt-out-$CALL
keep() { for j in "$O/$1"/journals/*.jsonl; do cp "$j" "$R/$1-$(basename "$j")"; done
         cp "$O/$1"/tables/*/*.json "$R/$1-table.json" 2>/dev/null; }
case $CALL in
1)
  step sweep-cold 150 "${SWEEP[@]}" --bucket d64-none-ragged --bucket d128-gqa8-none-ragged --out "$O/cold"
  keep cold
  step sweep-warm 90 "${SWEEP[@]}" --bucket d64-none-ragged --bucket d128-gqa8-none-ragged --out "$O/warm"
  keep warm
  rm -rf "$KERNELTUNE_CACHE"
  step new-bucket-cold 90 "${SWEEP[@]}" --bucket d128-gqa4-clamp-long --strategy tpe --budget 12 --out "$O/new"
  keep new
  rm -rf "$KERNELTUNE_CACHE"
  step verify-cold "$(left 470)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm "$(left 585)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  ;;
2)
  step verify-cold 200 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm "$(left 380)" python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  rm -rf "$KERNELTUNE_CACHE"
  step sweep-cold "$(left 585)" "${SWEEP[@]}" --bucket d64-none-ragged --bucket d128-gqa8-none-ragged --out "$O/cold"
  keep cold
  ;;
esac
cd "$R" && grep -h -E "first candidate|busy|playoff|candidates,|items|verify" ./*.txt | cut -c1-200 | tail -40
cat steps.txt
