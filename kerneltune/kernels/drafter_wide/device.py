"""Device helpers of the drafter megakernel (FlyDSL, traced inside ``kernel.build_wide``).

Helpers with data-dependent control flow are ``@flyc.jit`` so that FlyDSL rewrites their ``if``
and ``while`` into structured control flow, as it does the kernel's own body.

Raw addresses are ``Int64`` byte addresses, as the launcher receives them. Ordinary data moves
with plain loads and stores; flags and tagged words move with system-scope acquire loads and
release stores, because the words a rank polls are written by its peers over the fabric; the data
behind a peer's tag is read with system-scope relaxed loads (``coherent``), which gfx942 and gfx950
issue with ``sc0 sc1`` so that no cache of this GPU answers them from a line it held before the peer
wrote (LLVM AMDGPUUsage, "Memory Model GFX942"; ``backends/hip_peer_memory.py`` says why). The
GEMV tile is one 16x16 MFMA output (``mfma_f32_16x16x32_fp8_fp8``): each lane holds 32 bytes
of a weight row and 32 of a token row per chunk, and both operands use the same lane-to-K
mapping, so the permutation of K inside a chunk cancels in the dot product.
"""

from __future__ import annotations

from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl._mlir import ir
from flydsl._mlir.dialects import llvm
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import T

from . import health
from . import indexing as ix

SYSTEM = "one-as"  # peers write these words: visible across the fabric


# ----------------------------------------------------------------- memory
def ptr(addr: Any, dtype: Any, align: int) -> Any:
    t = fx.PointerType.get(elem_ty=dtype.ir_type, address_space=fx.AddressSpace.Global, alignment=align)
    return fx.inttoptr(t, addr)


def at(base: Any, offset: Any) -> Any:
    """``base + offset`` as an Int64 byte address (offset: any integer value)."""
    return base + fx.Int64(offset)


def ld(addr: Any, dtype: Any, align: int = 4, *, acquire: bool = False, coherent: bool = False,
       stream: bool = False) -> Any:
    """One load; ``acquire`` for a word a peer publishes, ``coherent`` for data a peer wrote (read after its
    tag's acquire), ``stream`` (nontemporal) for weights read once."""
    if acquire:
        return fx.generic_load(ptr(addr, dtype, align), memory_order=fx.AtomicOrdering.Acquire, syncscope=SYSTEM)
    if coherent:
        return fx.generic_load(ptr(addr, dtype, align), memory_order=fx.AtomicOrdering.Monotonic, syncscope=SYSTEM)
    return fx.generic_load(ptr(addr, dtype, align), nontemporal=stream)


def st(addr: Any, value: Any, dtype: Any, align: int = 4, *, release: bool = False) -> None:
    if release:
        fx.generic_store(ptr(addr, dtype, align), value, memory_order=fx.AtomicOrdering.Release, syncscope=SYSTEM)
    else:
        fx.generic_store(ptr(addr, dtype, align), value)


def realtime() -> Any:
    """The constant-rate clock (100 MHz on MI300), for deadlines."""
    i64 = ir.IntegerType.get_signless(64)
    return fx.Int64(llvm.call_intrinsic(i64, "llvm.amdgcn.s.memrealtime", [], [], []))


# ----------------------------------------------------------------- flags, tagged words, health
def release_block() -> None:
    """Every thread's writes so far become visible system-wide before what thread 0 stores next."""
    fx.memory_fence(syncscope=SYSTEM, ordering=fx.AtomicOrdering.AcqRel)
    gpu.barrier()


@flyc.jit
def publish(flag_addr: Any, tag: Any, tid: Any) -> None:
    """After the whole block's writes: one release store of ``tag`` into the block's flag word."""
    release_block()
    if tid == 0:
        st(flag_addr, fx.Int32(tag), fx.Int32, 8, release=True)


@flyc.jit
def _poll(addr: Any, tag: Any, deadline: Any, exact: bool) -> Any:
    """Spin on one word until it carries ``tag`` (``exact``) or a tag at least as new, or the
    deadline passes; returns the last value read."""
    v = ld(addr, fx.Int32, 4, acquire=True)
    while ((v != tag) if exact else (v < tag)) & (realtime() < deadline):
        rocdl.s_sleep(1)
        v = ld(addr, fx.Int32, 4, acquire=True)
    return v


@flyc.jit
def report_miss(health_buf: Any, site: int, block: Any, tag: Any, missing: Any) -> None:
    """The first block to miss a deadline claims the health buffer and says what it waited for."""
    word = at(health_buf, 4 * health.SITE)
    _, won = fx.atomic_cas(ptr(word, fx.Int32, 4), fx.Int32(0), fx.Int32(site), syncscope=SYSTEM)
    if won:
        st(at(health_buf, 4 * health.BLOCK), fx.Int32(block), fx.Int32)
        st(at(health_buf, 4 * health.TAG), fx.Int32(tag), fx.Int32)
        st(at(health_buf, 4 * health.MISSING), fx.Int32(missing), fx.Int32)


