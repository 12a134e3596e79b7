#!/usr/bin/env bash
# Second H200 run of the engine (compile-ahead on threads beside the timer):
#   1. resume the exhaustive sweep from run A's journal: finish d64-tanh-many-rows and sweep
#      d64-softsign-few-candidates (run A did d128-tanh-long and d128-gqa-tanh-short);
#   2. the same 6 candidates of d128-none-long swept with compile-ahead, then with a sequential
#      compile-then-time loop: wall time of each, and every candidate timed twice (the spread).
# Usage: bash results/ranker_attention/h200_sweep_b.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=. PYTHONUNBUFFERED=1
KT="python3 -m kerneltune sweep ranker-attention"
mkdir -p "$OUT/sweep/journals"
cp results/ranker_attention/2026-11-29-h200-sweep-a/journal.jsonl "$OUT/sweep/journals/ranker_attention-live.jsonl"
stamp() { date +%s.%N; }
timeout 180 $KT --bucket d128-tanh-long --bucket d128-gqa-tanh-short --bucket d64-tanh-many-rows \
    --bucket d64-softsign-few-candidates --out "$OUT/sweep" --max-seconds 0.5 --compile-threads 4
t1=$(stamp)
timeout 50 $KT --bucket d128-none-long --budget 6 --out "$OUT/ahead" --max-seconds 1 --compile-threads 4 --no-resume
t2=$(stamp)
timeout 70 $KT --bucket d128-none-long --budget 6 --out "$OUT/sequential" --max-seconds 1 --compile-threads 0 --no-resume
t3=$(stamp)
python3 -c "import sys; a=[float(x) for x in sys.argv[1:]]; print(f\"WALL ahead={a[1]-a[0]:.1f}s sequential={a[2]-a[1]:.1f}s\")" "$t1" "$t2" "$t3" | tee "$OUT/walls.txt"
