#!/usr/bin/env bash
# Run D, step 3 (2x H200), results packed after each phase:
#   A. both GPUs: the two buckets the shipped table lacks (d64-softsign-few-candidates,
#      d128-clamp-very-long), exhaustive, as a shared study, added to a copy of the shipped table;
#   B. GPU 0: `kerneltune bench ranker-attention` with that table installed;
#      GPU 1: `kerneltune verify ranker-attention` on it, then Nsight Compute on the tuned
#      d128-tanh-long kernel and the same tiles without a cap (issue 9: what bounds tanh).
# Usage: bash results/ranker_attention/h200x2_d3.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=$OUT/r
TABLE=results/tables/nvidia-h200/ranker_attention.json
mkdir -p "$R/sweep/logs" "$R/sweep/tables/nvidia-h200" "$R/sweep/journals"
cp "$TABLE" "$R/sweep/tables/nvidia-h200/"
cp results/ranker_attention/2026-11-30-h200x2-run-d/step2/ceilings.json "$R/sweep/logs/"
t0=$(date +%s)
for w in 0 1; do
  timeout -s INT 220 python3 -m kerneltune sweep ranker-attention --out "$R/sweep" \
      --bucket d64-softsign-few-candidates --bucket d128-clamp-very-long \
      --storage "sqlite:///$R/sweep/study.db" --study run-d3 --worker "w$w" --gpus "$w" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 > "$R/sweep/w$w-console.txt" 2>&1 &
done
wait
echo "sweep: $(( $(date +%s) - t0 )) s" >> "$R/walls.txt"
pkill -f kerneltune.tuning.worker
tar czf "$OUT/sweep.tgz" --exclude=jax-cache -C "$R" sweep walls.txt
cp "$R/sweep/tables/nvidia-h200/ranker_attention.json" "$TABLE"

( t=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 320 python3 -m kerneltune bench ranker-attention --out "$R/bench" \
      > "$R/bench-console.txt" 2>&1; echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-console.txt"
  tar czf "$OUT/bench.tgz" -C "$R" bench bench-console.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  t=$(date +%s)
  timeout -s INT 200 python3 -m kerneltune verify ranker-attention > "$R/verify-console.txt" 2>&1
  echo "verify rc=$? wall $(( $(date +%s) - t )) s" >> "$R/verify-console.txt"
  tar czf "$OUT/verify.tgz" -C "$R" verify-console.txt
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n 1)
  mkdir -p "$R/ncu"
  echo "ncu: ${NCU:-not found}" > "$R/ncu/ncu-console.txt"
  if [ -n "$NCU" ]; then
    for cap in tanh none; do
      timeout -s INT 60 "$NCU" --kernel-name regex:"mosaic|entry|ranker|kernel" --launch-count 1 \
          --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
          --section WarpStateStats --section SchedulerStats -o "$R/ncu/d128-tanh-long-$cap" \
          python3 results/ranker_attention/profile_ranker.py d128-tanh-long "$cap" >> "$R/ncu/ncu-console.txt" 2>&1
      echo "ncu $cap rc=$?" >> "$R/ncu/ncu-console.txt"
      [ -f "$R/ncu/d128-tanh-long-$cap.ncu-rep" ] && "$NCU" -i "$R/ncu/d128-tanh-long-$cap.ncu-rep" --page details \
          > "$R/ncu/d128-tanh-long-$cap.txt" 2>&1 && "$NCU" -i "$R/ncu/d128-tanh-long-$cap.ncu-rep" --page raw --csv \
          > "$R/ncu/d128-tanh-long-$cap-raw.csv" 2>&1
    done
  fi
  tar czf "$OUT/ncu.tgz" -C "$R" ncu ) &
wait
tail -n 12 "$R/sweep/w0-console.txt"; tail -n 12 "$R/verify-console.txt"; tail -n 4 "$R/ncu/ncu-console.txt"
tail -n 60 "$R/bench-console.txt"
