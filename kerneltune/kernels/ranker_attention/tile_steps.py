"""The stages of one compute warpgroup's tile: its prologue, the history steps (masked edges, unmasked interior,
a half-width last block), the candidates' diagonal steps and the epilogue. ``kernel.py`` runs them in that order
inside the warp-specialised kernel; each stage traces the same ops it traced when it was written inline, so the
lowered programs are unchanged (``kerneltune rekey`` carried every shipped entry across the split).

``Warpgroup`` holds what every stage of a CTA reads (the config's constants, the SMEM refs and barriers), and
``Tile`` what one tile's stages share (its bounds, steps and rows).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from .bounds import SegmentBounds
from .cap import CapImpl, CapMethod, cap_forward, tanh_factors
from .config import KernelConfig, Problem
from .exp2_fma import EXP2_FLOOR, exp2_mixed
from .lazy_rescale import lazy_max, rescale_rows

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
# Running max before any key is seen: finite, so a fully masked block gives
# alpha = exp2(0) = 1 and p = exp2(-inf) = 0 instead of NaN.
M_INIT = -1e30

Carry = tuple[Any, Any, Any]  # acc, m_i, l_i


def row_layout() -> Any:
    return plgpu.Layout.WGMMA.reduce(1)


@dataclass(frozen=True)
class Softmax:
    """How a config turns a block's logits into probabilities: the cap, and where the scale goes."""

    config: KernelConfig
    interpret: bool
    fused_outer: bool  # the tanh instruction's cap under static max: its outer multiply goes into the exp2
    tanh_inner: float
    tanh_outer: float
    scale_in_exp2: bool  # no cap: the row max on the raw logits, the scale in the exp2's FMA
    log2_scale: float

    @staticmethod
    def of(config: KernelConfig, interpret: bool) -> Softmax:
        # The tanh instruction's cap, every logit within +-cap (static max) and a share of the exp2 on the FMA
        # pipe: the cap's outer multiply goes into the exp2 (``exp2_mixed``'s scale), where the FMA pipe's share
        # folds it into its rounding and needs no clamp; a masked logit becomes 2**-126 there, as the clamp made it.
        fused_outer = (config.static_max and config.exp2_fma_eighths > 0 and config.cap_impl == CapImpl.TANH_INSTR
                       and config.cap_method.is_tanh)
        inner, outer = tanh_factors(config.cap_params, pre=config.sm_scale, post=LOG2E) if fused_outer else (0.0, 0.0)
        # No cap: the row max on the raw logits (a positive scale keeps their order), the scale in the exp2's FMA.
        scale_in_exp2 = config.scale_in_exp2 and config.cap_method is CapMethod.NONE and not config.static_max
        return Softmax(config, interpret, fused_outer, inner, outer, scale_in_exp2, config.sm_scale * LOG2E)

    def logits_to_log2(self, qk: Any) -> Any:
        c = self.config
        return cap_forward(qk, c.cap_method, c.cap_params, pre=c.sm_scale, post=LOG2E,
                           tanh_from_exp2=c.fast_math and c.cap_impl == CapImpl.EXACT)


@dataclass(frozen=True)
class Warpgroup:
    """What every stage of one compute warpgroup reads: sizes, the softmax, SMEM refs and barriers."""

    softmax: Softmax
    problem: Problem
    p_in_registers: bool
    dtype: Any
    wg: Any
    k_smem: Any
    v_smem: Any
    p_smem2: Any
    k_ready: Any
    v_ready: Any
    k_consumed: Any
    v_consumed: Any
    schedule: Any

    @property
    def config(self) -> KernelConfig:
        return self.softmax.config

    def schedule_point(self) -> None:
        if self.config.schedule_barrier:
            plgpu.barrier_arrive(self.schedule)
            plgpu.barrier_wait(self.schedule)


@dataclass(frozen=True)
class Tile:
    """One warpgroup's rows of one tile: its bounds, KV steps, first row and SMEM buffers."""

    bounds: SegmentBounds
    hist_steps: Any
    total_steps: Any
    kv_block: Callable[[Any], Any]
    q_base: Any
    qo_smem: Any
    lse_smem: Any
    step_base: Any
    stages: int

    def ring(self, step: Any) -> Any:
        return lax.rem(self.step_base + step, self.stages)


