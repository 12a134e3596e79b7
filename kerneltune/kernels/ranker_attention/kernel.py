"""Warp-specialised Mosaic GPU forward kernel for ranker attention (Hopper).

Three warpgroups per CTA: two compute warpgroups (wgmma, online softmax, cap),
each owning ``block_q`` query rows of a ``2 * block_q`` tile, and one memory
warpgroup feeding a ``num_stages`` ring of K/V blocks through TMA.

The KV stream of a tile has two phases over disjoint masks, so no (query,
key) pair is counted twice even when both phases visit the same block:

* history: every KV block overlapping ``[history_lower, history_upper)``,
  keeping keys inside the history (every row attends them); blocks wholly
  inside need no mask at all;
* candidates: the KV blocks holding the tile's own candidate rows, keeping
  only the diagonal ``key == query`` inside the candidates.

Rows in neither segment are zeroed (lse = -inf) in the epilogue, which lets
the history loop ignore row validity. KV blocks outside these ranges are
never loaded.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from .bounds import SegmentBounds
from .cap import cap_forward
from .config import KernelConfig, Problem

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
# Running max before any key is seen: finite, so a fully masked block gives
# alpha = exp2(0) = 1 and p = exp2(-inf) = 0 instead of NaN.
_M_INIT = -1e30

Forward = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _row_layout():
    return plgpu.Layout.WGMMA.reduce(1)


def _kernel_body(config: KernelConfig, problem: Problem, interpret: bool):
    block_q, block_kv = config.block_q, config.block_kv
    head_dim = problem.head_dim
    stages = config.num_stages
    group = problem.heads_per_kv_head
    p_in_registers = config.p_in_registers and not interpret

    def logits_to_log2(qk):
        return cap_forward(qk, config.cap_method, config.cap_params, pre=config.sm_scale, post=LOG2E,
                           tanh_from_exp2=config.fast_math)

    def kernel(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, scoped):
        smem, (k_ready, v_ready, q_ready), (k_consumed, v_consumed), schedule = scoped
        qo_smem2, k_smem, v_smem, lse_smem2, p_smem2 = smem
        wg = lax.axis_index("wg")
        batch = lax.axis_index("batch")
        q_head = lax.axis_index("heads")
        tile_base = lax.axis_index("q_seq") * (2 * block_q)
        tile_end = tile_base + 2 * block_q

        hl, hu, cl, cu = (bounds_ref[batch, i] for i in range(4))
        bounds = SegmentBounds(hl, hu, cl, cu)

        def overlaps(lo, hi):
            return (lo < hi) & (tile_base < hi) & (tile_end > lo)

        valid = overlaps(hl, hu) | overlaps(cl, cu)

        hist_first = lax.div(hl, block_kv)
        hist_steps = jnp.where(hl < hu, pl.cdiv(hu, block_kv) - hist_first, 0)
        own_lo = jnp.maximum(cl, tile_base)
        own_hi = jnp.minimum(cu, tile_end)
        cand_first = lax.div(own_lo, block_kv)
        cand_steps = jnp.where(own_lo < own_hi, pl.cdiv(own_hi, block_kv) - cand_first, 0)
        total_steps = hist_steps + cand_steps

        def kv_block(step):
            return jnp.where(step < hist_steps, hist_first + step, cand_first + (step - hist_steps))

        def schedule_point():
            if config.schedule_barrier:
                plgpu.barrier_arrive(schedule)
                plgpu.barrier_wait(schedule)

        @pl.when((wg < 2) & ~valid)
        def _zero_tile():
            qo_smem = qo_smem2.at[wg]
            q_base = tile_base + wg * block_q
            zeros = jnp.zeros((block_q, head_dim), jnp.float32)
            qo_smem[...] = plgpu.layout_cast(zeros, plgpu.Layout.WGMMA).astype(q_ref.dtype)
            no_keys = jnp.full((block_q,), -jnp.inf, jnp.float32)
            lse_smem2.at[wg][...] = plgpu.layout_cast(no_keys, _row_layout())
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(qo_smem, out_ref.at[batch, pl.ds(q_base, block_q), q_head])
            plgpu.copy_smem_to_gmem(lse_smem2.at[wg], lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])
            plgpu.wait_smem_to_gmem(0)

        @pl.when((wg < 2) & valid)
        def _compute():
            plgpu.set_max_registers(232, action="increase")
            qo_smem = qo_smem2.at[wg]
            q_base = tile_base + wg * block_q
            plgpu.copy_gmem_to_smem(
                q_ref.at[batch, pl.ds(q_base, block_q), q_head], qo_smem, q_ready.at[wg]
            )
            plgpu.barrier_wait(q_ready.at[wg])

            m_i = plgpu.layout_cast(jnp.full((block_q,), _M_INIT, jnp.float32), _row_layout())
            l_i = plgpu.layout_cast(jnp.zeros((block_q,), jnp.float32), _row_layout())
            acc = plgpu.layout_cast(jnp.zeros((block_q, head_dim), jnp.float32), plgpu.Layout.WGMMA)

            @pl.when(total_steps > 0)
            def _():
                plgpu.barrier_wait(k_ready.at[0])

            pl.when(wg == 1)(schedule_point)

            def ids(step):
                shape = (block_q, block_kv)
                rows = plgpu.broadcasted_iota(jnp.int32, shape, 0, layout=plgpu.Layout.WGMMA)
                cols = plgpu.broadcasted_iota(jnp.int32, shape, 1, layout=plgpu.Layout.WGMMA)
                return rows + q_base, cols + kv_block(step) * block_kv

            def history_mask(step):
                _, kv_ids = ids(step)
                return bounds.query_in_history(kv_ids)

            def diagonal_mask(step):
                q_ids, kv_ids = ids(step)
                return (q_ids == kv_ids) & bounds.query_in_candidates(kv_ids)

            def kv_step(step, carry, mask_fn):
                acc, m_i, l_i = carry
                slot = lax.rem(step, stages)

                def compute_qk(acc_ref):
                    plgpu.wgmma(acc_ref, qo_smem, k_smem.at[slot].transpose((1, 0)))
                    schedule_point()
                    return acc_ref[...]

                qk = pl.run_scoped(compute_qk, plgpu.ACC((block_q, block_kv), jnp.float32))
                plgpu.barrier_arrive(k_consumed.at[slot])

                s = logits_to_log2(qk)
                if mask_fn is not None:
                    s = jnp.where(mask_fn(step), s, -jnp.inf)
                m_new = jnp.maximum(m_i, s.max(axis=1))
                alpha = jnp.exp2(m_i - m_new)
                p = jnp.exp2(s - lax.broadcast_in_dim(m_new, s.shape, [0]))
                acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
                l_i = l_i * alpha + p.sum(axis=1)
                p16 = p.astype(q_ref.dtype)
                if p_in_registers:
                    acc, l_i, m_new, p16 = lax.optimization_barrier((acc, l_i, m_new, p16))
                if config.schedule_barrier:
                    plgpu.barrier_arrive(schedule)
                plgpu.barrier_wait(v_ready.at[slot])
                if config.schedule_barrier:
                    plgpu.barrier_wait(schedule)

                def wait_next_k():
                    nxt = step + 1

                    @pl.when(nxt < total_steps)
                    def _():
                        plgpu.barrier_wait(k_ready.at[lax.rem(nxt, stages)])

                if p_in_registers:
                    def compute_pv(acc_ref):
                        plgpu.wgmma(acc_ref, p16, v_smem.at[slot])
                        wait_next_k()

                    acc = pl.run_state(compute_pv)(plgpu.ACC.init(acc))
                else:
                    p_smem = p_smem2.at[wg]
                    p_smem[...] = p16
                    plgpu.commit_smem()
                    if interpret:
                        # Interpret mode has no run_state over accumulators: fresh one, then add.
                        def compute_pv_fresh(acc_ref):
                            plgpu.wgmma(acc_ref, p_smem, v_smem.at[slot])
                            wait_next_k()
                            return acc_ref[...]

                        acc = acc + pl.run_scoped(
                            compute_pv_fresh, plgpu.ACC((block_q, head_dim), jnp.float32)
                        )
                    else:
                        def compute_pv(acc_ref):
                            plgpu.wgmma(acc_ref, p_smem, v_smem.at[slot])
                            wait_next_k()

                        acc = pl.run_state(compute_pv)(plgpu.ACC.init(acc))
                plgpu.barrier_arrive(v_consumed.at[slot])
                return acc, m_new, l_i

            carry = (acc, m_i, l_i)
            if config.mask_interior:
                carry = lax.fori_loop(
                    0, hist_steps, functools.partial(kv_step, mask_fn=history_mask), carry
                )
            else:
                lead = jnp.minimum(hist_steps, jnp.where(lax.rem(hl, block_kv) != 0, 1, 0))
                tail = jnp.minimum(hist_steps - lead, jnp.where(lax.rem(hu, block_kv) != 0, 1, 0))
                masked = functools.partial(kv_step, mask_fn=history_mask)
                carry = lax.fori_loop(0, lead, masked, carry)
                carry = lax.fori_loop(
                    lead, hist_steps - tail, functools.partial(kv_step, mask_fn=None), carry
                )
                carry = lax.fori_loop(hist_steps - tail, hist_steps, masked, carry)
            carry = lax.fori_loop(
                hist_steps, total_steps, functools.partial(kv_step, mask_fn=diagonal_mask), carry
            )
            acc, m_i, l_i = carry
            pl.when(wg == 0)(schedule_point)

            rows = plgpu.broadcasted_iota(jnp.int32, (block_q,), 0, layout=_row_layout()) + q_base
            row_valid = bounds.query_in_history(rows) | bounds.query_in_candidates(rows)
            inv_l = jnp.where(row_valid, 1.0 / l_i, 0.0)
            acc = acc * lax.broadcast_in_dim(inv_l, acc.shape, [0])
            qo_smem[...] = acc.astype(q_ref.dtype)
            lse_smem = lse_smem2.at[wg]
            lse_smem[...] = jnp.where(row_valid, (m_i + jnp.log2(l_i)) * LN2, -jnp.inf)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(qo_smem, out_ref.at[batch, pl.ds(q_base, block_q), q_head])
            plgpu.copy_smem_to_gmem(lse_smem, lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])
            plgpu.wait_smem_to_gmem(0)

        @pl.when((wg == 2) & valid)
        def _memory():
            plgpu.set_max_registers(40, action="decrease")
            kv_head = lax.div(q_head, group)

            def load(step, slot):
                rows = (batch, pl.ds(kv_block(step) * block_kv, block_kv), kv_head)
                plgpu.copy_gmem_to_smem(k_ref.at[rows], k_smem.at[slot], k_ready.at[slot])
                plgpu.copy_gmem_to_smem(v_ref.at[rows], v_smem.at[slot], v_ready.at[slot])

            for i in range(stages):
                pl.when(i < total_steps)(functools.partial(load, i, i))

            refill_end = jnp.maximum(total_steps - stages, 0)

            @pl.loop(0, refill_end)
            def _refill(step):
                slot = lax.rem(step, stages)
                plgpu.barrier_wait(k_consumed.at[slot])
                plgpu.barrier_wait(v_consumed.at[slot])
                load(step + stages, slot)

            # Observe the last consumed phases too, so every barrier phase is awaited once.
            @pl.loop(refill_end, total_steps)
            def _drain(step):
                slot = lax.rem(step, stages)
                plgpu.barrier_wait(k_consumed.at[slot])
                plgpu.barrier_wait(v_consumed.at[slot])

    return kernel


def build_forward(problem: Problem, config: KernelConfig, *, interpret: bool = False,
                  poisoned: bool = False) -> Forward:
    """Jitted ``(q, k, v, bounds) -> (out, lse)`` for one problem shape.

    With ``poisoned`` the function takes two more arguments, the initial
    contents of ``out`` and ``lse``, and the kernel writes into those buffers
    in place (through refs): a verifier fills them with NaN so that an element
    the kernel never writes cannot pass.
    """
    block_q, block_kv, stages = config.block_q, config.block_kv, config.num_stages
    dtype = jnp.dtype(problem.dtype)
    body = _kernel_body(config, problem, interpret)
    p_staged = not (config.p_in_registers and not interpret)

    def entry(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref):
        tiled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
        smem = [
            plgpu.SMEM((2, block_q, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((stages, block_kv, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((stages, block_kv, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((2, block_q), jnp.float32),
            plgpu.SMEM((2, block_q, block_kv), dtype, transforms=tiled) if p_staged else None,
        ]
        pl.run_scoped(
            lambda *scoped: body(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, scoped),
            smem,
            (
                plgpu.Barrier(num_barriers=stages),
                plgpu.Barrier(num_barriers=stages),
                plgpu.Barrier(num_barriers=2),
            ),
            (plgpu.Barrier(num_arrivals=2, num_barriers=stages),) * 2,
            plgpu.Barrier(num_arrivals=2),
            collective_axes="wg",
        )

    b, t, hq = problem.batch, problem.seq_len, problem.q_heads
    out_types = (
        jax.ShapeDtypeStruct((b, t, hq, problem.head_dim), dtype),
        jax.ShapeDtypeStruct((b, hq, t), jnp.float32),
    )
    call = plgpu.kernel(
        entry,
        out_type=() if poisoned else out_types,
        grid=(hq, t // (2 * block_q), b),
        grid_names=("heads", "q_seq", "batch"),
        num_threads=3,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=config.fast_math),
        interpret=plgpu.InterpretGPUParams() if interpret else None,
    )
    if not poisoned:
        return jax.jit(call)

    def into_buffers(q, k, v, bounds, out_init, lse_init):
        out_ref, lse_ref = jax.new_ref(out_init), jax.new_ref(lse_init)
        call(q, k, v, bounds, out_ref, lse_ref)
        return out_ref[...], lse_ref[...]

    return jax.jit(into_buffers)
