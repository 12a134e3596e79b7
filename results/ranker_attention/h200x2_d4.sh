#!/usr/bin/env bash
# Run D, step 4 (2x H200): GPU 0 resumes the d128-clamp-very-long bucket that step 3's limit cut
# (shared study and journals from step3/sweep); GPU 1 runs Nsight Compute on the tuned d128-tanh-long
# kernel and on the same tiles without a cap, with JAX's preallocation off (step 3's replays backed up
# the whole preallocated GPU memory and ran past their limit).
# Usage: bash results/ranker_attention/h200x2_d4.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
R=$OUT/r
mkdir -p "$R"
cp -r results/ranker_attention/2026-11-30-h200x2-run-d/step3/sweep "$R/sweep"
( t=$(date +%s)
  timeout -s INT 175 python3 -m kerneltune sweep ranker-attention --out "$R/sweep" --bucket d128-clamp-very-long \
      --storage "sqlite:///$R/sweep/study.db" --study run-d3 --worker w2 --gpus 0 --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 > "$R/sweep/w2-console.txt" 2>&1
  echo "sweep step 4: $(( $(date +%s) - t )) s" >> "$R/sweep/walls-step4.txt"
  pkill -f kerneltune.tuning.worker
  tar czf "$OUT/sweep.tgz" --exclude=jax-cache -C "$R" sweep ) &
( export CUDA_VISIBLE_DEVICES=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
  mkdir -p "$R/ncu"
  for cap in tanh none; do
    timeout -s INT 80 /usr/local/cuda/bin/ncu --kernel-name regex:"entry_mosaic_gpu" --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
        --section WarpStateStats -o "$R/ncu/d128-tanh-long-$cap" \
        python3 results/ranker_attention/profile_ranker.py d128-tanh-long "$cap" >> "$R/ncu/ncu-console.txt" 2>&1
    echo "ncu $cap rc=$?" >> "$R/ncu/ncu-console.txt"
    [ -f "$R/ncu/d128-tanh-long-$cap.ncu-rep" ] && /usr/local/cuda/bin/ncu -i "$R/ncu/d128-tanh-long-$cap.ncu-rep" \
        --page details > "$R/ncu/d128-tanh-long-$cap.txt" 2>&1
    [ -f "$R/ncu/d128-tanh-long-$cap.ncu-rep" ] && /usr/local/cuda/bin/ncu -i "$R/ncu/d128-tanh-long-$cap.ncu-rep" \
        --page raw --csv > "$R/ncu/d128-tanh-long-$cap-raw.csv" 2>&1
    tar czf "$OUT/ncu.tgz" -C "$R" ncu
  done ) &
wait
tail -n 3 "$R/sweep/w2-console.txt"; tail -n 4 "$R/ncu/ncu-console.txt"
grep -h -E "Duration|Issue Slots Busy|Executed Ipc Active|SM Busy|Compute \(SM\) Throughput|No Eligible|Active Warps Per Scheduler|Eligible Warps" "$R"/ncu/*.txt
