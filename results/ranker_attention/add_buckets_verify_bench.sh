#!/usr/bin/env bash
# Add buckets to the shipped table without touching its other entries: one shared Optuna study over
# SPACE on both GPUs of an x2 machine writes into a copy of the shipped table, which is then installed
# on the device's copy. GPU 0 verifies the new entries (and their fallbacks), then runs the bench as a
# replicate; GPU 1 runs the bench. Calling it again on the still-warm machine resumes the study.
# Usage: bash results/ranker_attention/add_buckets_verify_bench.sh OUTDIR LIMIT SPACE STUDY BUCKET...
set -u
OUT=$1
LIMIT=$2
SPACE=$3
STUDY=$4
shift 4
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1
TABLE=results/tables/nvidia-h200/ranker_attention.json
R=/tmp/$STUDY
RUN=$R/sweep
mkdir -p "$RUN/tables/nvidia-h200"
[ -f "$RUN/$TABLE" ] || cp "$TABLE" "$RUN/tables/nvidia-h200/"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$R/gpus.csv"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
pack() { tar czf "$OUT/$STUDY.tgz" --exclude=jax-cache -C "$R" . ; cp "$R"/*.txt "$OUT"/ 2>/dev/null; }
worker() {  # worker GPU
  timeout -s INT "$(( $(left) - 380 ))" python3 -m kerneltune sweep ranker-attention --space "$SPACE" \
      --out "$RUN" --storage "sqlite:///$RUN/study.db" --study "$STUDY" --worker "w$1" --gpus "$1" --heartbeat 5 \
      --max-seconds 0.5 --compile-threads 4 --run-timeout 90 > "$RUN/w$1-console-$start.txt" 2>&1
  echo "worker $1 rc=$? at $(( $(date +%s) - start )) s (call started $start)" >> "$RUN/walls.txt"
}
worker 0 & worker 1 &
wait
pkill -f kerneltune.tuning.worker
names=$(python3 -c "import json; print(' '.join(sorted(e['bucket_name'] for e in json.load(open('$RUN/tables/nvidia-h200/ranker_attention.json'))['entries'].values())))")
echo "table buckets: $names; $(left) s left" | tee "$R/finish.txt"
pack
missing=0; for b in "$@"; do case " $names " in *" $b "*) ;; *) missing=1 ;; esac; done
if [ $missing = 0 ] && [ "$(left)" -gt 200 ]; then
  cp "$RUN/tables/nvidia-h200/ranker_attention.json" "$TABLE"
  bench() {  # GPU
    t=$(date +%s)
    CUDA_VISIBLE_DEVICES=$1 timeout -s INT "$(( $(left) - 10 ))" python3 -m kerneltune bench ranker-attention \
        --out "$R/bench-gpu$1" > "$R/bench-gpu$1-console.txt" 2>&1
    echo "bench rc=$? wall $(( $(date +%s) - t )) s" >> "$R/bench-gpu$1-console.txt"
  }
  ( t=$(date +%s)
    CUDA_VISIBLE_DEVICES=0 timeout -s INT "$(( $(left) - 15 ))" python3 -m kerneltune verify ranker-attention \
        $(printf -- '--bucket %s ' "$@") > "$R/verify-console.txt" 2>&1
    echo "verify rc=$? wall $(( $(date +%s) - t )) s" >> "$R/verify-console.txt"
    pack
    bench 0 ) &
  bench 1 &
  wait
  pack
fi
cat "$RUN/walls.txt" "$R/finish.txt"; tail -n 3 "$R"/verify-console.txt 2>/dev/null
tail -n 30 "$R/bench-gpu1-console.txt" 2>/dev/null; tail -n 2 "$R/bench-gpu0-console.txt" 2>/dev/null
