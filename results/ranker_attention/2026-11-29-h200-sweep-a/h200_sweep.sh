#!/usr/bin/env bash
# H200 run of the tuning engine on ranker attention (run from the repository root):
#   1. an exhaustive sweep of 4 buckets with compile-ahead (4 compile workers);
#   2. one more bucket swept twice on the same candidates: compile-ahead, then a
#      sequential compile-then-time loop (fresh JAX caches each), for wall time and
#      for the run-to-run spread of every candidate timed twice;
#   3. the D=256 verification that the first run's time limit cut off.
# Usage: bash results/ranker_attention/h200_sweep.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=. PYTHONUNBUFFERED=1
KT="python3 -m kerneltune sweep ranker-attention --max-seconds 1 --no-resume"
stamp() { date +%s.%N; }
t0=$(stamp)
$KT --bucket d128-tanh-long --bucket d128-gqa-tanh-short --bucket d64-tanh-many-rows \
    --bucket d64-softsign-few-candidates --out "$OUT/sweep" --compile-workers 4
t1=$(stamp)
$KT --bucket d128-none-long --out "$OUT/ahead" --compile-workers 4
t2=$(stamp)
$KT --bucket d128-none-long --out "$OUT/sequential" --compile-workers 0
t3=$(stamp)
python3 -c "import sys; a=[float(x) for x in sys.argv[1:]]; print(f\"WALL sweep4={a[1]-a[0]:.1f}s ahead={a[2]-a[1]:.1f}s sequential={a[3]-a[2]:.1f}s\")" "$t0" "$t1" "$t2" "$t3" | tee "$OUT/walls.txt"
[ "${VERIFY256:-1}" = 1 ] && timeout 150 python3 results/ranker_attention/h200_verify_and_time.py --out "$OUT/verify256" --head-dims 256 --skip-timing
