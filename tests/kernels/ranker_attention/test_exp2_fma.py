"""The FMA-pipe exp2 against float64, over the range the softmax feeds it."""

import jax
import numpy as np

import pytest

from kerneltune.kernels.ranker_attention.exp2_fma import exp2_fma


def run(x, degree=3):
    fn = jax.jit(lambda v: exp2_fma(v, degree=degree, reassociating_compiler=True))
    return np.asarray(fn(np.asarray(x, np.float32)))


@pytest.mark.parametrize(("degree", "bound", "floor"), [(3, 7.5e-5, 6e-5), (2, 1.73e-3, 1.6e-3)])
def test_relative_error_stays_under_the_polynomials_bound(degree, bound, floor):
    """Each degree's stated bound holds over the softmax's range and is nearly reached: a wrong coefficient or a
    degree that fell back to the other polynomial moves the worst error out of the band."""
    # The softmax feeds logits minus the running max (<= 0) or, under static_max, logits in [-64, 64];
    # fractions of every sign and the half-integers where the rounding flips.
    x = np.concatenate([np.linspace(-120.0, 64.0, 100_003), np.arange(-8.0, 8.5, 0.5)]).astype(np.float32)
    y = run(x, degree)
    rel = np.abs(y - np.exp2(x.astype(np.float64))) / np.exp2(x.astype(np.float64))
    assert floor < rel.max() < bound


def test_masked_and_underflowing_logits_weigh_nothing():
    y = run([-np.inf, -200.0, -126.0])
    assert np.all(np.isfinite(y)) and np.all(y >= 0) and y.max() < 2.0**-125


def test_the_mixed_split_in_interpret_mode_takes_the_polynomial_where_it_says():
    import jax.numpy as jnp

    from kerneltune.kernels.ranker_attention.exp2_fma import exp2_mixed

    x = np.full((4, 32), 0.3, np.float32)
    y = np.asarray(jax.jit(lambda v: exp2_mixed(v, 2, interpret=True))(jnp.asarray(x)))
    on_fma = (np.arange(32) // 2) % 8 < 2
    exact = np.float32(2.0**0.3)
    assert np.all(y[:, ~on_fma] == np.asarray(jnp.exp2(jnp.float32(0.3))))
    assert np.all(y[:, on_fma] != exact) and np.allclose(y[:, on_fma], exact, rtol=7.6e-5)
