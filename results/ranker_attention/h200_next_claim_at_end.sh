#!/usr/bin/env bash
# Prepared in run G for the next session (not run yet): A/B/A of claim-at-end.patch against the committed
# kernel (claims at a tile's start). PART=ab: schedule_ab.py A1 B A2 (about 170 s each); PART=small:
# claim_vs_one_cta.py with A and with B (the small problems where the start-claim loses to one CTA per
# tile). Every result is copied into OUT as soon as it exists, so a call cut at its limit keeps it.
# Usage: bash results/ranker_attention/h200_next_claim_at_end.sh OUTDIR ab|small
set -u
OUT=$1
PART=$2
ROOT=$(pwd)
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/gpus.csv"
rm -rf /tmp/kB && mkdir -p /tmp/kB && cp -r kerneltune /tmp/kB/ \
  && (cd /tmp/kB && patch -p1 < "$ROOT/results/ranker_attention/2026-11-30-h200-run-g/claim-at-end.patch") \
  > "$OUT/patch.txt" 2>&1
run() {  # LABEL KERNEL_ROOT SCRIPT ARGS...
  local label=$1 root=$2; shift 2
  local t
  t=$(date +%s)
  (cd results/ranker_attention && PYTHONPATH=$root:$ROOT/.devdeps timeout -s INT 240 python3 "$@") \
      > "$OUT/$label.txt" 2>&1
  echo "$label rc=$? wall $(( $(date +%s) - t )) s" >> "$OUT/$label.txt"
  tail -n 13 "$OUT/$label.txt"
}
case $PART in
  ab)
    run ab-A1 "$ROOT" schedule_ab.py A1 "$OUT/ab-A1.json"
    run ab-B /tmp/kB schedule_ab.py B "$OUT/ab-B.json"
    run ab-A2 "$ROOT" schedule_ab.py A2 "$OUT/ab-A2.json" ;;
  small)
    run small-A "$ROOT" claim_vs_one_cta.py "$OUT/small-A.json"
    run small-B /tmp/kB claim_vs_one_cta.py "$OUT/small-B.json" ;;
esac
