"""The online softmax's rescale of O, skipped for the rows whose running max barely moved.

With a running max each KV step multiplies a compute thread's accumulator (``block_q * head_dim / 128``
floats) by its rows' ``exp2(m_old - m_new)``: at D=64 a tenth of the softmax's issue, at D=128 a fifth.
FlashAttention-4 keeps the stale max while the new one is at most ``LAZY_RESCALE_LOG2`` above it, so that
``p = exp2(s - m)`` stays below ``2**LAZY_RESCALE_LOG2`` (exact in float32, and P's bfloat16 rounding is
relative), and rescales only when a row's max jumps by more. Past the first blocks of a row that is rare, and
the multiply is skipped by a branch on each row's factor. The branches are not free: they took 1.13x the time at
D=64 (one a warp on a vote, 1.09x) against 0.98x at D=128 (results/ranker_attention/2026-12-04-h200-run-ai/),
so the tuner decides per bucket.
"""

from __future__ import annotations

from typing import Any

# A row keeps its max until a block's max exceeds it by more than this (log2 units): p stays below 2**8.
LAZY_RESCALE_LOG2 = 8.0


def lazy_max(m_old: Any, m_seen: Any) -> tuple[Any, Any]:
    """(the running max the step uses, the factor on O and l): ``m_seen`` (>= ``m_old``) and
    ``exp2(m_old - m_seen)`` where it is more than ``LAZY_RESCALE_LOG2`` above ``m_old``, else ``m_old`` and
    exactly 1.0. A row that has seen no key yet (``m_old`` the kernel's finite -1e30) takes its first finite
    max; one that still sees none keeps -1e30."""
    import jax.numpy as jnp

    grow = m_seen > m_old + LAZY_RESCALE_LOG2
    m_new = jnp.where(grow, m_seen, m_old)
    return m_new, jnp.where(grow, jnp.exp2(m_old - m_new), 1.0)


def rescale_rows(acc: Any, alpha: Any, *, interpret: bool) -> Any:
    """``acc * alpha[:, None]`` for a float32 (rows, cols) array in the WGMMA layout, the multiply of a row
    skipped where its ``alpha`` is 1.0 (a branch per row a thread holds). Interpret mode runs no inline Mosaic
    GPU code: there, and for the result, it is the plain product. The registers are reached through Mosaic
    GPU's ``FragmentedArray`` internals (``registers``, ``layout.tiling``, the ``_registers`` constructor;
    jax 0.11.2), as ``broadcast_in_dim`` pairs a row's register with its row's."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.experimental.mosaic import gpu as mgpu
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import arith, scf, vector

    if interpret:
        return acc * lax.broadcast_in_dim(alpha, acc.shape, [0])

    @plgpu.inline_mgpu(arg_types=(plgpu.Layout.WGMMA, plgpu.Layout.WGMMA.reduce(1)),
                       return_type=plgpu.ShapeDtypeStruct(acc.shape, jnp.float32, layout=plgpu.Layout.WGMMA))
    def skip_unmoved(ctx: Any, arr: Any, factors: Any) -> Any:
        del ctx
        regs_shape = arr.registers.shape
        col_dims = arr.layout.tiling.tile_dimension(1)
        row_regs = factors.registers.reshape([1 if is_col else n for n, is_col in zip(regs_shape, col_dims,
                                                                                        strict=True)])
        by_row: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for idx in np.ndindex(regs_shape):
            by_row.setdefault(tuple(0 if is_col else k for k, is_col in zip(idx, col_dims, strict=True)),
                              []).append(idx)
        f32 = ir.F32Type.get()
        one = arith.constant(f32, ir.FloatAttr.get(f32, 1.0))
        regs = np.empty_like(arr.registers)
        for row, idxs in by_row.items():
            factor = vector.extract(row_regs[row], dynamic_position=[], static_position=[0])
            moved = arith.cmpf(arith.CmpFPredicate.UNE, factor, one)
            branch = scf.IfOp(moved, [arr.registers[i].type for i in idxs], has_else=True)
            with ir.InsertionPoint(branch.then_block):
                scf.yield_([arith.mulf(arr.registers[i], vector.broadcast(arr.registers[i].type, factor))
                            for i in idxs])
            with ir.InsertionPoint(branch.else_block):
                scf.yield_([arr.registers[i] for i in idxs])
            for i, result in zip(idxs, branch.results, strict=True):
                regs[i] = result
        return mgpu.FragmentedArray(_registers=regs, _layout=arr.layout, _is_signed=None)

    return skip_unmoved(acc, alpha)
