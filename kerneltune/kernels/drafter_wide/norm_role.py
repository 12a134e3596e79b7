"""The N blocks ``[NORM0, BLOCKS)`` of the drafter megakernel: each owns one token row on its rank (the
residual in float32, every RMSNorm and the 8-bit quantisation of the norms' outputs) and takes part in the
all-gathers: the owned row goes to this rank's symmetric region under a tag, and the N block copies four
gathered rows from their owners' regions into the scratch for the G blocks. The partial sums the G blocks
pushed (o_proj, down) are added from the four ranks' pairs (``row_sum4``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import range_constexpr

from . import device as dev
from . import indexing as ix
from .block import F32, I32, I64, Block
from .reference import Dims

Pairs = list[tuple[Any, Any]]  # a row as this thread's (even, odd) element pairs, float32


@dataclass(frozen=True)
class OwnedRow:
    """The token row this N block owns on its rank (``own``: the launch has that row; ``t_read``: a row to read
    whatever ``own`` says, so that every thread takes part in the block's reductions)."""

    j: Any  # the N block's index
    t_own: Any
    own: Any
    t_read: Any

    @staticmethod
    def of(b: Block) -> OwnedRow:
        j = b.bid - b.L.NORM0
        t_own = ix.own_row(j, b.args.rank)
        return OwnedRow(j, t_own, t_own < b.args.n_rows, ix.smin(t_own, b.args.n_rows - 1))

def add(res: Pairs, more: Pairs) -> Pairs:
    return [(a + c, b + d) for (a, b), (c, d) in zip(res, more, strict=True)]


class NormRole(Block):
    """An N block: its owned row's norms and the all-gathers."""

    def pair_of(self, k: int) -> Any:
        """This thread's ``k``-th pair of a row."""
        return self.tid + k * self.L.threads

    def per_thread(self) -> int:
        return self.L.ROW_PAIRS // self.L.threads

    def norm_pairs(self, res: Pairs, w_addr: Any) -> Pairs:
        """RMSNorm of the row ``res`` with the bf16 weights at ``w_addr``."""
        ss = F32(0.0)
        for lo, hi in res:
            ss = ss + lo * lo + hi * hi
        rstd = fx.rsqrt(self.block_reduce(ss, False) / F32(float(self.L.model.hidden)) + F32(Dims().eps))
        out = []
        for k in range_constexpr(self.per_thread()):
            p = self.pair_of(k)
            lo, hi = res[k]
            out.append((lo * rstd * self.bf16_at(dev.at(w_addr, ix.bf16_at(2 * p))),
                        hi * rstd * self.bf16_at(dev.at(w_addr, ix.bf16_at(2 * p + 1)))))
        return out

    @flyc.jit
    def put_x8(self, row: OwnedRow, vals: Pairs, region: int, tag: Any) -> None:
        """The owned row, quantised with its amax, into this rank's all-gather region, then its tag."""
        L, sym, yw = self.L, self.args.sym, self.yw
        a = F32(0.0)
        for lo, hi in vals:
            a = a.maximumf(self.abs_f(lo)).maximumf(self.abs_f(hi))
        amax = self.block_reduce(a, True).maximumf(F32(1e-12))
        inv = F32(self.f8_max) / amax
        if row.own:
            for k in range_constexpr(self.per_thread()):
                lo, hi = vals[k]
                dev.st(dev.at(sym, yw + ix.ag_x8_byte(L, region, row.t_own, 2 * self.pair_of(k))),
                       fx.Int16(self.f8_pair(lo * inv, hi * inv)), fx.Int16, 2)
        dev.release_block()
        if row.own & (self.tid == 0):
            dev.st(dev.at(sym, yw + ix.ag_x8_scale(L, region, row.t_own)), amax / F32(self.f8_max), F32)
            dev.st(dev.at(sym, yw + ix.ag_x8_tag(L, region, row.t_own)), I32(tag), I32, 4, release=True)

    @flyc.jit
    def gather_x8(self, row: OwnedRow, region: int, layer: Any, tag: Any, data: str, scale: str, fname: str,
                  site: int) -> None:
        """The four rows this N block gathers, from their owners' regions into the scratch rows ``data`` and scales
        ``scale``, each then flagged ``fname`` for the G blocks. The data behind a peer's tag is read with
        system-scope loads (``device.ld(coherent=True)``: README, peer memory)."""
        L, tid, yw, hidden, n_rows = self.L, self.tid, self.yw, self.L.model.hidden, self.args.n_rows
        for c in range(4):
            t = ix.gathered_row(row.j, c)
            if t < n_rows:
                src = self.peer(ix.owner_rank(t))
                dev.wait_tagged(dev.at(src, yw + ix.ag_x8_tag(L, region, t)), tag, self.deadline, self.args.health,
                                site, self.bid)
                dst = self.sc(layer, data)
                for k in range_constexpr(-(-hidden // (8 * L.threads))):
                    w8 = (tid + k * L.threads) * 8
                    if w8 < hidden:
                        dev.st(dev.at(dst, ix.row8_at(t, hidden, w8)),
                               dev.ld(dev.at(src, yw + ix.ag_x8_byte(L, region, t, w8)), I64, 8, coherent=True),
                               I64, 8)
                if tid == 0:
                    dev.st(dev.at(self.sc(layer, scale), ix.scale_at(t)),
                           dev.ld(dev.at(src, yw + ix.ag_x8_scale(L, region, t)), F32, coherent=True), F32)
                self.publish(fname, t, tag)

    @flyc.jit
    def row_sum4(self, row: OwnedRow, region: int, tag: Any, site: int) -> Pairs:
        """The owned row's partial sums from the 4 ranks (tagged pairs in this rank's region): first every word this
        thread reads carries ``tag``, then the reads."""
        L, sym, yw = self.L, self.args.sym, self.yw
        if row.own:
            for k in range(self.per_thread() * 4):
                word = dev.at(sym, yw + ix.rs_tag(L, region, k % 4, row.t_read, 0, self.pair_of(k // 4)))
                dev.wait_tagged(word, tag, self.deadline, self.args.health, site, self.bid)
        out = []
        for k in range_constexpr(self.per_thread()):
            lo, hi = F32(0.0), F32(0.0)
            for src in range_constexpr(4):
                word = dev.at(sym, yw + ix.rs_pair(L, region, src, row.t_read, 0, self.pair_of(k)))
                d = dev.ld(word, I32, 4, acquire=True)
                lo = lo + dev.bf16_value(d & 0xFFFF)
                hi = hi + dev.bf16_value(d.shrui(fx.Int32(16)))
            out.append((lo, hi))
        return out

    @flyc.jit
    def run(self, row: OwnedRow) -> None:
        """Every layer of the owned row: norm, quantise and all-gather for QKV; add o_proj's sums; norm, quantise
        and all-gather for gate/up; add down's sums. Then the final norm, all-gathered in bf16 into ``h_out``."""
        L, a, yw = self.L, self.args, self.yw
        res = [(self.bf16_at(dev.at(a.x_in, ix.hidden_at(L, row.t_read, 2 * self.pair_of(k)))),
                self.bf16_at(dev.at(a.x_in, ix.hidden_at(L, row.t_read, 2 * self.pair_of(k) + 1))))
               for k in range_constexpr(self.per_thread())]
        for layer in range_constexpr(L.LAYERS):
            tag = ix.tag(self.step, layer)
            if layer > 0:
                res = add(res, self.row_sum4(row, L.Y_RSD, tag - 1, 7))
            self.put_x8(row, self.norm_pairs(res, self.table(layer, L.T_IN_LN)), L.Y_AGX, tag)
            self.gather_x8(row, L.Y_AGX, layer, tag, "x8", "xs", "x8f", 10)
            res = add(res, self.row_sum4(row, L.Y_RSO, tag, 8))
            self.put_x8(row, self.norm_pairs(res, self.table(layer, L.T_POST_LN)), L.Y_AGH, tag)
            self.gather_x8(row, L.Y_AGH, layer, tag, "h8", "hs", "h8f", 11)
        ftag = ix.tag(self.step, L.LAYERS)
        res = add(res, self.row_sum4(row, L.Y_RSD, ftag - 1, 9))
        out = self.norm_pairs(res, a.fin_ln)
        if row.own:
            for k in range_constexpr(self.per_thread()):
                lo, hi = out[k]
                word = dev.at(a.sym, yw + ix.ag_bf_pair(L, L.Y_AGF, row.t_own, self.pair_of(k)))
                dev.st(word, dev.tagged_word(dev.bf16_pair(lo, hi), ftag), I64, 8, release=True)
        for c in range(4):
            t = ix.gathered_row(row.j, c)
            if t < a.n_rows:
                for k in range(self.per_thread()):
                    p = self.pair_of(k)
                    src = self.peer(ix.owner_rank(t))
                    dev.wait_tagged(dev.at(src, yw + ix.ag_bf_tag(L, L.Y_AGF, t, p)), ftag, self.deadline, a.health, 12,
                                    self.bid)
                    word = dev.at(src, yw + ix.ag_bf_pair(L, L.Y_AGF, t, p))
                    dev.st(dev.at(a.h_out, ix.hidden_at(L, t, 2 * p)), dev.ld(word, I32, 4, acquire=True), I32)
