#!/usr/bin/env bash
# Run AH (issue 23), from main's tree at the repo root (carry .devdeps and, to resume, kerneltune-out/runah).
# Phases, each skipped once done (a marker in the state folder) and for now when the time left is under its
# estimate: the two no-cap buckets' persistent configs swept with and without scale_in_exp2 (the default
# space plus one constraint, `persistent`: 8 + 18 configs in one journal), the result installed over the
# device copy's shipped table (again on every call: the tree is copied fresh), verify of both buckets, the
# whole bench, `pytest -m gpu` under kernel 901e38ed74c8abfd.
# Usage: bash runah.sh OUTDIR LIMIT_SECONDS
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user
S=kerneltune-out/runah
mkdir -p "$S"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/runah.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$S/gpu-$start.csv"
[ -e "$S/versions.txt" ] || python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash.txt"
if [ ! -e "$S/narrow.toml" ]; then
  cp search_spaces/ranker_attention.toml "$S/narrow.toml"
  printf '\n[[constraints]]\nexpr = "persistent"\nwhy = "run AH: the persistent configs of the no-cap buckets, each with and without scale_in_exp2"\n' >> "$S/narrow.toml"
fi
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
phase sweep 120 python3 -m kerneltune sweep ranker-attention --space "$S/narrow.toml" --bucket d128-none-long \
  --bucket d64-none-many-rows --max-seconds 1.0 --compile-threads 8 --run-timeout 120 --out "$S/sweep"
if [ -e "$S/sweep.done" ]; then
  python3 -m kerneltune install "$S/sweep/tables/nvidia-h200/ranker_attention.json" --to kerneltune/tables/shipped \
    >> "$S/install-console.txt" 2>&1; echo "install rc=$?" | tee -a "$S/install-console.txt"
  cp kerneltune/tables/shipped/nvidia-h200/ranker_attention.json "$S/shipped-after-install.json"
  phase verify-d128-none-long 120 python3 -m kerneltune verify ranker-attention --bucket d128-none-long \
    --junit "$S/verify-d128-none-long.xml"
  phase verify-d64-none-many-rows 100 python3 -m kerneltune verify ranker-attention --bucket d64-none-many-rows \
    --junit "$S/verify-d64-none-many-rows.xml"
  phase bench 470 python3 -m kerneltune bench ranker-attention --out "$S/bench"
  phase gpu-tests 440 python3 -m pytest -q -m gpu -p no:cacheprovider tests
fi
cat "$S/walls.txt"
tail -n 30 "$S/sweep-console.txt" 2>/dev/null
grep -E "^d[0-9]+-.*: " "$S"/verify-*-console.txt 2>/dev/null
tail -n 3 "$S/gpu-tests-console.txt" 2>/dev/null
tail -n 40 "$S/bench-console.txt" 2>/dev/null
