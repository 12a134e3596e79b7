import math

import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.cap import CapMethod, CapParams, cap_forward

X = np.linspace(-200, 200, 2001)


@pytest.mark.parametrize(("method", "expected"), [
    (CapMethod.NONE, lambda x, c: x),
    (CapMethod.TANH, lambda x, c: c * np.tanh(x / c)),
    (CapMethod.TANH_APPROX, lambda x, c: c * np.tanh(x / c)),
    (CapMethod.SOFTSIGN, lambda x, c: x / (1 + np.abs(x) / c)),
    (CapMethod.CLAMP, lambda x, c: np.clip(x, -c, c)),
])
def test_folded_constants_match_the_definition(method, expected):
    c, pre, post = 30.0, 0.125, math.log2(math.e)
    params = CapParams(None if method is CapMethod.NONE else c)
    got = cap_forward(X, method, params, pre=pre, post=post, xp=np)
    np.testing.assert_allclose(got, post * expected(pre * X, c), rtol=1e-12, atol=1e-12)


def test_caps_bound_the_logits():
    for method in (CapMethod.TANH, CapMethod.SOFTSIGN, CapMethod.CLAMP):
        assert np.max(np.abs(cap_forward(X, method, CapParams(5.0), xp=np))) <= 5.0 + 1e-12


def test_parse_and_validation():
    assert CapMethod.parse("softsign") is CapMethod.SOFTSIGN
    with pytest.raises(ValueError, match="cap_method"):
        CapMethod.parse("sigmoid")
    with pytest.raises(ValueError, match="cap"):
        CapParams(-1.0)
    with pytest.raises(ValueError, match="needs a cap"):
        CapParams.checked(CapMethod.TANH, None)
    with pytest.raises(ValueError, match="uses no cap"):
        CapParams.checked(CapMethod.NONE, 3.0)


def test_tanh_from_exp2_is_the_exact_tanh():
    c, pre, post = 30.0, 0.125, math.log2(math.e)
    params = CapParams(c)
    want = post * c * np.tanh(pre * X / c)
    got = cap_forward(X, CapMethod.TANH, params, pre=pre, post=post, xp=np, tanh_from_exp2=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_tanh_from_exp2_in_float32_saturates_without_nan():
    import jax.numpy as jnp

    c, post = 30.0, math.log2(math.e)
    x = np.concatenate([np.random.default_rng(0).normal(0, 60, 10_000), [-1e30, -1e4, 0.0, 1e4, 1e30]])
    got = cap_forward(jnp.asarray(x, jnp.float32), CapMethod.TANH, CapParams(c), post=post, tanh_from_exp2=True)
    want = post * c * np.tanh(np.float32(x).astype(np.float64) / c)
    # A few float32 ulps of the cap: far inside bf16's rounding of the output.
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=16 * np.finfo(np.float32).eps * c * post)


@pytest.mark.parametrize("c", [0.5, 5.0, 30.0])
@pytest.mark.parametrize(("method", "plain"), [
    (CapMethod.TANH, lambda x, c: [c * math.tanh(v / c) for v in x]),
    (CapMethod.SOFTSIGN, lambda x, c: [v / (1 + abs(v) / c) for v in x]),
    (CapMethod.CLAMP, lambda x, c: [min(max(v, -c), c) for v in x]),
])
def test_every_cap_against_a_plain_oracle_through_its_saturating_region(method, plain, c):
    """Written again with math, value by value: |x| from 0 to 20 c, where each cap bends and saturates."""
    x = np.concatenate([np.linspace(-20 * c, 20 * c, 801), [c, -c, 0.999 * c, 1.001 * c]])
    got = cap_forward(x, method, CapParams(c), pre=1.0, post=1.0, xp=np)
    np.testing.assert_allclose(got, plain(x.tolist(), c), rtol=1e-12, atol=1e-12 * c)


def test_checked_params_carry_the_cap_as_a_float():
    params = CapParams.checked(CapMethod.TANH, 30)
    assert params.cap == 30.0 and isinstance(params.cap, float)
    assert CapParams.checked(CapMethod.NONE, None).cap is None
    with pytest.raises(ValueError, match=r"^cap: given, but cap_method='none' uses no cap$"):
        CapParams.checked(CapMethod.NONE, 3.0)


def test_every_refusal_says_exactly_what_is_wrong():
    with pytest.raises(ValueError, match=r"^cap_method: 'sigmoid' is not one of none, tanh, tanh_approx, softsign, "
                                         r"clamp$"):
        CapMethod.parse("sigmoid")
    with pytest.raises(ValueError, match=r"^cap: must be a finite number > 0, got 0\.0$"):
        CapParams(0.0)
    with pytest.raises(ValueError, match=r"^cap: this cap method needs a cap value$"):
        cap_forward(np.ones(2), CapMethod.TANH, CapParams(None), xp=np)
    with pytest.raises(ValueError, match=r"^cap_method: unknown 'sigmoid'$"):
        cap_forward(np.ones(2), "sigmoid", CapParams(3.0), xp=np)


def test_the_exact_tanh_is_the_librarys_unless_asked_for_the_exp2_form():
    x = np.linspace(-200.0, 200.0, 4001)
    params = CapParams(30.0)
    library = np.tanh(x * (1.0 / 30.0)) * 30.0  # the scale folded into one multiply, as cap_forward does
    assert np.array_equal(cap_forward(x, CapMethod.TANH, params, xp=np), library)
    exp2_form = cap_forward(x, CapMethod.TANH, params, xp=np, tanh_from_exp2=True)
    assert not np.array_equal(exp2_form, library) and np.max(np.abs(exp2_form - library)) < 1e-12
