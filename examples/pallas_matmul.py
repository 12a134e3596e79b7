"""A Pallas matrix product: lowered through Triton on an NVIDIA GPU, run by Pallas's interpreter on the CPU."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

import kerneltune as kt


class PallasMatmul(kt.Kernel):
    params = {"block_m": [64, 128], "block_n": [64, 128], "block_k": [32, 64], "warps": [4, 8], "stages": [2, 3]}
    buckets = {"m256": {"m": 256, "n": 256, "k": 256}, "m4096": {"m": 4096, "n": 4096, "k": 4096}}

    def build(self, p, c):
        def tile(a_ref, b_ref, o_ref):  # one (block_m, block_n) tile of the product, k in block_k steps
            def step(i, acc):
                k = pl.ds(pl.multiple_of(i * c.block_k, c.block_k), c.block_k)
                return acc + jnp.dot(a_ref[:, k], b_ref[k, :], preferred_element_type=jnp.float32)
            o_ref[...] = jax.lax.fori_loop(0, p.k // c.block_k, step, jnp.zeros(o_ref.shape)).astype(o_ref.dtype)
        return jax.jit(pl.pallas_call(
            tile, grid=(p.m // c.block_m, p.n // c.block_n), out_shape=jax.ShapeDtypeStruct((p.m, p.n), jnp.bfloat16),
            in_specs=[pl.BlockSpec((c.block_m, p.k), lambda i, j: (i, 0)),
                      pl.BlockSpec((p.k, c.block_n), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((c.block_m, c.block_n), lambda i, j: (i, j)),
            compiler_params=plt.CompilerParams(num_warps=c.warps, num_stages=c.stages),
            interpret=jax.default_backend() == "cpu"))

    def inputs(self, p, seed):
        ka, kb = jax.random.split(jax.random.key(seed))
        return jax.random.normal(ka, (p.m, p.k), jnp.bfloat16), jax.random.normal(kb, (p.k, p.n), jnp.bfloat16)

    def reference(self, a, b):
        return a @ b

    def flops(self, p):
        return 2.0 * p.m * p.n * p.k


KERNEL = PallasMatmul()
