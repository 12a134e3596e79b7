"""The references agree with each other and with an oracle that shares nothing with them."""

import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.inputs import adversarial_bounds, kept_pairs
from kerneltune.kernels.ranker_attention.reference import ranker_mask, reference_f32, reference_f64

RNG = np.random.default_rng(0)


def _qkv(b, t, hq, hkv, d):
    return (RNG.standard_normal((b, t, hq, d)), RNG.standard_normal((b, t, hkv, d)),
            RNG.standard_normal((b, t, hkv, d)))


def test_mask_semantics_by_hand():
    m = ranker_mask(np.array([[1, 3, 3, 5]]), 6)[0]
    expected = np.zeros((6, 6), bool)
    expected[1:5, 1:3] = True  # every row of either segment sees the history keys 1, 2
    expected[3, 3] = expected[4, 4] = True  # candidates see themselves only
    np.testing.assert_array_equal(m, expected)
    assert kept_pairs(np.array([[1, 3, 3, 5]])) == int(expected.sum())


def test_f32_reference_matches_f64_oracle():
    q, k, v = _qkv(10, 128, 4, 2, 64)
    b = adversarial_bounds(128, RNG)
    o64, l64 = reference_f64(q, k, v, b, sm_scale=0.125, cap_method="tanh", cap=10.0)
    o32, l32 = reference_f32(q, k, v, b, sm_scale=0.125, cap_method="tanh", cap=10.0)
    np.testing.assert_allclose(np.asarray(o32), o64, atol=1e-5)
    fin = np.isfinite(l64)
    np.testing.assert_allclose(np.asarray(l32)[fin], l64[fin], atol=1e-5)
    assert np.all(np.isneginf(np.asarray(l32)[~fin]))


def test_padding_rows_are_zero_with_neg_inf_lse():
    q, k, v = _qkv(1, 128, 1, 1, 64)
    o, lse = reference_f64(q, k, v, np.array([[10, 20, 30, 40]]), sm_scale=0.1)
    assert np.all(o[0, :10] == 0) and np.all(o[0, 40:] == 0) and np.all(o[0, 20:30] == 0)
    assert np.all(np.isneginf(lse[0, 0, :10]))


@pytest.mark.parametrize("method", ["none", "tanh", "softsign", "clamp"])
def test_the_float64_reference_against_a_plain_oracle(method):
    """The reference judges the kernel; it is judged here by code that shares nothing with either, on
    segments touching, straddling, empty, inside one another's neighbourhood, and padding rows."""
    from .oracle import attention

    rng = np.random.default_rng(3)
    t, hq, hkv, d, c = 12, 4, 2, 4, 0.7  # two KV heads, each shared by two query heads (h // 2)
    bounds = np.array([[0, 5, 5, 9], [2, 7, 0, 2], [0, 0, 3, 6], [4, 4, 4, 4], [0, 12, 12, 12], [6, 9, 1, 3]])
    q, k, v = (rng.standard_normal((len(bounds), t, h, d)) * 2 for h in (hq, hkv, hkv))
    cap = None if method == "none" else c
    ro, rl = reference_f64(q, k, v, bounds, sm_scale=0.9, cap_method=method, cap=cap)
    oo, ol = attention(q, k, v, bounds, 0.9, method, cap)
    np.testing.assert_allclose(np.asarray(ro), oo, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(rl), ol, rtol=1e-10, atol=1e-12)


def test_the_references_compute_in_their_own_precision_whatever_they_are_given():
    q, k, v = _qkv(1, 128, 2, 1, 64)
    b = np.array([[0, 100, 100, 128]])
    o64, l64 = reference_f64(*(x.astype(np.float32) for x in (q, k, v)), b, sm_scale=0.125)
    assert o64.dtype == np.float64 and l64.dtype == np.float64
    import jax.numpy as jnp

    o32, l32 = reference_f32(*(jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)), b, sm_scale=0.125)
    assert o32.dtype == jnp.float32 and l32.dtype == jnp.float32


def test_each_row_is_normalised_by_its_own_max():
    """Rows whose logits differ by thousands: a max taken over the whole tensor would underflow the smaller
    rows' exponentials to zero and report them as rows without keys."""
    from .oracle import attention

    q, k, v = _qkv(2, 32, 2, 1, 64)
    q[0] *= 300.0  # batch row 0's logits reach about a thousand, row 1's stay near 1
    b = np.array([[0, 24, 24, 32], [0, 24, 24, 32]])
    o, lse = reference_f64(q, k, v, b, sm_scale=0.125)
    want_o, want_lse = attention(q, k, v, b, 0.125, "none", None)
    np.testing.assert_allclose(o, want_o, atol=1e-9)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
