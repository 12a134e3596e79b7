"""Run Y's follow-up (next device session): what ptxas makes of attempt 14's tile orders at the D=64 tiles.
Compiles one (tile, order) at d64-b64-t1k's shape and exits; run it under MOSAIC_GPU_DUMP_PTXAS=1,
MOSAIC_GPU_DUMP_SASS=1 and MOSAIC_GPU_DUMP_TO=DIR, one process per variant (probe_ptxas.sh).
Usage: python3 probe_ptxas.py tanh|none ORDER
"""

import sys

import jax
import jax.numpy as jnp

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward

TILES = {  # the shipped table's D=64 winners under kernel d631204aa9d0e3cc (run X)
    "tanh": dict(block_kv=128, block_q=64, cap_impl="tanh_instr", exp2_fma_eighths=4, fast_math=True,
                 mask_interior=False, num_stages=4, p_in_registers=True, persistent=True, schedule_barrier=True,
                 static_max=True),
    "none": dict(block_kv=128, block_q=64, cap_impl="exact", exp2_fma_eighths=0, fast_math=True,
                 mask_interior=False, num_stages=3, p_in_registers=True, persistent=True, schedule_barrier=True,
                 static_max=False),
}
cap, order = sys.argv[1], sys.argv[2]
problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method=cap,
                  cap=None if cap == "none" else 30.0)
config = KernelConfig.for_problem(problem, **TILES[cap], tile_order=order)
s = jax.ShapeDtypeStruct
qs = s((64, 1024, 4, 64), jnp.bfloat16)
build_forward(problem, config).trace(qs, qs, qs, s((64, 4), jnp.int32)).lower().compile()
print("compiled", cap, order)
