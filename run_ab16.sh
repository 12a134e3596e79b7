#!/usr/bin/env bash
# Attempt 16's A/B (ab_fused.py; this tree is branch attempt-16-fused-exponent), after the SASS of its D=64 tanh
# tile (Mosaic GPU's PTX, the device's CUDA 13.0 ptxas and nvdisasm). Before the call, at the repo root:
#   mkdir ab16 && git archive attempt-16-fused-exponent kerneltune search_spaces ab_fused.py run_ab16.sh | tar -x -C ab16
#   git archive main kerneltune/kernels/ranker_attention | tar -x -C /tmp/m && mkdir ab16/main_ranker &&
#   for f in kernel cap bounds config accuracy exp2_fma; do cp /tmp/m/kerneltune/kernels/ranker_attention/$f.py ab16/main_ranker/; done &&
#   touch ab16/main_ranker/__init__.py
# Then: run `cd ab16 && bash run_ab16.sh $OUT 390` (carry .devdeps). Usage: bash run_ab16.sh OUT AB_SECONDS
set -u
OUT=$1; AB=$2
export PYTHONPATH=.:../.devdeps PYTHONUNBUFFERED=1 KERNELTUNE_TABLES=/tmp/kt-user
mkdir -p /tmp/kt-user "$OUT/sass"
B=/usr/local/cuda-13.0/bin; D=/tmp/fused-dump; rm -rf "$D"; mkdir -p "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv > "$OUT/gpu.csv"
python3 -c "from kerneltune.kernels.ranker_attention.api import kernel_source_hash as h; print(h())" > "$OUT/hash.txt"
MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO="$D" XLA_PYTHON_CLIENT_PREALLOCATE=false python3 - > "$OUT/sass/compile-console.txt" 2>&1 <<'PY'
import jax, jax.numpy as jnp
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward
problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method="tanh", cap=30.0)
config = KernelConfig.for_problem(problem, block_kv=128, block_q=64, cap_impl="tanh_instr", exp2_fma_eighths=4,
                                  fast_math=True, mask_interior=False, num_stages=4, p_in_registers=True,
                                  persistent=True, schedule_barrier=True, static_max=True)
qs = jax.ShapeDtypeStruct((64, 1024, 4, 64), jnp.bfloat16)
build_forward(problem, config).trace(qs, qs, qs, jax.ShapeDtypeStruct((64, 4), jnp.int32)).lower().compile()
print("compiled")
PY
p=$(ls "$D"/*.ptx | head -1)
"$B/ptxas" -arch=sm_90a -O3 -v "$p" -o /tmp/fused.cubin > "$OUT/sass/tanh-fused.ptxas.txt" 2>&1
"$B/nvdisasm" -c -g /tmp/fused.cubin | gzip > "$OUT/sass/tanh-fused.sass.gz"
gzip -c "$p" > "$OUT/sass/tanh-fused.ptx.gz"
python3 - "$OUT/sass/tanh-fused.sass.gz" <<'PY' | tee "$OUT/sass-console.txt"
import collections, gzip, re, sys
cur = None; exp2 = collections.Counter(); total = 0
for line in gzip.open(sys.argv[1], "rt"):
    m = re.match(r'\s*//## File "(.*?)", line (\d+)', line)
    if m:
        cur = m.group(1).split("/")[-1]; continue
    m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if m:
        total += 1
        if cur == "exp2_fma.py":
            exp2[m.group(1)] += 1
print("tanh-fused", total, "instructions; exp2_fma.py:", dict(exp2.most_common(16)))
PY
grep -E "registers|spill" "$OUT/sass/tanh-fused.ptxas.txt"
t=$(date +%s)
OUT="$OUT/ab" AB_SECONDS="$AB" timeout -s INT -k 8 $((AB + 60)) python3 ab_fused.py > "$OUT/ab-console.txt" 2>&1
echo "ab rc=$? wall $(( $(date +%s) - t )) s" | tee -a "$OUT/ab-console.txt"
tail -n 24 "$OUT/ab-console.txt"
