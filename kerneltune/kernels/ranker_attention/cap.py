"""Logit capping: one definition shared by the kernel and both references."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any


def _parse[E: enum.StrEnum](cls: type[E], value: E | str, field: str) -> E:
    """``value`` as a member of ``cls``, or a ValueError naming the field and the members."""
    try:
        return cls(value)
    except ValueError:
        raise ValueError(f"{field}: {value!r} is not one of {', '.join(m.value for m in cls)}") from None


class CapMethod(enum.StrEnum):
    """How scaled logits are bounded before the softmax.

    ``TANH_APPROX`` is the same function as ``TANH`` under a looser error budget
    (``accuracy.budget_for``: the LSE is not held to the no-cap kernel's level), so the
    tuner may give it the ``tanh.approx.f32`` instruction where it would not give it to
    ``TANH`` with the LSE returned; it is verified with the looser tolerance in
    :data:`CAP_TOLERANCE`.
    """

    NONE = "none"
    TANH = "tanh"
    TANH_APPROX = "tanh_approx"
    SOFTSIGN = "softsign"
    CLAMP = "clamp"

    @classmethod
    def parse(cls, value: CapMethod | str) -> CapMethod:
        return _parse(cls, value, "cap_method")

    @property
    def needs_cap(self) -> bool:
        return self is not CapMethod.NONE

    @property
    def is_tanh(self) -> bool:
        """The function is ``c * tanh(x / c)``, whatever budget the name carries."""
        return self in (CapMethod.TANH, CapMethod.TANH_APPROX)


class CapImpl(enum.StrEnum):
    """How the kernel evaluates the cap: a tile field the tuner picks under the call's error budget.

    ``EXACT``: to a few float32 ulps (tanh as ex2 + rsqrt under fast math, libdevice's otherwise).
    ``TANH_INSTR``: the ``tanh.approx.f32`` instruction, one special-function op instead of two, with
    a relative error of about 2**-11 (on the H200: 0.75-0.82x the exact kernel's time, the same ``out``
    error to three digits, 10-18x its LSE error). Packed f16x2/bf16x2 tanh, exp2 as an FMA-pipe polynomial
    and a Newton reciprocal were A/B'd beside it and lost on both speed and accuracy
    (results/ranker_attention/2026-12-02-h200-run-p/).
    """

    EXACT = "exact"
    TANH_INSTR = "tanh_instr"

    @classmethod
    def parse(cls, value: CapImpl | str) -> CapImpl:
        return _parse(cls, value, "cap_impl")


# Extra absolute error on the output allowed for a method, on top of the dtype's
# rounding. tanh.approx.f32 has a relative error of about 2**-11, so a logit of
# size c moves by up to c * 2**-11; softmax weights move by the same relative
# amount, which at c = 30 is 1.5% of a weight in the worst row.
CAP_TOLERANCE: dict[CapMethod, float] = {
    CapMethod.NONE: 0.0,
    CapMethod.TANH: 0.0,
    CapMethod.TANH_APPROX: 2e-2,
    CapMethod.SOFTSIGN: 0.0,
    CapMethod.CLAMP: 0.0,
}


@dataclass(frozen=True)
class CapParams:
    """The cap ``c`` of every capping method (unused by ``none``)."""

    cap: float | None = None

    def __post_init__(self) -> None:
        if self.cap is not None and not (math.isfinite(self.cap) and self.cap > 0):
            raise ValueError(f"cap: must be a finite number > 0, got {self.cap!r}")

    @classmethod
    def checked(cls, method: CapMethod, cap: float | None) -> CapParams:
        if method.needs_cap and cap is None:
            raise ValueError(f"cap: cap_method={method.value!r} needs a cap value")
        if not method.needs_cap and cap is not None:
            raise ValueError("cap: given, but cap_method='none' uses no cap")
        return cls(None if cap is None else float(cap))


def tanh_factors(params: CapParams, *, pre: float = 1.0, post: float = 1.0) -> tuple[float, float]:
    """``(inner, outer)`` with a tanh cap's ``post * cap(pre * x) == tanh(inner * x) * outer``: the kernel
    hands ``outer`` to the exp2 that follows instead of multiplying by it first."""
    c = _cap(params)
    return pre / c, c * post


def cap_forward(
    x: Any,
    method: CapMethod,
    params: CapParams,
    *,
    pre: float = 1.0,
    post: float = 1.0,
    xp: ModuleType | None = None,
    tanh_from_exp2: bool = False,
) -> Any:
    """``post * cap(pre * x)`` with the constants folded into as few ops as the algebra allows.

    The kernel calls it with ``pre = sm_scale`` and ``post = log2(e)`` so the
    scale, the cap and the exp2 base change cost one multiply where possible;
    the references call it with ``post = 1``. ``xp`` is the array namespace
    (``numpy`` for the float64 oracle, ``jax.numpy`` otherwise).

    ``tanh_from_exp2`` evaluates ``tanh`` (for either name of it) as ``1 - 2 / (1 + e^(2z))``
    with the reciprocal taken as a squared reciprocal square root: under the
    kernel's approximate math that is two special-function ops (``ex2``,
    ``rsqrt``) and three FMA-pipe ops, with an error of a few float32 ulps of
    the cap — against libdevice's multi-instruction ``tanhf``. ``1 + e^(2z)``
    is at least 1, so the reciprocal never meets a denormal, and it overflows
    to ``inf`` only where ``tanh`` is -1 to float32 precision.
    """
    if xp is None:
        import jax.numpy as xp
    match method:
        case CapMethod.NONE:
            return x * (pre * post)
        case CapMethod.TANH | CapMethod.TANH_APPROX if tanh_from_exp2:
            c = _cap(params)
            r = _rsqrt(1.0 + xp.exp2(x * (2.0 * _LOG2E * pre / c)), xp)
            return (r * r) * (-2.0 * c * post) + c * post
        case CapMethod.TANH | CapMethod.TANH_APPROX:
            inner, outer = tanh_factors(params, pre=pre, post=post)
            return xp.tanh(x * inner) * outer
        case CapMethod.SOFTSIGN:
            c = _cap(params)
            return (x * (pre * post)) / (1.0 + xp.abs(x) * (pre / c))
        case CapMethod.CLAMP:
            c = _cap(params)
            y = x * (pre * post)
            return xp.minimum(xp.maximum(y, -c * post), c * post)
    raise ValueError(f"cap_method: unknown {method!r}")


_LOG2E = math.log2(math.e)


def cap_bound(method: CapMethod, params: CapParams) -> float | None:
    """The largest ``|cap(x)|`` over all x (the cap itself for every bounding method), or None
    where logits are unbounded."""
    return None if method is CapMethod.NONE else _cap(params)


def _rsqrt(x: Any, xp: ModuleType) -> Any:
    if xp.__name__ == "numpy":
        return 1.0 / xp.sqrt(x)
    from jax import lax

    return lax.rsqrt(x)


def _cap(params: CapParams) -> float:
    if params.cap is None:
        raise ValueError("cap: this cap method needs a cap value")
    return params.cap
