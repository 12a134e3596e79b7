"""``2**x`` for part of the softmax without the special-function unit.

One SFU instruction holds a sub-partition's 4-lane special-function unit for 8 cycles, and a
compute warpgroup's softmax at D=64 with a tanh cap spends two of them per logit (the tanh, the
exp2): its chain is that unit's, not the issue slots' (run D's profile: issue two-thirds idle). Taking
the exp2 of some of a block's keys to the FMA pipe (~9 issue cycles per warp instead of 8 SFU
cycles) lets the two pipes share the chain; taking all of them made it longer (run D, attempt 2).
The exponent's integer part goes straight into the float's exponent bits and the fraction through a
cubic (FlashAttention-4's ``ex2_emulation``, rounded to nearest so that no rounding mode is needed).
"""

from __future__ import annotations

from typing import Any

# 1.5 * 2**23: adding it rounds x (|x| < 2**22) to the nearest integer n, left in the low mantissa
# bits of the sum as 2**22 + n; shifted left by 23 only n << 23 survives (mod 2**32).
_ROUND = 12582912.0
# Least-relative-error cubic for 2**f on [-1/2, 1/2], float32 coefficients: relative error below
# 7.5e-5 (2**-13.7), far under the 2**-9 of the bfloat16 P it feeds.
_COEFFS = (0.9999281167984009, 0.6932609677314758, 0.242610901594162, 0.055171482264995575)
# 2**x underflows below this; clamping keeps the exponent arithmetic in range (a masked logit, -inf,
# becomes ~2**-126: nothing next to a row's weight of at least 2**-64 under static_max, or 1).
_FLOOR = -126.0


def exp2_fma(x: Any, *, reassociating_compiler: bool = False) -> Any:
    """``2**x`` for float32 ``x <= 127`` (``-inf`` allowed), on the FMA and integer pipes.

    ``reassociating_compiler``: XLA on the CPU (interpret mode) folds ``(x + R) - R`` to ``x``; an
    optimization barrier stops it. Mosaic GPU's LLVM keeps IEEE order, and a barrier there is a
    volatile asm that would pin the schedule, so the kernel on the GPU goes without.
    """
    import jax.numpy as jnp
    from jax import lax

    x = jnp.maximum(x, _FLOOR)
    t = x + _ROUND
    if reassociating_compiler:
        t = lax.optimization_barrier(t)
    f = x - (t - _ROUND)
    c0, c1, c2, c3 = _COEFFS
    frac = ((f * c3 + c2) * f + c1) * f + c0
    bits = lax.bitcast_convert_type(frac, jnp.int32) + lax.shift_left(lax.bitcast_convert_type(t, jnp.int32), 23)
    return lax.bitcast_convert_type(bits, jnp.float32)
