"""What every role of the drafter megakernel shares (FlyDSL, traced inside ``kernel.build_wide``): the
kernel's arguments, one block's lanes and LDS pool, and the lane helpers (reductions, bf16 and 8-bit
conversions, flags) that the G, L and N roles (``gemv_role.py``, ``attention_role.py``, ``merge_role.py``,
``norm_role.py``) all call.

Functions here and in the role modules that branch or loop on traced values are ``@flyc.jit``, so that
FlyDSL rewrites their ``if`` and ``for`` into structured control flow as it does the kernel's own body
(``device.py``); a helper with only trace-time loops (``range_constexpr``) is a plain function.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Self

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import T

from . import device as dev
from . import indexing as ix
from .kernel_args import KernelArgs
from .layout import MAX_ROWS, WAVE, DrafterLayout

I32, I64, F32 = fx.Int32, fx.Int64, fx.Float32


@dataclass(frozen=True)
class Block:
    """One block of the persistent grid: its layout and 8-bit format, its lanes, its LDS pool (as float32
    words and as bf16), this step's number and the deadline of every wait."""

    L: DrafterLayout
    f8_max: float  # the arch's 8-bit format: what ``v_cvt_pk_fp8_f32`` produces there
    yw: int  # byte offset of this rank's symmetric regions in the peer buffer
    args: KernelArgs
    tid: Any
    bid: Any
    lane: Any
    wave: Any
    g4: Any  # the lane's group of 16 in its wave
    l16: Any  # the lane in its group
    pool: Any
    pool16: Any
    step: Any
    deadline: Any

    @staticmethod
    def enter(layout: DrafterLayout, f8_max: float, yw: int, wait_ticks: int, args: KernelArgs, smem: Any) -> Block:
        """The kernel's prologue: ids, the LDS pool of ``smem`` (an ``fx.struct`` with a ``pool`` array), the
        step number and the deadline (``wait_ticks`` of ``s_memrealtime`` from now)."""
        tid = I32(fx.thread_idx.x)
        bid = I32(fx.block_idx.x)
        lane = tid % WAVE
        wave = tid // WAVE
        g4 = lane // 16
        l16 = lane % 16
        pool_ptr = fx.SharedAllocator().allocate(smem).peek().pool.ptr
        pool = fx.recast_iter(F32, pool_ptr)
        pool16 = fx.recast_iter(fx.Int16, pool_ptr)  # the attention's bf16 tiles and staged rows
        step = dev.ld(args.step, I32)
        deadline = dev.realtime() + I64(wait_ticks)
        return Block(layout, f8_max, yw, args, tid, bid, lane, wave, g4, l16, pool, pool16, step, deadline)

    @classmethod
    def of(cls, block: Block) -> Self:
        """``block`` in a role (a subclass holding the role's code)."""
        return cls(**{f.name: getattr(block, f.name) for f in fields(block)})

    # ------------------------------------------------------------ flags and addresses
    @property
    def most_flags(self) -> int:
        """The longest run of flag words any wait polls."""
        return max(self.L.NG, 4 * MAX_ROWS, self.L.W_NA)

    def flag(self, name: str, index: Any) -> Any:
        return dev.at(self.args.scratch, ix.flag_word(self.L, name, index))

    def wait_flags(self, first: Any, count: Any, tag: Any, site: int) -> None:
        """Poll ``count`` consecutive flag words from ``first`` (a ``flag`` address) for ``tag``; ``site`` names
        the wait in the health buffer."""
        dev.wait_flags(first, count, self.most_flags, tag, self.tid, self.L.threads, self.deadline,
                       self.args.health, site, self.bid)

    def publish(self, name: str, index: Any, tag: Any) -> None:
        dev.publish(self.flag(name, index), tag, self.tid)

    def sc(self, layer: Any, name: str) -> Any:
        return dev.at(self.args.scratch, ix.scratch_at(self.L, layer, name))

    def peer(self, r: Any) -> Any:
        """Rank ``r``'s symmetric region (``peers``: 4 addresses)."""
        return dev.ld(dev.at(self.args.peers, ix.peer_at(r)), I64, 8)

    def table(self, layer: Any, slot: int) -> Any:
        return dev.ld(dev.at(self.args.tab, ix.table_at(self.L, layer, slot)), I64, 8)

    # ------------------------------------------------------------ LDS and reductions
    def lds(self, i: Any) -> Any:
        return fx.ptr_load(self.pool + i, result_type=fx.Vector.make_type(1, F32))[0]

    def lds_put(self, i: Any, v: Any) -> None:
        fx.ptr_store(fx.Vector.from_elements([v], dtype=F32), self.pool + i)

    @staticmethod
    def wave_sum(v: Any) -> Any:
        for k in range_constexpr(6):
            v = v + v.shuffle_xor(I32(32 >> k), I32(WAVE))
        return v

    @staticmethod
    def wave_max(v: Any) -> Any:
        for k in range_constexpr(6):
            v = v.maximumf(v.shuffle_xor(I32(32 >> k), I32(WAVE)))
        return v

    @flyc.jit
    def block_reduce(self, v: Any, is_max: bool) -> Any:
        """The block's max (``is_max``) or sum of ``v``, through one LDS word a wave."""
        v = self.wave_max(v) if is_max else self.wave_sum(v)
        gpu.barrier()
        if self.lane == 0:
            self.lds_put(ix.reduce_word(self.L, self.wave), v)
        gpu.barrier()
        total = self.lds(ix.reduce_word(self.L, 0))
        for w in range_constexpr(1, self.L.waves):
            word = self.lds(ix.reduce_word(self.L, w))
            total = total.maximumf(word) if is_max else total + word
        return total

    # ------------------------------------------------------------ bf16 and 8-bit values
    @staticmethod
    def bf16_at(addr: Any) -> Any:
        return dev.bf16_value(I32(dev.ld(addr, fx.Int16, 2)) & 0xFFFF)

    @staticmethod
    def st_bf16(addr: Any, v: Any) -> None:
        dev.st(addr, fx.Int16(dev.bf16_bits(v)), fx.Int16, 2)

    @staticmethod
    def f8_pair(lo: Any, hi: Any) -> Any:
        """Two float32 (already divided by their scale) -> their 8-bit codes in the low 16 bits of an
        Int32, ``lo`` first: ``v_cvt_pk_fp8_f32`` gives e4m3fnuz on gfx942 and e4m3fn on gfx950."""
        return I32(rocdl.cvt_pk_fp8_f32(T.i32, lo, hi, I32(0), False)) & 0xFFFF

    @staticmethod
    def f8_word(v: Any) -> Any:
        """Eight float32 -> one Int64 of 8-bit codes (an MFMA operand)."""
        lo = rocdl.cvt_pk_fp8_f32(T.i32, v[0], v[1], I32(0), False)
        lo = rocdl.cvt_pk_fp8_f32(T.i32, v[2], v[3], lo, True)
        hi = rocdl.cvt_pk_fp8_f32(T.i32, v[4], v[5], I32(0), False)
        hi = rocdl.cvt_pk_fp8_f32(T.i32, v[6], v[7], hi, True)
        return (I64(hi) << 32) | I64(fx.Uint32(lo))

    @staticmethod
    def splat(v: Any) -> Any:
        return fx.Vector.from_elements([v], dtype=F32).broadcast_to(4)

    @staticmethod
    def abs_f(v: Any) -> Any:
        return v.maximumf(-v)
