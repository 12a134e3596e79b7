"""A blocked matrix product in JAX, tuned on whatever JAX runs on (the CPU here): ``make demo`` sweeps it."""
import jax
import jax.numpy as jnp

import kerneltune as kt


class BlockedMatmul(kt.Kernel):
    params = {"block_k": [16, 64, 256], "unroll": [1, 4]}
    buckets = {"m256": {"m": 256, "n": 256, "k": 512}, "m512": {"m": 512, "n": 512, "k": 512}}

    def build(self, p, c):
        def matmul(a, b):  # the sum over k in block_k slices, each a matrix product
            a = a.reshape(p.m, p.k // c.block_k, c.block_k).transpose(1, 0, 2)
            b = b.reshape(p.k // c.block_k, c.block_k, p.n)
            step = lambda acc, ab: (acc + ab[0] @ ab[1], None)  # noqa: E731
            return jax.lax.scan(step, jnp.zeros((p.m, p.n), a.dtype), (a, b), unroll=c.unroll)[0]
        return jax.jit(matmul)

    def inputs(self, p, seed):
        ka, kb = jax.random.split(jax.random.key(seed))
        return jax.random.normal(ka, (p.m, p.k)), jax.random.normal(kb, (p.k, p.n))

    def reference(self, a, b):
        return a @ b

    def refuses(self, p, c):
        return p.k % c.block_k and f"block_k {c.block_k} does not divide k={p.k}"

    def flops(self, p):
        return 2.0 * p.m * p.n * p.k


KERNEL = BlockedMatmul()
