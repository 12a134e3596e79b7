#!/usr/bin/env bash
# The sweep-throughput record (issue 56) on one H200: `bash run.sh CALL` from the repository root, with the
# optional packages the GPU machine lacks in .devdeps (pip install --target .devdeps --no-deps: optuna, SQLAlchemy,
# alembic, Mako, platformdirs, colorlog, tqdm, filelock, pytest, pluggy, iniconfig, pytest-timeout).
#   call 1: exhaustive sweeps of a D=64 and a D=128 GQA 8:1 bucket the shipped table lacks, on a cold machine
#           (no compile cache, no ceilings cached); then a warm start-up: the same buckets' winners re-measured
#           (--contenders) into another journal, the compile cache, ceilings and references now warm.
#   call 2: the third unseen bucket's exhaustive sweep; verify of the shipped table, cold then warm.
#   call 3: pytest -m gpu.
# Everything each call prints and journals is packed into $OUT/callN.tar.gz.
set -uo pipefail
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
S=search_spaces/ranker_attention_unseen.toml
W=kerneltune-out/throughput   # git-ignored: kept while the machine stays warm
R=$OUT/call$1
mkdir -p "$R" "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-before.csv"
git log -1 --format=%H > "$R/commit.txt" 2>/dev/null || true
step() {  # step NAME TIMEOUT CMD...: console to NAME.txt, wall seconds and exit code to steps.txt
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
case $1 in
1)
  step sweep-cold 470 python3 -m kerneltune sweep ranker-attention --space $S --bucket d64-none-ragged \
       --bucket d128-gqa8-none-ragged --out $W --compile-threads 8
  cp "$W/tables/nvidia-h200/ranker_attention.json" "$R/unseen-table.json"
  step contenders-warm 100 python3 -m kerneltune sweep ranker-attention --space $S --bucket d64-none-ragged \
       --bucket d128-gqa8-none-ragged --out $W --compile-threads 8 --contenders "$R/unseen-table.json" \
       --journal $W/journals/contenders.jsonl
  ;;
2)
  step sweep-clamp 150 python3 -m kerneltune sweep ranker-attention --space $S --bucket d128-gqa4-clamp-long \
       --out $W --compile-threads 8
  step verify-cold 250 python3 -m kerneltune verify ranker-attention --junit "$R/verify-cold.xml"
  step verify-warm 170 python3 -m kerneltune verify ranker-attention --junit "$R/verify-warm.xml"
  ;;
3)
  step pytest-gpu 360 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=15 tests
  ;;
esac
cp -r $W/journals $W/logs "$R/" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu-after.csv"
for f in "$R"/*.txt; do echo "== $f"; tail -n 14 "$f"; done
tar -czf "$OUT/call$1.tar.gz" -C "$OUT" "call$1" && rm -rf "$R"
