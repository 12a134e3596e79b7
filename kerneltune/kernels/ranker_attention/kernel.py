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

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.mosaic.gpu import utils as mgpu_utils
from jax.experimental.pallas import mosaic_gpu as plgpu
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import memref as memref_dialect

from .bounds import SegmentBounds
from .config import KernelConfig, Problem, static_max_refusal
from .tile_steps import (
    Softmax,
    Tile,
    Warpgroup,
    candidate_steps,
    epilogue,
    history_steps,
    prologue,
    row_layout,
)

_HOPPER_SMS = 132

Forward = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _kernel_body(config: KernelConfig, problem: Problem, interpret: bool):
    block_q, block_kv = config.block_q, config.block_kv
    head_dim = problem.head_dim
    stages = config.num_stages
    group = problem.heads_per_kv_head
    p_in_registers = config.p_in_registers and not interpret
    n_q_tiles = problem.seq_len // (2 * block_q)

    softmax = Softmax.of(config, interpret)

    def kernel(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, counter_ref, scoped):
        smem, (k_ready, v_ready, q_ready), (k_consumed, v_consumed), schedule, handoff = scoped
        qo_smem_all, k_smem, v_smem, lse_smem_all, p_smem2, ids_smem = smem
        wg = lax.axis_index("wg")

        def plan(batch, q_seq):
            """The KV steps of one tile: ``2 * block_q`` rows of one batch row and head."""
            tile_base = q_seq * (2 * block_q)
            tile_end = tile_base + 2 * block_q
            hl, hu, cl, cu = (bounds_ref[batch, i] for i in range(4))

            def overlaps(lo, hi):
                return (lo < hi) & (tile_base < hi) & (tile_end > lo)

            valid = overlaps(hl, hu) | overlaps(cl, cu)
            hist_first = lax.div(hl, block_kv)
            hist_steps = jnp.where(valid & (hl < hu), pl.cdiv(hu, block_kv) - hist_first, 0)
            own_lo = jnp.maximum(cl, tile_base)
            own_hi = jnp.minimum(cu, tile_end)
            cand_first = lax.div(own_lo, block_kv)
            cand_steps = jnp.where(valid & (own_lo < own_hi), pl.cdiv(own_hi, block_kv) - cand_first, 0)
            return dict(bounds=SegmentBounds(hl, hu, cl, cu), tile_base=tile_base, valid=valid,
                        hist_steps=hist_steps, total_steps=hist_steps + cand_steps,
                        kv_block=lambda step: jnp.where(step < hist_steps, hist_first + step,
                                                        cand_first + (step - hist_steps)))

        def schedule_point():
            if config.schedule_barrier:
                plgpu.barrier_arrive(schedule)
                plgpu.barrier_wait(schedule)

        def load_q(batch, q_head, q_seq, buf, half=None):
            """Q rows of warpgroup ``half`` (default: the calling one) of a tile into buffer ``buf``."""
            half = wg if half is None else half
            q_base = q_seq * (2 * block_q) + half * block_q
            plgpu.copy_gmem_to_smem(q_ref.at[batch, pl.ds(q_base, block_q), q_head],
                                    qo_smem_all.at[2 * buf + half], q_ready.at[2 * buf + half])

        def compute_tile(batch, q_head, q_seq, buf, step_base):
            """One warpgroup's rows of one tile; its Q is in ``qo_smem_all[2 * buf + wg]``. KV step
            ``step`` of the tile is global step ``step_base + step`` of the CTA's K/V ring."""
            tile = plan(batch, q_seq)
            bounds, hist_steps, total_steps = tile["bounds"], tile["hist_steps"], tile["total_steps"]
            kv_block = tile["kv_block"]
            hl, hu = bounds.history_lower, bounds.history_upper
            cl, cu = bounds.candidate_lower, bounds.candidate_upper
            qo_smem = qo_smem_all.at[2 * buf + wg]
            lse_smem = lse_smem_all.at[2 * buf + wg]
            q_base = tile["tile_base"] + wg * block_q
            q_end = q_base + block_q
            # A warpgroup whose rows are all padding follows the K/V ring without computing.
            rows_used = (((hl < hu) & (q_base < hu) & (q_end > hl))
                         | ((cl < cu) & (q_base < cu) & (q_end > cl)))

            def ring(step):
                return lax.rem(step_base + step, stages)

            def store_empty_rows():
                zeros = jnp.zeros((block_q, head_dim), jnp.float32)
                qo_smem[...] = plgpu.layout_cast(zeros, plgpu.Layout.WGMMA).astype(q_ref.dtype)
                no_keys = jnp.full((block_q,), -jnp.inf, jnp.float32)
                lse_smem[...] = plgpu.layout_cast(no_keys, row_layout())
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(qo_smem, out_ref.at[batch, pl.ds(q_base, block_q), q_head])
                plgpu.copy_smem_to_gmem(lse_smem, lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])

            pl.when(~tile["valid"])(store_empty_rows)

            @pl.when(tile["valid"] & ~rows_used)
            def _follow_the_ring():
                """Every barrier of a KV step, in the order ``kv_step`` meets them, and no compute: the
                partner warpgroup and the memory warpgroup count this one's arrivals."""
                @pl.when(total_steps > 0)
                def _():
                    plgpu.barrier_wait(k_ready.at[ring(0)])

                pl.when(wg == 1)(schedule_point)

                @pl.loop(0, total_steps)
                def _step(step):
                    slot = ring(step)
                    schedule_point()
                    plgpu.barrier_arrive(k_consumed.at[slot])
                    if config.schedule_barrier:
                        plgpu.barrier_arrive(schedule)
                    plgpu.barrier_wait(v_ready.at[slot])
                    if config.schedule_barrier:
                        plgpu.barrier_wait(schedule)

                    @pl.when(step + 1 < total_steps)
                    def _():
                        plgpu.barrier_wait(k_ready.at[ring(step + 1)])

                    plgpu.barrier_arrive(v_consumed.at[slot])

                pl.when(wg == 0)(schedule_point)
                store_empty_rows()

            @pl.when(tile["valid"] & rows_used)
            def _compute():
                w = Warpgroup(softmax, problem, p_in_registers, q_ref.dtype, wg, k_smem, v_smem, p_smem2, k_ready,
                              v_ready, k_consumed, v_consumed, schedule)
                t = Tile(bounds, hist_steps, total_steps, kv_block, q_base, qo_smem, lse_smem, step_base, stages)
                carry = prologue(w, t)
                carry = history_steps(w, t, carry)
                carry = candidate_steps(w, t, carry)
                epilogue(w, t, carry, out_ref.at[batch, pl.ds(q_base, block_q), q_head],
                         lse_ref.at[batch, q_head, pl.ds(q_base, block_q)])

            return step_base + total_steps

        def memory_tile(batch, q_head, q_seq, step_base):
            """Stream one tile's K/V blocks into the ring: global step g waits for step g - stages
            to be consumed, so the next tile's first blocks load under this tile's last steps."""
            tile = plan(batch, q_seq)
            kv_head = lax.div(q_head, group)

            @pl.loop(0, tile["total_steps"])
            def _load(step):
                g = step_base + step
                slot = lax.rem(g, stages)
                rows = (batch, pl.ds(tile["kv_block"](step) * block_kv, block_kv), kv_head)

                @pl.when(g >= stages)
                def _():
                    plgpu.barrier_wait(k_consumed.at[slot])

                plgpu.copy_gmem_to_smem(k_ref.at[rows], k_smem.at[slot], k_ready.at[slot])

                @pl.when(g >= stages)
                def _():
                    plgpu.barrier_wait(v_consumed.at[slot])

                plgpu.copy_gmem_to_smem(v_ref.at[rows], v_smem.at[slot], v_ready.at[slot])

            return step_base + tile["total_steps"]

        def drain(steps):
            # Observe the last consumed phases too, so every barrier phase is awaited once.
            @pl.loop(jnp.maximum(steps - stages, 0), steps)
            def _drain(g):
                slot = lax.rem(g, stages)
                plgpu.barrier_wait(k_consumed.at[slot])
                plgpu.barrier_wait(v_consumed.at[slot])

        if not config.persistent:
            batch, q_head, q_seq = (lax.axis_index(n) for n in ("batch", "heads", "q_seq"))

            @pl.when(wg < 2)
            def _compute():
                # Raised where it dominates all the compute code: ptxas sizes what follows from it
                # (inside a branch, call 6 measured the whole kernel 9-17% slower).
                plgpu.set_max_registers(232, action="increase")

                @pl.when(plan(batch, q_seq)["valid"])
                def _():
                    load_q(batch, q_head, q_seq, 0)
                    plgpu.barrier_wait(q_ready.at[wg])

                compute_tile(batch, q_head, q_seq, 0, 0)
                plgpu.wait_smem_to_gmem(0)

            @pl.when(wg == 2)
            def _memory():
                plgpu.set_max_registers(40, action="decrease")
                drain(memory_tile(batch, q_head, q_seq, 0))
            return

        # Persistent: each CTA starts on tile ``cta``. When its memory warpgroup has issued the last
        # K/V load of a tile (a few KV steps before the compute warpgroups finish it) it claims the next
        # from a global counter (tiles in (batch, head, query tile) order, the heads of one KV head
        # adjacent), loads that tile's Q into the other buffer once the compute warpgroups have released
        # it, and hands the tile over through SMEM. CTAs that drew short or padding tiles take more: a
        # fixed stride of CTAs aliases with the tiles per head (1.26x the mean on the busiest CTA for equal
        # rows with padding tiles: 1371b475c129:results/ranker_attention/2026-11-30-h200-run-g/), and claiming
        # at a tile's end is greedy placement.
        ctas = lax.axis_size("cta")
        cta = lax.axis_index("cta")
        n_tiles = problem.batch * problem.q_heads * n_q_tiles
        tile_ready, tile_taken, q_free = handoff

        def coords(tile):
            return lax.div(tile, problem.q_heads * n_q_tiles), lax.rem(lax.div(tile, n_q_tiles), problem.q_heads), \
                lax.rem(tile, n_q_tiles)

        def more(carry):
            return carry[0] < n_tiles

        @pl.when(wg < 2)
        def _compute():
            plgpu.set_max_registers(232, action="increase")

            def tile_step(carry):
                tile, j, step_base = carry
                buf = lax.rem(j, 2)
                plgpu.barrier_wait(q_ready.at[2 * buf + wg])

                @pl.when(j >= 1)
                def _():
                    # The previous tile's O and LSE have left the other buffer: it may take the next Q.
                    plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                    plgpu.barrier_arrive(q_free.at[1 - buf])

                step_base = compute_tile(*coords(tile), buf, step_base)
                plgpu.barrier_wait(tile_ready.at[buf])
                nxt = ids_smem[buf]
                plgpu.barrier_arrive(tile_taken.at[buf])
                return nxt, j + 1, step_base

            lax.while_loop(more, tile_step, (cta, jnp.int32(0), jnp.int32(0)))
            plgpu.wait_smem_to_gmem(0)

        @pl.when(wg == 2)
        def _memory():
            plgpu.set_max_registers(40, action="decrease")
            for half in range(2):
                load_q(*coords(cta), 0, half)

            def stream_step(carry):
                tile, j, step_base = carry
                buf = lax.rem(j, 2)
                step_base = memory_tile(*coords(tile), step_base)
                # Interpret mode runs no inline Mosaic GPU code: there the CTAs keep a fixed stride.
                nxt = cta + (j + 1) * ctas if interpret else ctas + _claim(counter_ref, ids_smem)

                @pl.when(nxt < n_tiles)
                def _():
                    @pl.when(j >= 1)
                    def _():
                        plgpu.barrier_wait(q_free.at[1 - buf])

                    for half in range(2):
                        load_q(*coords(nxt), 1 - buf, half)

                @pl.when(j >= 2)
                def _():
                    plgpu.barrier_wait(tile_taken.at[buf])

                ids_smem[buf] = nxt
                plgpu.barrier_arrive(tile_ready.at[buf])
                return nxt, j + 1, step_base

            _, handed, steps = lax.while_loop(more, stream_step, (cta, jnp.int32(0), jnp.int32(0)))
            drain(steps)

            @pl.loop(jnp.maximum(handed - 2, 0), handed)
            def _taken(j):
                plgpu.barrier_wait(tile_taken.at[lax.rem(j, 2)])

            # The compute warpgroups released a Q buffer at the start of every tile but the first; the
            # loop above awaited all but the last of those (it loads no Q after the last tile).
            @pl.when(handed >= 2)
            def _():
                plgpu.barrier_wait(q_free.at[lax.rem(handed, 2)])

    return kernel


