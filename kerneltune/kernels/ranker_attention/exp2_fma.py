"""``2**x`` for part of the softmax without the special-function unit.

One SFU instruction holds a sub-partition's 4-lane special-function unit for 8 cycles, and a
compute warpgroup's softmax at D=64 with a tanh cap spends two of them per logit (the tanh, the
exp2): its chain is that unit's, not the issue slots' (profiled: issue two-thirds idle). Taking
the exp2 of some of a block's keys to the FMA pipe (~9 issue cycles per warp instead of 8 SFU
cycles) lets the two pipes share the chain; taking all of them made it longer (both in
1371b475c129:results/ranker_attention/2026-11-30-h200x2-run-d/).
The exponent's integer part goes straight into the float's exponent bits and the fraction through a
cubic (FlashAttention-4's ``ex2_emulation``, rounded to nearest so that no rounding mode is needed).
"""

from __future__ import annotations

import functools
from typing import Any

# 1.5 * 2**23: adding it rounds x (|x| < 2**22) to the nearest integer n, left in the low mantissa
# bits of the sum as 2**22 + n; shifted left by 23 only n << 23 survives (mod 2**32).
_ROUND = 12582912.0
# Least-relative-error cubic for 2**f on [-1/2, 1/2], float32 coefficients: relative error below
# 7.5e-5 (2**-13.7), far under the 2**-9 of the bfloat16 P it feeds.
_COEFFS = (0.9999281167984009, 0.6932609677314758, 0.242610901594162, 0.055171482264995575)
# 2**x underflows below this; clamping keeps the exponent arithmetic in range (a masked logit, -inf,
# becomes ~2**-126: nothing next to a row's weight of at least 2**-64 under static_max, or 1).
EXP2_FLOOR = -126.0


def exp2_fma(x: Any, *, reassociating_compiler: bool = False) -> Any:
    """``2**x`` for float32 ``x <= 127`` (``-inf`` allowed), on the FMA and integer pipes.

    ``reassociating_compiler``: XLA on the CPU (interpret mode) folds ``(x + R) - R`` to ``x``; an
    optimization barrier stops it. Mosaic GPU's LLVM keeps IEEE order, and a barrier there is a
    volatile asm that would pin the schedule, so the kernel on the GPU goes without.
    """
    import jax.numpy as jnp
    from jax import lax

    x = jnp.maximum(x, EXP2_FLOOR)
    t = x + _ROUND
    if reassociating_compiler:
        t = lax.optimization_barrier(t)
    f = x - (t - _ROUND)
    frac = _cubic(f, lambda a, b, c: a * b + c, float)
    bits = lax.bitcast_convert_type(frac, jnp.int32) + lax.shift_left(lax.bitcast_convert_type(t, jnp.int32), 23)
    return lax.bitcast_convert_type(bits, jnp.float32)


def _cubic(f: Any, fma: Any, const: Any) -> Any:
    """The cubic for ``2**f`` by Horner's rule, in any arithmetic: ``fma(a, b, c)`` is ``a * b + c`` and
    ``const`` makes a coefficient (constants made in the order the rule meets them)."""
    c0, c1, c2, c3 = _COEFFS
    return fma(fma(fma(f, const(c3), const(c2)), f, const(c1)), f, const(c0))


def _poly_register(reg: Any, scale: float | None = None) -> Any:
    """``exp2_fma`` on one register (a vector of float32) in Mosaic GPU's MLIR; with ``scale``, of
    ``reg * scale``, the product taken inside the rounding and the fraction's FMAs (two FMAs for a multiply,
    an add, a subtract and the clamp: the caller guarantees ``reg * scale >= -126``)."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import arith, math

    vec = ir.VectorType(reg.type)
    i32 = ir.IntegerType.get_signless(32)
    ivec = ir.VectorType.get(vec.shape, i32)

    splat = functools.partial(_splat_like, reg)
    if scale is None:
        x = arith.maximumf(reg, splat(EXP2_FLOOR))
        t = arith.addf(x, splat(_ROUND))
        f = arith.subf(x, arith.subf(t, splat(_ROUND)))
    else:
        t = math.fma(reg, splat(scale), splat(_ROUND))
        f = math.fma(reg, splat(scale), arith.negf(arith.subf(t, splat(_ROUND))))
    frac = _cubic(f, math.fma, splat)
    shift = arith.constant(ivec, ir.DenseElementsAttr.get_splat(ivec, ir.IntegerAttr.get(i32, 23)))
    bits = arith.addi(arith.bitcast(ivec, frac), arith.shli(arith.bitcast(ivec, t), shift))
    return arith.bitcast(vec, bits)


def exp2_mixed(x: Any, eighths: int, *, interpret: bool, scale: float | None = None) -> Any:
    """``2**x`` (with ``scale``: ``2**(x * scale)``, for ``x * scale >= -126``) of a float32 (rows, keys)
    array in the WGMMA layout: of every eight registers a thread holds, the first ``eighths`` on the FMA
    pipe, the rest on the special-function unit (``ex2.approx``), so both pipes serve one softmax. The
    scale folds into the FMA pipe's rounding, so a caller that would multiply first hands it over
    instead. Interpret mode runs no inline Mosaic GPU code: there the same split goes by key columns.
    The registers are reached through Mosaic GPU's
    ``FragmentedArray`` internals (``registers``, ``_lift_fast_instr``, the ``_registers`` constructor;
    jax 0.11.2), which no public API exposes per register."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.experimental.mosaic import gpu as mgpu
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jaxlib.mlir.dialects import arith

    if eighths == 0 or interpret:
        y = x if scale is None else x * scale
        if eighths == 0:
            return jnp.exp2(y)
        cols = lax.broadcasted_iota(jnp.int32, x.shape, 1)
        return jnp.where(lax.rem(cols // 2, 8) < eighths, exp2_fma(y, reassociating_compiler=True), jnp.exp2(y))

    @plgpu.inline_mgpu(arg_types=(plgpu.Layout.WGMMA,),
                       return_type=plgpu.ShapeDtypeStruct(x.shape, jnp.float32, layout=plgpu.Layout.WGMMA))
    def mixed(ctx: Any, arr: Any) -> Any:
        del ctx
        ex2 = mgpu.FragmentedArray._lift_fast_instr("ex2.approx.ftz.f32")
        regs = np.empty_like(arr.registers)
        for n, (idx, reg) in enumerate(np.ndenumerate(arr.registers)):
            if n % 8 < eighths:
                regs[idx] = _poly_register(reg, scale)
            else:
                regs[idx] = ex2(reg if scale is None else arith.mulf(reg, _splat_like(reg, scale)))
        return mgpu.FragmentedArray(_registers=regs, _layout=arr.layout, _is_signed=None)

    return mixed(x)


def _splat_like(reg: Any, value: float) -> Any:
    """A float32 vector constant of ``reg``'s shape."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import arith

    vec = ir.VectorType(reg.type)
    return arith.constant(vec, ir.DenseElementsAttr.get_splat(vec, ir.FloatAttr.get(ir.F32Type.get(), value)))
