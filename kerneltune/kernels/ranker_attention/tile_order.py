"""The persistent kernel's tiles longest first (issue 23's idea 4).

CTAs claim tiles from a counter; in batch order a ragged batch ends on whichever rows come last, and
the busiest CTA runs 4-5% over the mean at D=64 (run X's model over 20 draws; 2% under this order).
A tile of a row costs about the row's history steps (every query attends the whole history), so
ranking the rows by those steps and dealing out tickets to the valid tiles of the longest rows first
and to every padding tile (nearly free) last is longest-processing-time-first scheduling.

Each CTA ranks the rows itself before its first tile, so no other kernel runs per call: its memory
warpgroup's threads rank one row each against all rows (inline Mosaic GPU; interpret mode, which runs
no inline code, ranks with ``jnp``) into a table in SMEM:

* ``rows[r]``: the row of rank ``r`` (longest first; ties by row index);
* ``offs[r]``: the first ticket of its valid tiles (``offs[B]``: every valid tile's count).

A ticket then maps to a tile by a binary search of ``offs`` and the row's bounds (``tile_of_ticket``).
The row's spans of query tiles are computed by ``spans``, written once over an ``Ops`` namespace so
that the ``jnp`` code and the inline MLIR agree by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Table layout inside the kernel's int32 ids buffer, after its handoff slots.
TABLE_START = 4


@dataclass(frozen=True)
class Ops:
    """The few integer operations ``spans`` needs besides ``+ - * < <= & | ~``."""

    where: Callable[[Any, Any, Any], Any]
    minimum: Callable[[Any, Any], Any]
    maximum: Callable[[Any, Any], Any]
    div: Callable[[Any, int], Any]  # non-negative operands
    const: Callable[[int], Any]


def jnp_ops() -> Ops:
    import jax.numpy as jnp
    from jax import lax

    return Ops(where=jnp.where, minimum=jnp.minimum, maximum=jnp.maximum,
               div=lambda x, d: lax.div(x, jnp.int32(d)), const=jnp.int32)


@dataclass(frozen=True)
class RowSpans:
    """A row's valid query tiles as two disjoint spans ``[s1, e1)`` before ``[s2, e2)`` (the second
    possibly empty, then ``s2 == e2 == e1``), and its cost key (history KV steps)."""

    s1: Any
    e1: Any
    s2: Any
    e2: Any
    steps: Any

    @property
    def valid(self) -> Any:
        return (self.e1 - self.s1) + (self.e2 - self.s2)


def spans(hl: Any, hu: Any, cl: Any, cu: Any, *, rows_per_tile: int, block_kv: int, ops: Ops) -> RowSpans:
    """The query tiles ``plan`` calls valid (overlapping the history or the candidates) of one row."""
    zero = ops.const(0)
    ea, ec = ~(hl < hu), ~(cl < cu)

    def span(lo: Any, hi: Any, empty: Any) -> tuple[Any, Any]:
        return (ops.where(empty, zero, ops.div(lo, rows_per_tile)),
                ops.where(empty, zero, ops.div(hi + (rows_per_tile - 1), rows_per_tile)))

    (a0, a1), (c0, c1) = span(hl, hu, ea), span(cl, cu, ec)
    swap = ea | (~ec & (c0 < a0))  # the non-empty span first, else the earlier
    s1, e1 = ops.where(swap, c0, a0), ops.where(swap, c1, a1)
    s2, e2 = ops.where(swap, a0, c0), ops.where(swap, a1, c1)
    second_empty = ops.where(swap, ea, ec)
    merge = second_empty | (s2 <= e1)
    e1 = ops.where(merge, ops.maximum(e1, ops.where(second_empty, e1, e2)), e1)
    s2, e2 = ops.where(merge, e1, s2), ops.where(merge, e1, e2)
    steps = ops.where(ea, zero, ops.div(hu + (block_kv - 1), block_kv) - ops.div(hl, block_kv))
    return RowSpans(s1, e1, s2, e2, steps)


def valid_tile(row: RowSpans, k: Any, ops: Ops) -> Any:
    """The ``k``-th valid query tile, last first (a row's candidate tiles cost a step or two more)."""
    second = row.e2 - row.s2
    return ops.where(k < second, row.e2 - 1 - k, row.e1 - 1 - (k - second))


def padding_tile(row: RowSpans, k: Any, n_q_tiles: int, ops: Ops) -> Any:
    """The ``k``-th query tile outside both spans, first first."""
    del n_q_tiles  # the last gap runs to it; k < n_q_tiles - valid keeps the result inside
    g0, g1 = row.s1, row.s2 - row.e1
    return ops.where(k < g0, k, ops.where(k < g0 + g1, row.e1 + (k - g0), row.e2 + (k - g0 - g1)))


def tile_of_ticket(ticket: Any, table: Any, bounds: Any, *, batch: int, q_heads: int, n_q_tiles: int,
                   rows_per_tile: int, block_kv: int) -> Any:
    """The flat tile ``(row * q_heads + head) * n_q_tiles + q_tile`` of ``ticket`` (in [0, tiles)):
    valid tiles of the rows in rank order (heads adjacent), then every padding tile. ``table`` and
    ``bounds`` are anything indexable by a traced scalar (SMEM/GMEM refs in the kernel, arrays in tests)."""
    import jax.numpy as jnp

    ops = jnp_ops()
    rows_at, offs_at = TABLE_START, TABLE_START + batch
    total = table[offs_at + batch]
    per_row = n_q_tiles * q_heads
    in_valid = ticket < total
    target = jnp.where(in_valid, ticket, ticket - total)

    def start(r: Any) -> Any:  # nondecreasing in r; start(0) == 0
        off = table[offs_at + r]
        return jnp.where(in_valid, off, r * per_row - off)

    rank = jnp.int32(0)
    step = 1 << max(batch - 1, 0).bit_length()
    while step:  # the largest rank whose start is <= target: that row is never empty
        cand = rank + step
        ok = (cand < batch) & (start(jnp.minimum(cand, batch - 1)) <= target)
        rank = jnp.where(ok, cand, rank)
        step //= 2
    row = table[rows_at + rank]
    offset = target - start(rank)
    k, head = offset // q_heads, offset % q_heads
    bound = spans(*(bounds[row, i] for i in range(4)), rows_per_tile=rows_per_tile, block_kv=block_kv, ops=ops)
    q_tile = jnp.where(in_valid, valid_tile(bound, k, ops), padding_tile(bound, k, n_q_tiles, ops))
    return (row * q_heads + head) * n_q_tiles + q_tile


def rank_table(bounds: Any, *, q_heads: int, rows_per_tile: int, block_kv: int) -> Any:
    """``rows`` then ``offs`` (``TABLE_START`` not included) in ``jnp``: interpret mode's table, and the
    reference the inline ranking is held to."""
    import jax.numpy as jnp

    row = spans(*(bounds[:, i] for i in range(4)), rows_per_tile=rows_per_tile, block_kv=block_kv, ops=jnp_ops())
    batch = bounds.shape[0]
    order = jnp.argsort(-row.steps, stable=True).astype(jnp.int32)
    tickets = (row.valid * q_heads)[order]
    offs = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(tickets).astype(jnp.int32)])
    return jnp.concatenate([order, offs]).astype(jnp.int32).reshape(2 * batch + 1)


