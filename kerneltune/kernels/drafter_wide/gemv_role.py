"""The G blocks ``[0, NG)`` of the drafter megakernel: a layer's GEMVs (QKV, o_proj, gate/up, down) for every
token row, 16 token rows (a tile) at a time, each block owning a slice of the weight rows.

QKV and gate/up write bf16 rows to the scratch for the whole launch; o_proj and down push their partial sums,
as tagged bf16 pairs, to the rank that owns each token row (``norm_role.row_sum4`` adds the four ranks').
Each 16x16 tile is ``mfma_f32_16x16x32_fp8_fp8`` over chunks of 32 bytes a lane (``device.row_chunk``), the
waves' partial tiles summed through LDS (``device.red_store``/``red_sum``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import gpu, range_constexpr

from . import device as dev
from . import indexing as ix
from .block import F32, I32, I64, Block
from .layout import WAVE


class GemvRole(Block):
    """A G block: its layer's GEMV tiles."""

    def weights(self, w_base: Any, w_row: Any, k: int) -> Any:
        """This lane's chunks of the 8-bit weight row ``w_row``. Where they fit (``layout.holds_weights``) they load
        once and stay in registers across the flag wait and every token tile, as the seed holds them (one HBM read a
        step, not one a token tile); else ``gemv`` loads them chunk by chunk for each token tile."""
        L = self.L
        if fx.const_expr(L.holds_weights):
            return [dev.row_chunk(L, w_base, w_row, k, c, self.wave, self.g4) for c in range_constexpr(L.chunks(k))]
        return w_base, w_row, k

    def gemv(self, w: Any, b_chunks: list[Any], b_scales: list[Any], slot: int) -> None:
        """This wave's share of one 16x16 tile (weight rows x token rows) into LDS ``slot``; each chunk's product
        carries the lane's token-row scale of that chunk. ``w``: what ``weights`` returned."""
        acc = fx.Vector.filled(4, 0.0, F32)
        for c in range_constexpr(len(b_chunks)):
            a = w[c] if self.L.holds_weights else dev.row_chunk(self.L, *w, c, self.wave, self.g4)
            acc = acc + dev.mma_chunk(a, b_chunks[c]) * self.splat(b_scales[c])
        dev.red_store(self.L, self.pool, slot, acc, self.wave, self.lane)

    def rows8(self, base: Any, scales: Any, t: Any, k: int) -> tuple[list[Any], list[Any]]:
        """Token tile ``t``'s 8-bit rows (all-gathered by the N blocks) and their scales, as MFMA operands."""
        row = ix.tile_row(t, self.l16, self.args.n_rows)
        s = dev.ld(dev.at(scales, ix.scale_at(row)), F32)
        chunks = [dev.row_chunk(self.L, base, row, k, c, self.wave, self.g4) for c in range_constexpr(self.L.chunks(k))]
        return chunks, [s] * self.L.chunks(k)

    def a8_rows(self, layer: Any, t: Any) -> tuple[list[Any], list[Any]]:
        """Attention rows: one scale per head quarter; a wave's chunk lies inside one quarter."""
        L, o_in = self.L, self.L.model.o_in
        row = ix.tile_row(t, self.l16, self.args.n_rows)
        chunks, scales = [], []
        for c in range_constexpr(L.chunks(o_in)):
            chunks.append(dev.row_chunk(L, self.sc(layer, "a8"), row, o_in, c, self.wave, self.g4))
            quarter = ix.k_quarter(L, c, self.wave, o_in)
            scales.append(dev.ld(dev.at(self.args.scratch, ix.a8_scale_at(L, layer, row, quarter)), F32))
        return chunks, scales

    def act_rows(self, layer: Any, t: Any) -> tuple[list[Any], list[Any]]:
        """The tile's bf16 act rows, quantised as they are read, as the seed's: each chunk (128 aligned values of
        a token row, held by its 4 lane groups: ``indexing.CHUNK_K``) with its own amax, found by two shuffles,
        so no pass over the whole row comes first."""
        L, inter, f8_max = self.L, self.L.model.intermediate, F32(self.f8_max)
        act = self.sc(layer, "act")
        row = ix.tile_row(t, self.l16, self.args.n_rows)
        chunks, scales = [], []
        for c in range_constexpr(L.chunks(inter)):
            k0 = ix.k_offset(L, c, self.wave, self.g4)
            vals = [fx.generic_load(dev.ptr(dev.at(act, ix.act_at(L, row, 0, k0 + 8 * i)), fx.BFloat16, 16),
                                    dtype=fx.BFloat16, count=8).to(F32) for i in range_constexpr(4)]
            a = F32(0.0)
            for v in vals:
                for j in range_constexpr(8):
                    a = a.maximumf(self.abs_f(v[j]))
            a = a.maximumf(a.shuffle_xor(I32(16), I32(WAVE)))  # the token row's other lane groups
            a = a.maximumf(a.shuffle_xor(I32(32), I32(WAVE)))
            amax = a.maximumf(F32(1e-12))
            inv = fx.Vector.from_elements([f8_max / amax], dtype=F32).broadcast_to(8)
            chunks.append([self.f8_word(v * inv) for v in vals])
            scales.append(amax / f8_max)
        return chunks, scales

    def tile_value(self, slot: int, r: Any, col: Any, w_scales: Any, w_row0: Any) -> Any:
        """Element (weight row ``r``, token column ``col``) of the reduced tile in ``slot``, times its row's scale."""
        return dev.red_sum(self.L, self.pool, slot, r, col) * dev.ld(dev.at(w_scales, ix.scale_at(w_row0 + r)), F32)

    @flyc.jit
    def push_pairs(self, t: Any, c0: Any, w_scales: Any, region: int, tag: Any) -> None:
        """A reduced 16x16 tile's token rows as tagged bf16 pairs to each row's owner."""
        tok, p = self.tid // 8, self.tid % 8
        row = 16 * t + tok
        if (self.tid < 128) & (row < self.args.n_rows):
            lo = self.tile_value(0, 2 * p, tok, w_scales, c0)
            hi = self.tile_value(0, 2 * p + 1, tok, w_scales, c0)
            owner = self.peer(ix.owner_rank(row))
            addr = dev.at(owner, self.yw + ix.rs_pair(self.L, region, self.args.rank, row, c0, p))
            dev.st(addr, dev.tagged_word(dev.bf16_pair(lo, hi), tag), I64, 8, release=True)

    @flyc.jit
    def to_owners(self, w_base: Any, w_scales: Any, k: int, rows: int, operands: Callable[[Any], tuple],
                  region: int, tag: Any, wait: Callable[[], None]) -> None:
        """o_proj and down: this block's ``rows`` output columns of every token row, as partial sums pushed to each
        token row's owner; the first weight tile loads before ``wait``."""
        for tt in range_constexpr(rows // 16):
            c0 = self.bid * rows + 16 * tt
            held = self.weights(w_base, c0 + self.l16, k)
            if fx.const_expr(tt == 0):
                wait()
            for t in range(ix.tile_count(self.args.n_rows)):
                chunks, scales = operands(t)
                self.gemv(held, chunks, scales, 0)
                gpu.barrier()
                self.push_pairs(t, c0, w_scales, region, tag)
                gpu.barrier()

    @flyc.jit
    def run(self, layer: Any, tag: Any) -> None:
        """One layer of a G block: QKV, then o_proj after the attention, gate/up after the post-attention norm,
        down after every block's act rows; each publishes its flag for the blocks that wait on it."""
        L, a, tid, bid, l16 = self.L, self.args, self.tid, self.bid, self.l16
        hidden, inter, n_rows = L.model.hidden, L.model.intermediate, a.n_rows
        nt = ix.tile_count(n_rows)
        em, en = (tid // 16) % 16, tid % 16

        def weights_of(name: str, w: Any, s: Any) -> tuple[Any, Any]:
            return dev.at(w, ix.weight_layer_at(L, name, layer)), dev.at(s, ix.scale_layer_at(L, name, layer))

        qkv_w, qkv_s = weights_of("qkv", a.w_qkv, a.s_qkv)
        o_w, o_s = weights_of("o", a.w_o, a.s_o)
        gu_w, gu_s = weights_of("gu", a.w_gu, a.s_gu)
        d_w, d_s = weights_of("d", a.w_d, a.s_d)

        wq = self.weights(qkv_w, bid * L.QKV_R + ix.smin(l16, L.QKV_R - 1), hidden)
        self.wait_flags(self.flag("x8f", 0), n_rows, tag, 1)
        for t in range(nt):
            chunks, scales = self.rows8(self.sc(layer, "x8"), self.sc(layer, "xs"), t, hidden)
            self.gemv(wq, chunks, scales, 0)
            gpu.barrier()
            row = 16 * t + en
            if (tid < 256) & (em < L.QKV_R) & (row < n_rows):
                self.st_bf16(dev.at(self.sc(layer, "qkv"), ix.qkv_at(L, row, bid, em)),
                          self.tile_value(0, em, en, qkv_s, bid * L.QKV_R))
            gpu.barrier()
        self.publish("qkvf", bid, tag)

        self.to_owners(o_w, o_s, L.model.o_in, L.O_R, lambda t: self.a8_rows(layer, t), L.Y_RSO, tag,
                  lambda: self.wait_flags(self.flag("attf", 0), 4 * n_rows, tag, 2))

        g0 = bid * L.GU_R
        w_gate = self.weights(gu_w, g0 + ix.smin(l16, L.GU_R - 1), hidden)
        w_up = self.weights(gu_w, L.IR + g0 + ix.smin(l16, L.GU_R - 1), hidden)
        self.wait_flags(self.flag("h8f", 0), n_rows, tag, 3)
        for t in range(nt):
            chunks, scales = self.rows8(self.sc(layer, "h8"), self.sc(layer, "hs"), t, hidden)
            self.gemv(w_gate, chunks, scales, 0)
            self.gemv(w_up, chunks, scales, 1)
            gpu.barrier()
            row = 16 * t + en
            if (tid < 256) & (em < L.GU_R) & (row < n_rows):
                g = dev.bf16_value(dev.bf16_bits(self.tile_value(0, em, en, gu_s, g0))).minimumf(F32(7.0))
                u = dev.bf16_value(dev.bf16_bits(self.tile_value(1, em, en, gu_s, L.IR + g0)))
                u = u.maximumf(F32(-7.0)).minimumf(F32(7.0))
                act = g / (F32(1.0) + fx.exp(g * F32(-1.702))) * (u + F32(1.0))
                self.st_bf16(dev.at(self.sc(layer, "act"), ix.act_at(L, row, bid, em)), act)
            gpu.barrier()
        self.publish("actf", bid, tag)

        self.to_owners(d_w, d_s, inter, L.D_R, lambda t: self.act_rows(layer, t), L.Y_RSD, tag,
                  lambda: self.wait_flags(self.flag("actf", 0), L.NG, tag, 4))
