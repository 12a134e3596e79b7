#!/usr/bin/env bash
# The main job on its built-in default: sweep ranker attention. With a Hopper GPU this is a live
# sweep; elsewhere it replays the journals of the sweep that made the shipped table (run I), so the
# figures it prints are the README's.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=results/ranker_attention/2026-11-30-h200-run-i
JOURNALS=$RUN/call2/sweep/journals
SPACE=results/ranker_attention/2026-11-30-h200-run-h/static-max-resweep-space.toml
OUT=kerneltune-demo
rm -rf "$OUT"
if .venv/bin/python -c 'import jax, sys; sys.exit(0 if jax.devices()[0].platform == "gpu" else 1)' 2>/dev/null; then
  exec .venv/bin/kerneltune sweep ranker-attention --out "$OUT"
fi
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --bucket d128-tanh-long \
  --bucket d128-none-long --bucket d64-tanh-many-rows --out "$OUT"
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --strategy tpe --budget 6 \
  --seed 0 --bucket d128-tanh-long --out "$OUT" --journal "$OUT/tpe.jsonl"
echo "Everything this demo wrote is in $OUT/ (journals, tables, logs)."
