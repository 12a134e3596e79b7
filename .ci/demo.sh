#!/usr/bin/env bash
# The main job on its built-in default. First a live sweep of examples/jax_matmul.py (a 34-line kernel of
# one's own) on this machine, its table installed into the demo's own tables folder and looked up; then
# ranker attention: a live sweep with a Hopper GPU, elsewhere a replay of the last sweep of the shipped
# table's whole space (results/ranker_attention/2026-12-02-h200-run-p/), whose figures the docs quote.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=results/ranker_attention/2026-12-02-h200-run-p
JOURNALS=$RUN/calls2-3/sweep/journals
SPACE=$RUN/space.toml
OUT=kerneltune-demo
rm -rf "$OUT"
export KERNELTUNE_TABLES=$OUT/installed  # the demo never touches the user's own tables
echo "== 1. Your own kernel, live on this machine: kerneltune sweep examples/jax_matmul.py"
.venv/bin/kerneltune sweep examples/jax_matmul.py --out "$OUT/own"
.venv/bin/kerneltune install "$OUT"/own/tables/*/blocked-matmul.json
.venv/bin/python - <<'PY'
import logging, sys, textwrap
logging.basicConfig(format="%(message)s")  # the lookup's one line on a miss, wrapped as the rest is
logging.getLogger().handlers[0].setFormatter(type("Wrapped", (logging.Formatter,), {
    "format": lambda self, r: textwrap.fill(r.getMessage(), 120, subsequent_indent="  ",
                                                 break_on_hyphens=False, break_long_words=False)})())
sys.path.insert(0, "examples")
from jax_matmul import KERNEL
print("at run time: KERNEL.tuned(m=512, n=512, k=512) ->", dict(KERNEL.tuned(m=512, n=512, k=512)))
print("an untuned shape:  KERNEL.tuned(m=384, n=256, k=768) ->", dict(KERNEL.tuned(m=384, n=256, k=768)))
PY
if .venv/bin/python -c 'import jax, sys; sys.exit(0 if jax.devices()[0].platform == "gpu" else 1)' 2>/dev/null; then
  echo "== 2. Ranker attention, live on this GPU"
  exec .venv/bin/kerneltune sweep ranker-attention --out "$OUT"
fi
echo "== 2. Ranker attention, replayed from its H200 record (no Hopper GPU here)"
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --bucket d128-tanh-long \
  --bucket d128-none-long --bucket d64-tanh-many-rows --out "$OUT"
.venv/bin/kerneltune sweep ranker-attention --replay "$JOURNALS" --space "$SPACE" --strategy tpe --budget 4 \
  --seed 0 --bucket d128-tanh-long --out "$OUT" --journal "$OUT/tpe.jsonl"
echo "Everything this demo wrote is in $OUT/: your kernel's sweep (own/) and installed table (installed/), the"
echo "replays' journals (journals/, tpe.jsonl) and their table (tables/)."
