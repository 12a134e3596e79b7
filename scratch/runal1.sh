#!/usr/bin/env bash
# Run AL call 1 (issue 23, attempt 23): the quadratic A/B, then the GPU tests of the tanh instruction (the quadratic's
# case new). From main's tree at the repo root; carry .devdeps. Usage: bash scratch/runal1.sh OUTDIR
set -u
OUT=$1
export PYTHONPATH=.:.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p /tmp/kt-user "$OUT"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
python3 -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())" > "$OUT/versions.txt" 2>&1
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
t=$(date +%s)
OUT=$OUT AB_SECONDS=${AB_SECONDS:-150} timeout 450 python3 scratch/ab_quad.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? wall $(( $(date +%s) - t )) s" | tee -a "$OUT/walls.txt"
t=$(date +%s)
timeout $(( 580 - ($(date +%s) - start) )) python3 -m pytest -q -m gpu -p no:cacheprovider \
  tests/kernels/ranker_attention/test_gpu.py -k tanh_instruction > "$OUT/gpu-tests-console.txt" 2>&1
echo "gpu tests rc=$? wall $(( $(date +%s) - t )) s" | tee -a "$OUT/walls.txt"
tail -n 3 "$OUT/gpu-tests-console.txt"
grep -A200 "== accuracy" "$OUT/ab-console.txt" || tail -n 40 "$OUT/ab-console.txt"
