"""Compile one ranker-attention config at d128-tanh-long's shape and exit: run with
MOSAIC_GPU_DUMP_PTXAS=1 / MOSAIC_GPU_DUMP_SASS=1 / MOSAIC_GPU_DUMP_TO=DIR to keep what ptxas says
(wgmma serialisation warnings, registers, spills) and the SASS, one config per process.

Usage: python3 ptxas_probe.py '{"block_q": 64, "block_kv": 128, ...}'
"""

import json
import sys

import jax
import jax.numpy as jnp

from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.kernel import build_forward

problem = Problem(batch=8, seq_len=4096, q_heads=8, kv_heads=8, head_dim=128, cap_method="tanh", cap=30.0)
config = KernelConfig.for_problem(problem, **json.loads(sys.argv[1]))
s = jax.ShapeDtypeStruct
qs = s((8, 4096, 8, 128), jnp.bfloat16)
build_forward(problem, config).trace(qs, qs, qs, s((8, 4), jnp.int32)).lower().compile()
print("compiled", config.tile())
