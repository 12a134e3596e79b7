#!/usr/bin/env bash
# Attempt 17e (issue 23; prepared after run AE, never run), from this branch's tree at the repo root (carry .devdeps
# and, to resume, kerneltune-out/run17e). Its A/B against main's kernel (main_ranker/) under the rule in
# ab_padding.py. ADOPT: the shipped table rekeyed on this copy (its D=128 programs are main's, current under the
# new hash; the D=64 ones stale), the three D=64 buckets' contenders re-measured and installed over it, verify of
# the D=64 buckets, the bench's padding shapes (BENCH_PADDING.toml) and `pytest -m gpu` on the ranker. Each phase
# is skipped once done (a marker in the state folder) and for now when the time left is under its estimate.
# Before the call, at the repo root of this branch:
#   mkdir main_ranker && for f in kernel cap bounds config accuracy exp2_fma; do
#     git show main:kerneltune/kernels/ranker_attention/$f.py > main_ranker/$f.py; done && touch main_ranker/__init__.py
# Usage: bash run17e.sh OUTDIR LIMIT_SECONDS  (carry .devdeps; again with kerneltune-out/run17e carried to resume)
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user
S=kerneltune-out/${RUN:-run17e}
TABLE=kerneltune/tables/shipped/nvidia-h200/ranker_attention.json
mkdir -p "$S"
[ -e "$S/contenders.json" ] || cp "$TABLE" "$S/contenders.json"   # the table before this run's install
[ -e "$S/table-installed.json" ] && cp "$S/table-installed.json" "$TABLE"   # a resumed call: this run's table
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/${RUN:-run17e}.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$S/gpu-$start.csv"
[ -e "$S/versions.txt" ] || python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
phase() {  # NAME NEED_SECONDS DONE_RCS COMMAND...   (DONE_RCS: "0" for a sweep or the A/B, "any" else; a cut run never is)
  local name=$1 need=$2 done_rcs=$3; shift 3
  [ -e "$S/$name.done" ] && return 0
  [ "$(left)" -gt "$need" ] || { echo "$name: skipped for now, $(left) s left, needs $need" | tee -a "$S/walls.txt"; return 1; }
  local t=$(date +%s)
  timeout -s INT -k 8 "$(( $(left) - 10 ))" "$@" >> "$S/$name-console.txt" 2>&1
  local rc=$?; echo "$name rc=$rc wall $(( $(date +%s) - t )) s" | tee -a "$S/walls.txt" "$S/$name-console.txt"
  case "$rc" in 124|137|130) return 1;; esac
  [ "$done_rcs" = any ] || [ "$rc" = 0 ] || return 1
  touch "$S/$name.done"
}
if [ ! -e "$S/ab.decided" ]; then
  phase ab 380 any env OUT="$S/ab" AB_SECONDS="${AB_SECONDS:-170}" AB_ACCURACY=quick python3 ab_padding.py && touch "$S/ab.decided"
fi
if [ -e "$S/ab.decided" ] && grep -qx ADOPT "$S/ab-console.txt"; then
  python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash.txt"
  SW="--out $S/sweep --max-seconds 0.5 --compile-threads 8 --run-timeout 120"
  phase rekey 90 any python3 -m kerneltune rekey ranker-attention --table "$TABLE" &&  # exit 1: D=64 stays stale
    cp "$TABLE" "$S/table-installed.json"
  [ -e "$S/rekey.done" ] && phase sweep-d64 200 0 python3 -m kerneltune sweep ranker-attention --contenders "$S/contenders.json" \
      --bucket d64-tanh-many-rows --bucket d64-none-many-rows --bucket d64-softsign-few-candidates $SW &&
  phase install 20 0 python3 -m kerneltune install "$S/sweep/tables/nvidia-h200/ranker_attention.json" \
      --to kerneltune/tables/shipped && cp "$TABLE" "$S/table-installed.json" && {
    v() { phase "verify-$1" "$2" any python3 -m kerneltune verify ranker-attention --bucket "$1" --junit "$S/verify-$1.xml"; }
    v d64-tanh-many-rows 130
    v d64-none-many-rows 60
    v d64-softsign-few-candidates 90
    phase bench-padding 240 any python3 -m kerneltune bench ranker-attention --shapes BENCH_PADDING.toml --out "$S/bench-padding"
    phase gpu-tests 380 any python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/ranker_attention
  }
fi
cat "$S/walls.txt"
grep -A40 "^== accuracy" "$S/ab-console.txt" 2>/dev/null
for f in "$S"/verify-*-console.txt; do [ -e "$f" ] && grep -E "^d[0-9]+-.*: " "$f"; done
tail -n 30 "$S/bench-padding-console.txt" 2>/dev/null; tail -n 3 "$S/gpu-tests-console.txt" "$S/gpu-bench-test-console.txt" 2>/dev/null