def prologue(w: Warpgroup, t: Tile) -> Carry:
    """The running accumulators, then the first K block's wait and the ping-pong's first turn."""
    c = w.config
    block_q, head_dim = c.block_q, w.problem.head_dim
    m_i = plgpu.layout_cast(jnp.full((block_q,), 0.0 if c.static_max else M_INIT, jnp.float32), row_layout())
    l_i = plgpu.layout_cast(jnp.zeros((block_q,), jnp.float32), row_layout())
    acc = plgpu.layout_cast(jnp.zeros((block_q, head_dim), jnp.float32), plgpu.Layout.WGMMA)

    @pl.when(t.total_steps > 0)
    def _():
        plgpu.barrier_wait(w.k_ready.at[t.ring(0)])

    pl.when(w.wg == 1)(w.schedule_point)
    return acc, m_i, l_i


def _ids(w: Warpgroup, t: Tile, step: Any, width: int) -> tuple[Any, Any]:
    shape = (w.config.block_q, width)
    rows = plgpu.broadcasted_iota(jnp.int32, shape, 0, layout=plgpu.Layout.WGMMA)
    cols = plgpu.broadcasted_iota(jnp.int32, shape, 1, layout=plgpu.Layout.WGMMA)
    return rows + t.q_base, cols + t.kv_block(step) * w.config.block_kv


def history_mask(w: Warpgroup, t: Tile, step: Any, width: int) -> Any:
    _, kv_ids = _ids(w, t, step, width)
    return t.bounds.query_in_history(kv_ids)


def diagonal_mask(w: Warpgroup, t: Tile, step: Any, width: int) -> Any:
    q_ids, kv_ids = _ids(w, t, step, width)
    return (q_ids == kv_ids) & t.bounds.query_in_candidates(kv_ids)


def kv_step(w: Warpgroup, t: Tile, step: Any, carry: Carry, mask_fn: Callable[..., Any] | None,
            width: int | None = None) -> Carry:
    """One KV block; ``width < block_kv``: only its first ``width`` keys (the rest hold none this tile keeps)."""
    c, sm = w.config, w.softmax
    block_q, head_dim = c.block_q, w.problem.head_dim
    width = c.block_kv if width is None else width
    acc, m_i, l_i = carry
    slot = t.ring(step)
    keys = pl.ds(0, width)

    def compute_qk(acc_ref):
        plgpu.wgmma(acc_ref, t.qo_smem, w.k_smem.at[slot, keys].transpose((1, 0)))
        w.schedule_point()
        return acc_ref[...]

    qk = pl.run_scoped(compute_qk, plgpu.ACC((block_q, width), jnp.float32))
    plgpu.barrier_arrive(w.k_consumed.at[slot])

    if sm.fused_outer:  # the exp2 takes the cap's outer multiply: s * tanh_outer is the logit
        s, scale, masked = jnp.tanh(qk * sm.tanh_inner), sm.tanh_outer, EXP2_FLOOR / sm.tanh_outer
    elif sm.scale_in_exp2:  # s is the raw logit: the scale comes in below
        s, scale, masked = qk, None, -jnp.inf
    else:
        s, scale, masked = sm.logits_to_log2(qk), None, -jnp.inf
    if mask_fn is not None:
        s = jnp.where(mask_fn(w, t, step, width), s, masked)
    if c.static_max:  # every logit within +-cap: p = exp2(logit) needs no max
        m_new = m_i
        p = exp2_mixed(s, c.exp2_fma_eighths, interpret=sm.interpret, scale=scale)
        l_i = l_i + p.sum(axis=1)
    else:
        m_new = jnp.maximum(m_i, s.max(axis=1) * sm.log2_scale if sm.scale_in_exp2 else s.max(axis=1))
        if c.lazy_rescale:  # only here: under static_max there is no max to keep
            m_new, alpha = lazy_max(m_i, m_new)
        else:
            alpha = jnp.exp2(m_i - m_new)
        logits = s * sm.log2_scale if sm.scale_in_exp2 else s  # with the subtraction: one FMA a logit
        p = exp2_mixed(logits - lax.broadcast_in_dim(m_new, s.shape, [0]), c.exp2_fma_eighths,
                       interpret=sm.interpret)
        if c.lazy_rescale:
            acc = rescale_rows(acc, alpha, interpret=sm.interpret)
        else:
            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
        l_i = l_i * alpha + p.sum(axis=1)
    p16 = p.astype(w.dtype)
    if w.p_in_registers:
        acc, l_i, m_new, p16 = lax.optimization_barrier((acc, l_i, m_new, p16))
    if c.schedule_barrier:
        plgpu.barrier_arrive(w.schedule)
    plgpu.barrier_wait(w.v_ready.at[slot])
    if c.schedule_barrier:
        plgpu.barrier_wait(w.schedule)

    def wait_next_k():
        nxt = step + 1

        @pl.when(nxt < t.total_steps)
        def _():
            plgpu.barrier_wait(w.k_ready.at[t.ring(nxt)])

    if w.p_in_registers:
        def compute_pv(acc_ref):
            plgpu.wgmma(acc_ref, p16, w.v_smem.at[slot, keys])
            wait_next_k()

        acc = pl.run_state(compute_pv)(plgpu.ACC.init(acc))
    else:
        p_smem = w.p_smem2.at[w.wg, :, keys]
        p_smem[...] = p16
        plgpu.commit_smem()
        if sm.interpret:
            # Interpret mode has no run_state over accumulators: fresh one, then add.
            def compute_pv_fresh(acc_ref):
                plgpu.wgmma(acc_ref, p_smem, w.v_smem.at[slot, keys])
                wait_next_k()
                return acc_ref[...]

            acc = acc + pl.run_scoped(compute_pv_fresh, plgpu.ACC((block_q, head_dim), jnp.float32))
        else:
            def compute_pv(acc_ref):
                plgpu.wgmma(acc_ref, p_smem, w.v_smem.at[slot, keys])
                wait_next_k()

            acc = pl.run_state(compute_pv)(plgpu.ACC.init(acc))
    plgpu.barrier_arrive(w.v_consumed.at[slot])
    return acc, m_new, l_i


