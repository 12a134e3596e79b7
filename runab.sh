#!/usr/bin/env bash
# Run AB (issue 23), prepared after run AA, from main's tree at the repo root (carry .devdeps and, to resume,
# kerneltune-out/runab). Phases, each skipped once done (a marker in the state folder) and for now when the time
# left is under its estimate:
#   1. eighths 5-6 at D=64 tanh (NARROW_EIGHTHS.toml: the default space, those configs only at D=64 with a cap)
#      swept into one journal with the d64-tanh-many-rows bucket's shipped contenders; the bucket's table is
#      installed over the shipped one on this copy only when its winner changed, then verified and benched.
#   2. what run AA left under kernel 9a39007168d41b35: verify of six buckets, `pytest -m gpu`, the whole bench.
# Usage: bash runab.sh OUTDIR LIMIT_SECONDS
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user
S=kerneltune-out/runab
TABLE=kerneltune/tables/shipped/nvidia-h200/ranker_attention.json
mkdir -p "$S"
[ -e "$S/contenders.json" ] || cp "$TABLE" "$S/contenders.json"   # the shipped table before this run
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/runab.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$S/gpu-$start.csv"
[ -e "$S/versions.txt" ] || python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash.txt"
phase() {  # NAME NEED_SECONDS DONE_RCS COMMAND...   (DONE_RCS: "0" for a sweep, "any" else; a cut run never is)
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
v() { phase "verify-$1" "$2" any python3 -m kerneltune verify ranker-attention --bucket "$1" --junit "$S/verify-$1.xml"; }
SW="--out $S/sweep --max-seconds 0.5 --compile-threads 8 --run-timeout 120 --bucket d64-tanh-many-rows"
phase sweep-eighths 60 0 python3 -m kerneltune sweep ranker-attention --space NARROW_EIGHTHS.toml $SW &&
phase sweep-contenders 60 0 python3 -m kerneltune sweep ranker-attention --contenders "$S/contenders.json" $SW && {
  winner() { python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['entries']; print(json.dumps([v['config'] for k,v in sorted(e.items()) if 'head_dim=64' in k and 'cap_method=tanh,' in k]))" "$1"; }
  if [ "$(winner "$S/sweep/tables/nvidia-h200/ranker_attention.json")" != "$(winner "$S/contenders.json")" ]; then
    echo "d64-tanh winner changed: installed on this copy" | tee -a "$S/walls.txt"
    python3 -m kerneltune install "$S/sweep/tables/nvidia-h200/ranker_attention.json" --to kerneltune/tables/shipped
    v d64-tanh-many-rows 130
    phase bench-d64 115 any python3 -m kerneltune bench ranker-attention --shapes NARROW_BENCH_D64.toml --out "$S/bench-d64"
  else
    echo "d64-tanh winner unchanged" | tee -a "$S/walls.txt"
  fi
}
v d64-none-many-rows 60
v d128-gqa-tanh-short 130
v d128-none-long 130
v d128-tanh-long 130
phase gpu-tests 350 any python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/ranker_attention
phase bench 330 any python3 -m kerneltune bench ranker-attention --out "$S/bench"
v d128-clamp-very-long 200
v d128-tanh-approx-very-long 200
cat "$S/walls.txt"
for f in "$S"/verify-*-console.txt; do [ -e "$f" ] && grep -E "^d[0-9]+-.*: " "$f"; done
tail -n 30 "$S/bench-console.txt" "$S/bench-d64-console.txt" 2>/dev/null; tail -n 3 "$S/gpu-tests-console.txt" 2>/dev/null