def table_words(batch: int) -> int:
    """int32 words of the ids buffer with the table: handoff slots, ``rows``, ``offs``, and the inline
    ranking's per-row ``steps`` and ``tickets``."""
    return TABLE_START + 4 * batch + 1


class _Value:
    """An i32 or i1 MLIR value with Python's operators, for ``spans`` in inline Mosaic GPU code."""

    def __init__(self, value: Any) -> None:
        self.value = value

    @staticmethod
    def of(x: Any) -> _Value:
        from jax.experimental.mosaic.gpu import utils as mgpu_utils
        from jaxlib.mlir import ir

        return x if isinstance(x, _Value) else _Value(mgpu_utils.c(int(x), ir.IntegerType.get_signless(32)))

    def _bin(self, other: Any, op: Callable[[Any, Any], Any], reverse: bool = False) -> _Value:
        a, b = self, _Value.of(other)
        return _Value(op(b.value, a.value) if reverse else op(a.value, b.value))

    def _cmp(self, other: Any, pred: str) -> _Value:
        from jaxlib.mlir.dialects import arith

        return _Value(arith.cmpi(getattr(arith.CmpIPredicate, pred), self.value, _Value.of(other).value))

    def __add__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.addi)

    __radd__ = __add__

    def __sub__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.subi)

    def __rsub__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.subi, reverse=True)

    def __mul__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.muli)

    def __and__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.andi)

    def __or__(self, o: Any) -> _Value:
        from jaxlib.mlir.dialects import arith
        return self._bin(o, arith.ori)

    def __invert__(self) -> _Value:
        from jaxlib.mlir import ir
        from jaxlib.mlir.dialects import arith
        return _Value(arith.xori(self.value, arith.constant(ir.IntegerType.get_signless(1), 1)))

    def __lt__(self, o: Any) -> _Value:
        return self._cmp(o, "slt")

    def __le__(self, o: Any) -> _Value:
        return self._cmp(o, "sle")

    def __gt__(self, o: Any) -> _Value:
        return self._cmp(o, "sgt")


