#!/usr/bin/env bash
# Run C (2x H200), step 2 (after h200x2_sweep_c.sh; the shared workers now compile the next trial
# ahead while they time one):
#   1. resume the shared exhaustive sweep of the default space from step 1's study and journals;
#   2. issue 7: d128-none-long as a fresh shared study worked by 2 workers (one per GPU), then by
#      1 worker on GPU 0 (wall times);
#   3. issue 4: d128-none-long by 1 worker with compile-ahead on GPU 0 and, at the same time, by
#      1 worker compiling each candidate when it is timed (--compile-threads 0) on GPU 1.
# Measured ceilings are reused from step 1 (logs/ceilings.json) so no run spends ~20 s on them.
# Usage: bash results/ranker_attention/h200x2_sweep_c2.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
RUN=$OUT/run
SRC=results/ranker_attention
mkdir -p "$RUN"
stamp() { date +%s.%N; }
wall() { python3 -c "import sys; print(f'WALL {sys.argv[1]} {float(sys.argv[3])-float(sys.argv[2]):.1f}s')" "$@" | tee -a "$RUN/walls.txt"; }
prep() { mkdir -p "$RUN/$1/logs"; cp $SRC/run-c-logs/ceilings.json "$RUN/$1/logs/"; }
sweep() {  # DIR WORKER GPU THREADS STUDY [args...]
  local dir=$1 w=$2 g=$3 th=$4 study=$5; shift 5
  python3 -m kerneltune sweep ranker-attention --out "$RUN/$dir" --storage "sqlite:///$RUN/$dir/study.db" \
      --study "$study" --worker "$w" --gpus "$g" --heartbeat 5 --max-seconds 0.5 --compile-threads "$th" "$@" \
      > "$RUN/$dir/$w.log" 2>&1
}

prep main
cp $SRC/run-c-study.db "$RUN/main/study.db"
cp -r $SRC/run-c-journals "$RUN/main/journals"
t0=$(stamp)
sweep main w0 0 4 run-c & sweep main w1 1 4 run-c & wait
t1=$(stamp); wall "main-rest-2-workers" "$t0" "$t1"

prep two; prep one
t0=$(stamp)
sweep two w0 0 4 none-2w --bucket d128-none-long & sweep two w1 1 4 none-2w --bucket d128-none-long & wait
t1=$(stamp); wall "d128-none-long-2-workers" "$t0" "$t1"
sweep one w0 0 4 none-1w --bucket d128-none-long
t2=$(stamp); wall "d128-none-long-1-worker" "$t1" "$t2"

prep ahead; prep seq
t0=$(stamp)
( sweep ahead w0 0 4 ahead --bucket d128-none-long; wall "ahead-gpu0" "$t0" "$(stamp)" ) &
( sweep seq w1 1 0 seq --bucket d128-none-long; wall "sequential-gpu1" "$t0" "$(stamp)" ) &
wait
pkill -f kerneltune.tuning.worker
for d in main two one ahead seq; do echo "== $d"; tail -n 12 "$RUN/$d/w0.log" | grep -v "^$" | tail -n 9; done
cat "$RUN/walls.txt"
