#!/usr/bin/env bash
# The main job on its built-in default: sweep ranker attention. With a Hopper GPU this is a live
# sweep; elsewhere it replays run P's journals, the last sweep of the shipped table's whole space
# (later runs re-measured its contenders), so it prints the run P figures the README quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=results/ranker_attention/2026-12-02-h200-run-p
JOURNALS=$RUN/calls2-3/sweep/journals
SPACE=$RUN/space.toml
OUT=kerneltune-demo
rm -rf "$OUT"
if .venv/bin/python -c 'import jax, sys; sys.exit(0 if jax.devices()[0].platform == "gpu" else 1)' 2>/dev/null; then
  exec .venv/bin/kerneltune sweep ranker-attention --out "$OUT"
fi
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --bucket d128-tanh-long \
  --bucket d128-none-long --bucket d64-tanh-many-rows --out "$OUT"
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --strategy tpe --budget 4 \
  --seed 0 --bucket d128-tanh-long --out "$OUT" --journal "$OUT/tpe.jsonl"
echo "Everything this demo wrote is in $OUT/: the replays' journals (journals/, tpe.jsonl) and their table (tables/)."
