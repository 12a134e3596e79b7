"""The interpreter's callbacks on NumPy arrays: the kernel's outputs bit for bit JAX's own path's, a user's own
``io_callback`` untouched, and JAX as shipped on a version the fast path was not checked on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import callback
from jax._src.pallas.mosaic_gpu.interpret import shared_memory

from kerneltune.kernels.ranker_attention import interpret_callbacks
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_tensors
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.verify import poisoned_outputs


@pytest.mark.slow
def test_the_kernel_computes_the_same_bits_as_on_jaxs_own_path(monkeypatch):
    """A persistent tanh-capped kernel (barriers, TMA, the tile counter) on segments that touch, straddle a block
    and hold padding rows; the same compiled function run on each path, outputs poisoned alike."""
    problem = Problem(batch=3, seq_len=256, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=30.0)
    config = KernelConfig.for_problem(problem, block_q=64, block_kv=64, num_stages=2, p_in_registers=False,
                                      persistent=True, static_max=True)
    bounds = jnp.asarray([[0, 100, 100, 130], [0, 0, 0, 256], [5, 70, 200, 201]], jnp.int32)
    q, k, v = (jnp.asarray(x, problem.dtype) for x in make_tensors(problem, 7))
    assert interpret_callbacks.install() is None
    assert callback.io_callback_impl is not interpret_callbacks.STOCK["io_callback_impl"]
    forward = build_forward(problem, config, interpret=True, poisoned=True)
    fast = [np.asarray(x.astype(jnp.float32)) for x in forward(q, k, v, bounds, *poisoned_outputs(q))]
    monkeypatch.setattr(callback, "io_callback_impl", interpret_callbacks.STOCK["io_callback_impl"])
    monkeypatch.setattr(shared_memory, "_to_int", interpret_callbacks.STOCK["to_int"])
    stock = [np.asarray(x.astype(jnp.float32)) for x in forward(q, k, v, bounds, *poisoned_outputs(q))]
    assert np.isfinite(stock[0]).any() and not np.isnan(stock[0][2, 70:]).all()  # it did run
    for a, b in zip(fast, stock, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_users_own_io_callback_still_gets_device_arrays():
    assert interpret_callbacks.install() is None
    seen = []

    def record(x):
        seen.append(type(x))
        return np.asarray(x) + 1

    f = jax.jit(lambda x: callback.io_callback(record, jax.ShapeDtypeStruct((2,), jnp.float32), x))
    np.testing.assert_array_equal(f(jnp.zeros(2, jnp.float32)), [1, 1])
    assert seen and all(issubclass(t, jax.Array) for t in seen), seen


def test_another_jax_version_runs_jax_as_shipped(monkeypatch):
    monkeypatch.setattr(jax, "__version__", "0.12.0")
    before = callback.io_callback_impl, shared_memory._to_int
    assert interpret_callbacks.install.__wrapped__() == "JAX 0.12.0 (checked on 0.11.2)"
    assert (callback.io_callback_impl, shared_memory._to_int) == before
