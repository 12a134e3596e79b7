#!/usr/bin/env bash
# Run C (2x H200), step 1: the exhaustive sweep of every bucket of the default space, as one shared
# Optuna study (SQLite on the host) worked by two workers, one per GPU. The study database and the
# per-worker journals come back in OUTDIR, so a second step can resume what a time limit cut off.
# Usage: bash results/ranker_attention/h200x2_sweep_c.sh OUTDIR SECONDS
set -u
OUT=$1
LIMIT=$2
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
RUN=$OUT/run
mkdir -p "$RUN/main"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv > "$RUN/gpus.csv"
[ -f results/ranker_attention/run-c-study.db ] && cp results/ranker_attention/run-c-study.db "$RUN/main/study.db"
[ -d results/ranker_attention/run-c-journals ] && cp -r results/ranker_attention/run-c-journals "$RUN/main/journals"
start=$(date +%s.%N)
for w in 0 1; do
  timeout -s INT "$LIMIT" python3 -m kerneltune sweep ranker-attention --out "$RUN/main" \
      --storage "sqlite:///$RUN/main/study.db" --study run-c --worker "w$w" --gpus "$w" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 > "$RUN/main/w$w.log" 2>&1 &
done
wait
end=$(date +%s.%N)
pkill -f kerneltune.tuning.worker
python3 -c "import sys; print(f'WALL main (2 workers) {float(sys.argv[2])-float(sys.argv[1]):.1f}s')" "$start" "$end" \
    | tee "$RUN/walls.txt"
tail -n 25 "$RUN/main/w0.log"
tail -n 5 "$RUN/main/w1.log"
wc -l "$RUN"/main/journals/*.jsonl
