#!/usr/bin/env bash
# The main job on its built-in default: sweep ranker attention. With a Hopper GPU this is a live
# sweep; elsewhere it replays the journal recorded on the H200 and shipped in results/.
set -euo pipefail
cd "$(dirname "$0")/.."
# Run F's exhaustive sweep of the default space (both workers' journals; run G re-measured only its
# contenders after a kernel change, so the whole landscape is run F's).
JOURNAL=results/ranker_attention/2026-11-30-h200x2-run-f/sweep/journals
OUT=$(mktemp -d)
if .venv/bin/python -c 'import jax, sys; sys.exit(0 if jax.devices()[0].platform == "gpu" else 1)' 2>/dev/null; then
  exec .venv/bin/kerneltune sweep ranker-attention --out "$OUT"
fi
echo "No GPU here: replaying the H200 sweep recorded in $JOURNAL (no kernel runs on this machine)."
echo "Configs with static_max=True came after that sweep: they are not in its journals and show as unsupported."
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNAL" --bucket d128-tanh-long \
  --bucket d128-none-long --bucket d128-gqa-tanh-short --bucket d64-tanh-many-rows --out "$OUT"
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNAL" --strategy tpe --budget 6 --seed 0 \
  --bucket d128-tanh-long --out "$OUT" --journal "$OUT/tpe.jsonl"
