#!/usr/bin/env bash
# Run C (2x H200), step 3, with hard time limits and results packed after each phase:
#   1. issue 4: the first 8 candidates of d128-none-long with compile-ahead on GPU 0 and, at the
#      same time, compiling each candidate when it is timed (--compile-threads 0) on GPU 1;
#   2. GPU 0: `kerneltune bench ranker-attention` (issue 9); GPU 1: `kerneltune verify
#      ranker-attention` on the table of step 1 (issue 5), then the gpu-marked pytest tests.
# Usage: bash results/ranker_attention/h200x2_final_c3.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=$OUT/r
mkdir -p "$R"
stamp() { date +%s.%N; }
wall() { python3 -c "import sys; print(f'WALL {sys.argv[1]} {float(sys.argv[3])-float(sys.argv[2]):.1f}s')" "$@" | tee -a "$R/walls.txt"; }
one() {  # DIR GPU THREADS
  mkdir -p "$R/$1/logs"; cp results/ranker_attention/2026-11-30-h200x2-sweep-c/ceilings.json "$R/$1/logs/"
  local t0; t0=$(stamp)
  timeout -s INT 130 python3 -m kerneltune sweep ranker-attention --bucket d128-none-long --budget 8 \
      --gpus "$2" --compile-threads "$3" --out "$R/$1" --max-seconds 0.5 --no-resume > "$R/$1/console.txt" 2>&1
  wall "$1" "$t0" "$(stamp)"
}
one ahead 0 4 & one sequential 1 0 & wait
pkill -f kerneltune.tuning.worker
tar czf "$OUT/phase1.tgz" --exclude=jax-cache -C "$R" .

( CUDA_VISIBLE_DEVICES=0 timeout -s INT 250 python3 -m kerneltune bench ranker-attention --out "$R/bench" \
      > "$R/bench-console.txt" 2>&1; echo "bench rc=$?" >> "$R/bench-console.txt" ) &
( export CUDA_VISIBLE_DEVICES=1
  timeout -s INT 100 python3 -m kerneltune verify ranker-attention > "$R/verify-console.txt" 2>&1
  echo "verify rc=$?" >> "$R/verify-console.txt"
  timeout -s INT 140 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/kernels/ranker_attention/test_gpu.py \
      tests/bench > "$R/pytest-gpu.txt" 2>&1
  echo "pytest rc=$?" >> "$R/pytest-gpu.txt" ) &
wait
tar czf "$OUT/all.tgz" --exclude=jax-cache -C "$R" .
cat "$R/walls.txt"; tail -n 30 "$R/verify-console.txt"; tail -n 8 "$R/pytest-gpu.txt"; tail -n 40 "$R/bench-console.txt"