@flyc.jit
def wait_flags(first_flag: Any, count: Any, most: int, tag: Any, tid: Any, threads: int, deadline: Any,
               health_buf: Any, site: int, block: Any) -> None:
    """The block polls ``count`` (at most ``most``) consecutive 8-byte flag words, each thread its
    share; a miss goes to the health buffer (site, block, tag, 1) and the block carries on, so the
    launch ends instead of hanging."""
    for k in range_constexpr(-(-most // threads)):
        i = tid + k * threads
        if i < count:
            v = _poll(at(first_flag, i * 8), tag, deadline, exact=False)
            if v < tag:
                report_miss(health_buf, site, block, tag, 1)
    gpu.barrier()


@flyc.jit
def wait_tagged(word: Any, tag: Any, deadline: Any, health_buf: Any, site: int, block: Any) -> None:
    """Poll one tagged word (the tag half of an 8-byte data+tag store) until it carries ``tag``."""
    v = _poll(word, tag, deadline, exact=True)
    if v != tag:
        report_miss(health_buf, site, block, tag, 1)


# ----------------------------------------------------------------- bf16 and 8-bit values
def f32_bits(v: Any) -> Any:
    return fx.Vector.from_elements([v], dtype=fx.Float32).bitcast(fx.Int32)[0]


def bf16_bits(v: Any) -> Any:
    """float32 -> the 16 bits of its bfloat16, rounded to nearest even (finite values), as an Int32."""
    b = f32_bits(v)
    return (b + 0x7FFF + (b.shrui(fx.Int32(16)) & 1)).shrui(fx.Int32(16))


def bf16_value(bits: Any) -> Any:
    """The 16 low bits of an Int32, read as a bfloat16, widened to float32."""
    return fx.Vector.from_elements([fx.Int32(bits) << 16], dtype=fx.Int32).bitcast(fx.Float32)[0]


def bf16_pair(lo: Any, hi: Any) -> Any:
    """Two float32 -> one Int32 holding bf16(lo) in the low half, bf16(hi) in the high half."""
    return bf16_bits(lo) | (bf16_bits(hi) << 16)


def tagged_word(data: Any, tag: Any) -> Any:
    """One 8-byte word: data in the low 4 bytes, the tag in the high 4 (a single aligned store)."""
    return (fx.Int64(tag) << 32) | fx.Int64(fx.Uint32(data))


# ----------------------------------------------------------------- GEMV tiles
def row_chunk(layout: Any, base: Any, row: Any, k: int, chunk: int, wave: Any, g4: Any) -> Any:
    """Lane group ``g4``'s 32 bytes of chunk ``chunk`` of wave ``wave`` of the 8-bit row ``row``
    (``k`` bytes long): four Int64 MFMA operands, read once (nontemporal)."""
    off = ix.row8_at(fx.Int64(row), k, fx.Int64(ix.k_offset(layout, chunk, wave, g4)))
    return fx.generic_load(ptr(at(base, off), fx.Int64, 16), dtype=fx.Int64, count=4, nontemporal=True)


def mma_chunk(a: Any, b: Any) -> Any:
    """One chunk (4 x 32 K) of a 16x16 MFMA tile: lane l gets rows 4 (l // 16) .. + 3, column l % 16."""
    acc = fx.Vector.filled(4, 0.0, fx.Float32)
    for i in range_constexpr(4):
        acc = rocdl.mfma_f32_16x16x32_fp8_fp8(T.f32x4, [a[i], b[i], acc, 0, 0, 0])
    return acc


def red_store(layout: Any, red: Any, slot: int, acc: Any, wave: Any, lane: Any) -> None:
    """This wave's partial tile into LDS slot ``slot``."""
    for i in range_constexpr(4):
        value = fx.Vector.from_elements([acc[i]], dtype=fx.Float32)
        fx.ptr_store(value, red + ix.red_word(layout, slot, wave, i, lane))


def red_sum(layout: Any, red: Any, slot: int, m: Any, n: Any) -> Any:
    """Element (row m, column n) of slot ``slot``'s tile, summed over the waves."""
    total = fx.Float32(0.0)
    for w in range_constexpr(layout.waves):
        total = total + fx.ptr_load(red + ix.red_element(layout, slot, w, m, n),
                                    result_type=fx.Vector.make_type(1, fx.Float32))[0]
    return total
