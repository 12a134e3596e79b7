#!/usr/bin/env bash
# Attempt 24's device script (prepared after run AL; from the attempt's tree at the repo root; carry .devdeps and,
# to resume, kerneltune-out/runam). Phases, each skipped once done (a marker in the state folder) and for now when
# the time left is under its estimate: the pv_in_flight GPU tests; the A/B (scratch/ab_inflight.py); then, only with
# GO=1 (after reading the A/B), the shipped table's contenders re-measured with the field off and on (resumable),
# installed on the device copy, verified, the bench and `pytest -m gpu`.
# GO defaults to 1 when the A/B printed its adoption verdict (the rule in ab_inflight.py), 0 otherwise.
# Usage: [GO=0|1] [BUCKETS="--bucket NAME ..."] bash scratch/runam.sh OUTDIR LIMIT_SECONDS
set -u
OUT=$1; LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p /tmp/kt-user
S=kerneltune-out/runam
mkdir -p "$S"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
save() { tar czf "$OUT/runam.tgz" --exclude=jax-cache -C "$S" . ; cp "$S"/walls.txt "$OUT"/ 2>/dev/null; }
trap save EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$S/gpu-$start.csv"
python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$S/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$S/hash.txt"
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
phase pv-tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/ranker_attention/test_gpu.py -k pv_in_flight
OUT="$S/ab" AB_SECONDS=${AB_SECONDS:-120} phase ab 270 python3 scratch/ab_inflight.py
grep -q "GO ON TO ADOPTION" "$S/ab-console.txt" 2>/dev/null && GO=${GO:-1}
if [ "${GO:-0}" = 1 ]; then
  [ -e "$S/contenders.json" ] || python3 scratch/make_contenders.py kerneltune/tables/shipped/nvidia-h200/ranker_attention.json \
    "$S/contenders.json" > "$S/contenders-console.txt" 2>&1
  # shellcheck disable=SC2086
  phase sweep 200 python3 -m kerneltune sweep ranker-attention --contenders "$S/contenders.json" ${BUCKETS:-} \
    --max-seconds 1.0 --compile-threads 8 --run-timeout 120 --out "$S/sweep"
  if [ -e "$S/sweep.done" ]; then
    python3 -m kerneltune install "$S/sweep/tables/nvidia-h200/ranker_attention.json" --to kerneltune/tables/shipped \
      >> "$S/install-console.txt" 2>&1; echo "install rc=$?" | tee -a "$S/install-console.txt"
    cp kerneltune/tables/shipped/nvidia-h200/ranker_attention.json "$S/shipped-after-install.json"
    # shellcheck disable=SC2086
    phase verify 300 python3 -m kerneltune verify ranker-attention ${BUCKETS:-} --junit "$S/verify.xml"
    phase bench 120 python3 -m kerneltune bench ranker-attention --resume --out "$S/bench"
    phase gpu-tests 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests
  fi
fi
cat "$S/walls.txt"
tail -n 3 "$S/pv-tests-console.txt" 2>/dev/null
grep -A12 "== inflight" "$S/ab-console.txt" 2>/dev/null
tail -n 30 "$S/sweep-console.txt" 2>/dev/null
tail -n 3 "$S/gpu-tests-console.txt" 2>/dev/null
tail -n 40 "$S/bench-console.txt" 2>/dev/null
