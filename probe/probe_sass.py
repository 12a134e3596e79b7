"""Run AE's probe: compile one (variant, cap) at d64-b64-t1k's shape with the shipped D=64 tiles and exit; run it
under MOSAIC_GPU_DUMP_PTX=1 / MOSAIC_GPU_DUMP_PTXAS=1 / MOSAIC_GPU_DUMP_TO=DIR with PYTHONPATH at the variant's
tree. Usage: python3 probe_sass.py tanh|none
"""

import sys

import jax
import jax.numpy as jnp

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward

TILES = {  # the shipped table's D=64 entries under kernel 9443bda36b5a7bfd
    "tanh": dict(block_kv=128, block_q=64, cap_impl="tanh_instr", exp2_fma_eighths=5, fast_math=True,
                 mask_interior=False, num_stages=3, p_in_registers=True, persistent=True, schedule_barrier=True,
                 static_max=True),
    "none": dict(block_kv=128, block_q=64, cap_impl="exact", exp2_fma_eighths=0, fast_math=True,
                 mask_interior=False, num_stages=3, p_in_registers=True, persistent=True, schedule_barrier=True,
                 static_max=False),
}
cap = sys.argv[1]
problem = Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64, cap_method=cap,
                  cap=None if cap == "none" else 30.0)
config = KernelConfig.for_problem(problem, **TILES[cap])
s = jax.ShapeDtypeStruct
qs = s((64, 1024, 4, 64), jnp.bfloat16)
build_forward(problem, config).trace(qs, qs, qs, s((64, 4), jnp.int32)).lower().compile()
print("compiled", cap)