def mlir_ops() -> Ops:
    from jaxlib.mlir.dialects import arith

    def sel(c: Any, a: Any, b: Any) -> _Value:
        return _Value(arith.select(c.value, _Value.of(a).value, _Value.of(b).value))

    return Ops(where=sel,
               minimum=lambda a, b: _Value(arith.minsi(_Value.of(a).value, _Value.of(b).value)),
               maximum=lambda a, b: _Value(arith.maxsi(_Value.of(a).value, _Value.of(b).value)),
               div=lambda x, d: _Value(arith.divsi(_Value.of(x).value, _Value.of(d).value)),
               const=_Value.of)


def rank_rows_inline(bounds_ref: Any, ids_smem: Any, *, batch: int, q_heads: int, rows_per_tile: int,
                     block_kv: int) -> None:
    """``rank_table`` into ``ids_smem[TABLE_START:]`` by the calling warpgroup's 128 threads, each ranking
    its rows (``lane``, ``lane + 128``, ...) against every row: ``steps`` and ``tickets`` of every row to
    SMEM first, a warpgroup barrier, then a row's rank and first ticket are the count and sum over the
    rows before it (more steps, or as many and a lower index)."""
    from jax.experimental.mosaic.gpu import utils as mgpu_utils
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import arith, memref, scf

    steps_at, tickets_at = TABLE_START + 2 * batch + 1, TABLE_START + 3 * batch + 1

    @plgpu.inline_mgpu(arg_types=(plgpu.RefType(), plgpu.RefType()))
    def rank(ctx: Any, bounds: Any, ids: Any) -> None:
        del ctx
        i32, index = ir.IntegerType.get_signless(32), ir.IndexType.get()

        def c(v: int) -> Any:
            return mgpu_utils.c(v, i32)

        def idx(v: Any) -> Any:
            return arith.index_cast(index, v)

        def load(ref: Any, *at: Any) -> Any:
            return memref.load(ref, [idx(a) for a in at])

        def store(v: Any, ref: Any, at: Any) -> None:
            memref.store(v, ref, [idx(at)])

        lane = arith.remui(mgpu_utils.thread_idx(), c(128))

        def my_rows(body: Callable[[Any], None]) -> None:
            loop = scf.ForOp(idx(lane), idx(c(batch)), idx(c(128)))
            with ir.InsertionPoint(loop.body):
                body(arith.index_cast(i32, loop.induction_variable))
                scf.YieldOp([])

        def phase1(b: Any) -> None:
            row = spans(*(_Value(load(bounds, b, c(i))) for i in range(4)), rows_per_tile=rows_per_tile,
                        block_kv=block_kv, ops=mlir_ops())
            store(row.steps.value, ids, arith.addi(b, c(steps_at)))
            store((row.valid * q_heads).value, ids, arith.addi(b, c(tickets_at)))

        def phase2(b: Any) -> None:
            key = load(ids, arith.addi(b, c(steps_at)))

            @mgpu_utils.fori(c(batch), (c(0), c(0), c(0)))
            def counted(other: Any, carry: Any) -> Any:
                rank, first, total = carry
                key2 = load(ids, arith.addi(other, c(steps_at)))
                tickets = load(ids, arith.addi(other, c(tickets_at)))
                before = arith.ori(arith.cmpi(arith.CmpIPredicate.sgt, key2, key),
                                   arith.andi(arith.cmpi(arith.CmpIPredicate.eq, key2, key),
                                              arith.cmpi(arith.CmpIPredicate.slt, other, b)))
                return (arith.addi(rank, arith.extui(i32, before)),
                        arith.addi(first, arith.select(before, tickets, c(0))),
                        arith.addi(total, tickets))

            rank, first, total = counted.results
            store(b, ids, arith.addi(rank, c(TABLE_START)))
            store(first, ids, arith.addi(rank, c(TABLE_START + batch)))
            store(total, ids, c(TABLE_START + 2 * batch))  # every thread the same value

        my_rows(phase1)
        mgpu_utils.warpgroup_barrier()
        my_rows(phase2)
        mgpu_utils.warpgroup_barrier()

    rank(bounds_ref, ids_smem)