def diagonal_step(w: Warpgroup, t: Tile, step: Any, carry: Carry) -> Carry:
    """The diagonal of a candidate block: each row's logit with its own key, q.k in registers, then p times its
    own V row; the barriers as ``kv_step`` meets them."""
    c = w.config
    block_q, block_kv, head_dim = c.block_q, c.block_kv, w.problem.head_dim
    acc, m_i, l_i = carry
    slot = t.ring(step)
    block_start = t.kv_block(step) * block_kv
    # This warpgroup's rows are one 64-row slice of the block (its first or, with 128-key blocks,
    # its second), or outside it (64-key blocks): then every row is masked below.
    rows_2d = plgpu.broadcasted_iota(jnp.int32, (block_q, head_dim), 0, layout=plgpu.Layout.WGMMA) + t.q_base

    def own_rows(ref):
        lower_rows = plgpu.load(ref.at[slot, pl.ds(0, block_q)], layout=plgpu.Layout.WGMMA)
        if block_kv == block_q:
            return lower_rows.astype(jnp.float32)
        upper_rows = plgpu.load(ref.at[slot, pl.ds(block_q, block_q)], layout=plgpu.Layout.WGMMA)
        return jnp.where(rows_2d - block_start >= block_q, upper_rows.astype(jnp.float32),
                         lower_rows.astype(jnp.float32))

    w.schedule_point()
    q = plgpu.load(t.qo_smem, layout=plgpu.Layout.WGMMA).astype(jnp.float32)
    qk = (q * own_rows(w.k_smem)).sum(axis=1)
    plgpu.barrier_arrive(w.k_consumed.at[slot])
    rows = plgpu.broadcasted_iota(jnp.int32, (block_q,), 0, layout=row_layout()) + t.q_base
    own_key_here = (rows >= block_start) & (rows < block_start + block_kv)
    s = jnp.where(own_key_here & t.bounds.query_in_candidates(rows), w.softmax.logits_to_log2(qk), -jnp.inf)
    if c.static_max:
        m_new = m_i
        p = jnp.exp2(s)
        l_i = l_i + p
    else:
        m_new = jnp.maximum(m_i, s)
        alpha = jnp.exp2(m_i - m_new)
        p = jnp.exp2(s - m_new)
        acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
        l_i = l_i * alpha + p
    if c.schedule_barrier:
        plgpu.barrier_arrive(w.schedule)
    plgpu.barrier_wait(w.v_ready.at[slot])
    if c.schedule_barrier:
        plgpu.barrier_wait(w.schedule)
    acc = acc + lax.broadcast_in_dim(p, acc.shape, [0]) * own_rows(w.v_smem)

    @pl.when(step + 1 < t.total_steps)
    def _():
        plgpu.barrier_wait(w.k_ready.at[t.ring(step + 1)])

    plgpu.barrier_arrive(w.v_consumed.at[slot])
    return acc, m_new, l_i