_CLAIM_SLOT = 2  # ids_smem: [0], [1] the tile handed to the compute warpgroups, [2] the last claim


def _claim(counter_ref, ids_smem) -> jax.Array:
    """Atomically take the next ticket of the CTAs' shared tile counter (one thread of the memory
    warpgroup; the warpgroup reads it back from SMEM)."""

    @plgpu.inline_mgpu(arg_types=(plgpu.RefType(), plgpu.RefType()))
    def take(ctx, counter, ids):
        del ctx
        i32 = ir.IntegerType.get_signless(32)
        mgpu_utils.warpgroup_barrier()  # every thread has read the previous claim
        with mgpu_utils.single_thread(scope=mgpu_utils.ThreadSubset.WARPGROUP):
            ticket = mgpu_utils.inline_ptx("atom.relaxed.gpu.add.u32 $0, [$1], $2;", mgpu_utils.memref_ptr(counter),
                                           mgpu_utils.c(1, i32), result_types=i32, has_side_effects=True)
            memref_dialect.store(ticket, ids, [mgpu_utils.c(_CLAIM_SLOT, ir.IndexType.get())])
        mgpu_utils.warpgroup_barrier()

    take(counter_ref, ids_smem)
    return ids_smem[_CLAIM_SLOT]


def _sm_count() -> int:
    """SMs of the device the kernel will run on; H100/H200's 132 when lowering without one (tests)."""
    return getattr(jax.devices()[0], "core_count", None) or _HOPPER_SMS


