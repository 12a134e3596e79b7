#!/usr/bin/env bash
# The examples on one H200 (issue 77): `bash results/examples/2026-12-06-h200/run.sh` from the repository root,
# the packages the GPU machine lacks carried as wheels in .whl. Each example's GPU bucket is swept (exhaustive,
# default settings), installed into a fresh user folder, verified (JUnit), reported, and its tuned config
# timed beside the heuristic's and the framework's own op on the same inputs (probe.py).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=.:/tmp/site PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-tables KERNELTUNE_CACHE=/tmp/kt-cache
D=results/examples/2026-12-06-h200
R=${OUT:-/tmp/out}
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$R/gpu.csv"
python3 -c 'import jax, torch, triton; print("jax", jax.__version__, jax.devices(), "torch", torch.__version__,
  "triton", triton.__version__)' > "$R/versions.txt" 2>&1
step() {  # step NAME CMD...: console to NAME.txt, wall seconds and exit code to steps.txt
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  timeout 120 "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$R/steps.txt"
}
for spec in pallas_matmul:m4096 triton_softmax:r16k-c4096 jax_matmul:m512; do
  ex=${spec%%:*}; bucket=${spec#*:}
  step "$ex-sweep" python3 -m kerneltune sweep "examples/$ex.py" --bucket "$bucket" --out "kt-out/$ex"
  step "$ex-install" python3 -m kerneltune install kt-out/$ex/tables/*/*.json
  step "$ex-verify" python3 -m kerneltune verify "examples/$ex.py" --junit "$R/$ex-verify.xml"
  step "$ex-report" python3 -m kerneltune report "kt-out/$ex" --csv "$R/$ex.csv"
  step "$ex-probe" python3 "$D/probe.py" "$ex" "$bucket"
  cp kt-out/$ex/journals/*.jsonl "$R/$ex-journal.jsonl"
  cp kt-out/$ex/tables/*/*.json "$R/$ex-table.json"
done
cat "$R/steps.txt"