def history_steps(w: Warpgroup, t: Tile, carry: Carry) -> Carry:
    """The history's KV blocks: the edge blocks masked, the interior unmasked (unless ``mask_interior``), and
    a last block with no key past its first half at half width."""
    c = w.config
    block_kv = c.block_kv
    hist_steps = t.hist_steps
    hl, hu = t.bounds.history_lower, t.bounds.history_upper

    def step(mask_fn, width=None):
        return lambda s, carry: kv_step(w, t, s, carry, mask_fn, width)

    if c.mask_interior:
        return lax.fori_loop(0, hist_steps, step(history_mask), carry)
    lead = jnp.minimum(hist_steps, jnp.where(lax.rem(hl, block_kv) != 0, 1, 0))
    tail = jnp.minimum(hist_steps - lead, jnp.where(lax.rem(hu, block_kv) != 0, 1, 0))
    masked = step(history_mask)
    carry = lax.fori_loop(0, lead, masked, carry)
    carry = lax.fori_loop(lead, hist_steps - tail, step(None), carry)
    # Mosaic GPU's wgmma takes K (P.V's key dim) in multiples of 64: 128-key blocks only.
    half = block_kv // 2
    if half % 64 == 0:
        half_tail = jnp.where((tail > 0) & (lax.rem(hu, block_kv) <= half), 1, 0)
        carry = lax.fori_loop(hist_steps - tail, hist_steps - half_tail, masked, carry)
        return lax.fori_loop(hist_steps - half_tail, hist_steps, step(history_mask, half), carry)
    return lax.fori_loop(hist_steps - tail, hist_steps, masked, carry)


def candidate_steps(w: Warpgroup, t: Tile, carry: Carry) -> Carry:
    """The candidates' blocks, each row with its own key only. A warpgroup's rows are one block or one half of
    it; with 64-key blocks under 128-row warpgroups they would span two, so that tile keeps the block-wide
    diagonal step."""
    c = w.config
    if c.block_kv in (c.block_q, 2 * c.block_q):
        return lax.fori_loop(t.hist_steps, t.total_steps, functools.partial(diagonal_step, w, t), carry)
    return lax.fori_loop(t.hist_steps, t.total_steps,
                         lambda s, carry: kv_step(w, t, s, carry, diagonal_mask), carry)


def epilogue(w: Warpgroup, t: Tile, carry: Carry, out: Any, lse: Any) -> None:
    """Rows in neither segment zeroed (LSE -inf), the others normalised; O and the LSE through SMEM to ``out``
    and ``lse`` (this tile's rows of the global refs)."""
    acc, m_i, l_i = carry
    pl.when(w.wg == 0)(w.schedule_point)

    rows = plgpu.broadcasted_iota(jnp.int32, (w.config.block_q,), 0, layout=row_layout()) + t.q_base
    row_valid = t.bounds.query_in_history(rows) | t.bounds.query_in_candidates(rows)
    inv_l = jnp.where(row_valid, 1.0 / l_i, 0.0)
    acc = acc * lax.broadcast_in_dim(inv_l, acc.shape, [0])
    t.qo_smem[...] = acc.astype(w.dtype)
    t.lse_smem[...] = jnp.where(row_valid, (m_i + jnp.log2(l_i)) * LN2, -jnp.inf)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(t.qo_smem, out)
    plgpu.copy_smem_to_gmem(t.lse_smem, lse)