def build_forward(problem: Problem, config: KernelConfig, *, interpret: bool = False,
                  poisoned: bool = False, num_ctas: int | None = None) -> Forward:
    """Jitted ``(q, k, v, bounds) -> (out, lse)`` for one problem shape.

    With ``poisoned`` the function takes two more arguments, the initial
    contents of ``out`` and ``lse``, and the kernel writes into those buffers
    in place (through refs): a verifier fills them with NaN so that an element
    the kernel never writes cannot pass. A persistent kernel launches ``num_ctas``
    CTAs (default: the device's SM count; 3 in interpret mode, to walk several tiles).
    """
    refusal = static_max_refusal(config)  # the one refusal whose kernel would compile and run wrong
    if refusal is not None:
        raise ValueError(refusal)
    block_q, block_kv, stages = config.block_q, config.block_kv, config.num_stages
    dtype = jnp.dtype(problem.dtype)
    body = _kernel_body(config, problem, interpret)
    p_staged = not (config.p_in_registers and not interpret)
    q_buffers = 2 if config.persistent else 1

    # The persistent kernel's tile handoff: "ready" (memory warpgroup -> compute), "taken" (back), and
    # "Q buffer free" (compute -> memory warpgroup, which loads the next tile's Q).
    handoff = (plgpu.Barrier(num_barriers=2), plgpu.Barrier(num_arrivals=2, num_barriers=2),
               plgpu.Barrier(num_arrivals=2, num_barriers=2))

    def entry(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, counter_ref=None):
        tiled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
        smem = [
            plgpu.SMEM((2 * q_buffers, block_q, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((stages, block_kv, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((stages, block_kv, problem.head_dim), dtype, transforms=tiled),
            plgpu.SMEM((2 * q_buffers, block_q), jnp.float32),
            plgpu.SMEM((2, block_q, block_kv), dtype, transforms=tiled) if p_staged else None,
            plgpu.SMEM((_CLAIM_SLOT + 1,), jnp.int32) if config.persistent else None,
        ]
        pl.run_scoped(
            lambda *scoped: body(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, counter_ref, scoped),
            smem,
            (
                plgpu.Barrier(num_barriers=stages),
                plgpu.Barrier(num_barriers=stages),
                plgpu.Barrier(num_barriers=2 * q_buffers),
            ),
            (plgpu.Barrier(num_arrivals=2, num_barriers=stages),) * 2,
            plgpu.Barrier(num_arrivals=2),
            handoff if config.persistent else None,
            collective_axes="wg",
        )

    b, t, hq = problem.batch, problem.seq_len, problem.q_heads
    out_types = (
        jax.ShapeDtypeStruct((b, t, hq, problem.head_dim), dtype),
        jax.ShapeDtypeStruct((b, hq, t), jnp.float32),
    )
    if config.persistent:
        n_tiles = b * hq * (t // (2 * block_q))
        ctas = num_ctas or (3 if interpret else _sm_count())
        grid, grid_names = (min(n_tiles, ctas),), ("cta",)
    else:
        grid, grid_names = (hq, t // (2 * block_q), b), ("heads", "q_seq", "batch")

    def plain_entry(*refs):
        """Inputs come before outputs: move the persistent grid's tile counter to ``entry``'s last place."""
        if not config.persistent:
            return entry(*refs)
        q_ref, k_ref, v_ref, bounds_ref, counter_ref, out_ref, lse_ref = refs
        return entry(q_ref, k_ref, v_ref, bounds_ref, out_ref, lse_ref, counter_ref)

    call = plgpu.kernel(
        entry if poisoned else plain_entry,
        out_type=() if poisoned else out_types,
        grid=grid,
        grid_names=grid_names,
        num_threads=3,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=config.fast_math),
        interpret=plgpu.InterpretGPUParams() if interpret else None,
    )

    def counter() -> tuple:
        return (jax.new_ref(jnp.zeros((1,), jnp.int32)),) if config.persistent else ()

    if not poisoned:
        return jax.jit(lambda q, k, v, bounds: call(q, k, v, bounds, *counter()))

    def into_buffers(q, k, v, bounds, out_init, lse_init):
        out_ref, lse_ref = jax.new_ref(out_init), jax.new_ref(lse_init)
        call(q, k, v, bounds, out_ref, lse_ref, *counter())
        return out_ref[...], lse_ref[...]

    return jax.jit(into_buffers)
