#!/usr/bin/env bash
# Run AK (issue 23), from main's tree at the repo root (carry .devdeps and, to resume, kerneltune-out/runak).
# Phases, each skipped once done (a marker in the state folder) and for now when the time left is under its
# estimate: the whole bench with its settled rounds (resumed with --resume when a call cut it), then `pytest -m gpu`.
# Usage: bash scratch/runak.sh OUTDIR LIMIT_SECONDS
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user
S=kerneltune-out/runak
mkdir -p "$S"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/runak.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > "$S/gpu-$start.csv"
[ -e "$S/versions.txt" ] || python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash-$start.txt"
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
RESUME=""; ls "$S"/bench/*.json >/dev/null 2>&1 && RESUME="--resume"
phase bench 120 python3 -m kerneltune bench ranker-attention --out "$S/bench" $RESUME
[ -e "$S/bench.done" ] && phase gpu-tests 420 python3 -m pytest -q -m gpu -p no:cacheprovider tests
cat "$S/walls.txt"
tail -n 3 "$S/gpu-tests-console.txt" 2>/dev/null
grep -E "passed|failed|error" "$S/gpu-tests-console.txt" 2>/dev/null | tail -n 5
tail -n 60 "$S/bench-console.txt" 2>/dev/null
