#!/usr/bin/env bash
# Run AJ (issue 23), from main's tree at the repo root (carry .devdeps and, to resume, kerneltune-out/runaj).
# Phases, each skipped once done (a marker in the state folder) and for now when the time left is under its
# estimate: the new 192-key-block GPU tests; the bench's two D=64 buckets re-measured on their contenders (the
# shipped winner and fallbacks) with the winner at 192-key blocks beside them; the result installed over the device
# copy's shipped table (again on every call: the tree is copied fresh); verify of those buckets; the whole bench;
# `pytest -m gpu`.
# Usage: bash scratch/runaj.sh OUTDIR LIMIT_SECONDS
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user
S=kerneltune-out/runaj
mkdir -p "$S"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/runaj.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$S/gpu-$start.csv"
[ -e "$S/versions.txt" ] || python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash.txt"
[ -e "$S/contenders.json" ] || python3 scratch/make_contenders.py kerneltune/tables/shipped/nvidia-h200/ranker_attention.json \
  "$S/contenders.json" > "$S/contenders-console.txt" 2>&1
phase() {  # NAME NEED_SECONDS COMMAND...   (a run cut by the time limit is not done)
  local name=$1 need=$2; shift 2
  [ -e "$S/$name.done" ] && return 0
  [ "$(left)" -gt "$need" ] || { echo "$name: skipped for now, $(left) s left, needs $need" | tee -a "$S/walls.txt"; return 1; }
  local t=$(date +%s)
  timeout -s INT -k 8 "$(( $(left) - 10 ))" "$@" >> "$S/$name-console.txt" 2>&1
  local rc=$?; echo "$name rc=$rc wall $(( $(date +%s) - t )) s" | tee -a "$S/walls.txt" "$S/$name-console.txt"
  case "$rc" in 124|137|130) return 1;; esac
  touch "$S/$name.done"
}
phase wide-tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/ranker_attention/test_gpu.py -k 192
phase sweep 150 python3 -m kerneltune sweep ranker-attention --contenders "$S/contenders.json" \
  --bucket d64-none-many-rows --bucket d64-tanh-many-rows \
  --max-seconds 1.0 --compile-threads 8 --run-timeout 120 --out "$S/sweep"
if [ -e "$S/sweep.done" ]; then
  python3 -m kerneltune install "$S/sweep/tables/nvidia-h200/ranker_attention.json" --to kerneltune/tables/shipped \
    >> "$S/install-console.txt" 2>&1; echo "install rc=$?" | tee -a "$S/install-console.txt"
  cp kerneltune/tables/shipped/nvidia-h200/ranker_attention.json "$S/shipped-after-install.json"
  phase verify 200 python3 -m kerneltune verify ranker-attention --bucket d64-none-many-rows --bucket d64-tanh-many-rows \
    --junit "$S/verify.xml"
  phase bench 470 python3 -m kerneltune bench ranker-attention --out "$S/bench"
  phase gpu-tests 450 python3 -m pytest -q -m gpu -p no:cacheprovider tests
fi
cat "$S/walls.txt"
tail -n 5 "$S/wide-tests-console.txt" 2>/dev/null
tail -n 30 "$S/sweep-console.txt" 2>/dev/null
grep -E "^d[0-9]+-.*: " "$S"/verify-console.txt 2>/dev/null | tail -n 20
tail -n 3 "$S/gpu-tests-console.txt" 2>/dev/null
tail -n 40 "$S/bench-console.txt" 2>/dev/null
