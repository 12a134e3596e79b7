"""Run AJ, call 2: compile one D=64 tile at d64-b64-t1k's shape (no cap or tanh; 128- or 192-key blocks) and exit;
run under MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=DIR (probe_wide.sh). Usage: python3 probe_wide.py none|tanh KV"""

import sys

import jax
import jax.numpy as jnp

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward

TILES = {  # the shipped D=64 winners (run AJ's sweep kept them)
    "tanh": dict(block_q=64, cap_impl="tanh_instr", exp2_fma_eighths=5, num_stages=3, persistent=True,
                 static_max=True),
    "none": dict(block_q=64, num_stages=3, persistent=True, scale_in_exp2=True),
}
cap, kv = sys.argv[1], int(sys.argv[2])
problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method=cap,
                  cap=None if cap == "none" else 30.0)
config = KernelConfig.for_problem(problem, **TILES[cap], block_kv=kv)
s = jax.ShapeDtypeStruct
qs = s((64, 1024, 4, 64), jnp.bfloat16)
build_forward(problem, config).trace(qs, qs, qs, s((64, 4), jnp.int32)).lower().compile()
print("compiled", cap, kv)
