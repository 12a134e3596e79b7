"""The L blocks' attention chunk, as the seed designs it: an L block takes one chunk (``W_NA // requests``
blocks) of its request's sliding window (``seq_lens`` gives the request's length) and streams its 16-key paged
blocks, newest first, through two LDS tile pairs (K row-major, V transposed; cached keys through the page table,
this step's from LDS staging rows); block it + 2 loads into registers while block it is consumed. Each wave
holds one token row's 16 heads: S^T = K Q^T and O^T = V^T P^T on ``mfma_f32_16x16x16bf16_1k`` (q, K, V and P in
bf16), an online softmax in float32 between them, interior blocks unmasked and edge blocks (window edge, paging
edge, this step's causal keys) masked. The chunk's partial (max, sum, output) goes to the scratch for the merge
tasks (``merge_role.py``).
"""

from __future__ import annotations

from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import gpu, range_constexpr, rocdl
from flydsl.expr.typing import T

from . import device as dev
from . import indexing as ix
from .block import F32, I32, Block
from .layout import WAVE, DrafterLayout
from .merge_role import MergeRole
from .reference import Dims


def pieces_total(L: DrafterLayout) -> int:
    """8-bf16 pieces of a block's K and V."""
    return 2 * L.BLOCK * L.model.head_dim // 8


def fill_pieces(L: DrafterLayout) -> int:
    """Pieces a thread loads of one block (threads past the last repeat it)."""
    return -(-pieces_total(L) // L.threads)


class AttentionRole(Block):
    """An L block's attention chunk."""

    def head_vec(self, row: Any, col0: Any, layer: Any, norm_w: Any = None) -> tuple:
        """Lane's dims (lane, lane + 64) of one head of a qkv row: raw (v), or RMSNormed with ``norm_w`` and rotated
        at the row's position (q, k)."""
        L, lane, hd = self.L, self.lane, self.L.model.head_dim
        qkv = self.sc(layer, "qkv")
        x0 = self.bf16_at(dev.at(qkv, ix.qkv_at(L, row, 0, col0 + lane)))
        x1 = self.bf16_at(dev.at(qkv, ix.qkv_at(L, row, 0, col0 + lane + WAVE)))
        if fx.const_expr(norm_w is None):
            return x0, x1
        rstd = fx.rsqrt(self.wave_sum(x0 * x0 + x1 * x1) / F32(float(hd)) + F32(Dims().eps))
        x0 = x0 * rstd * self.bf16_at(dev.at(norm_w, ix.bf16_at(lane)))
        x1 = x1 * rstd * self.bf16_at(dev.at(norm_w, ix.bf16_at(lane + WAVE)))
        cos = dev.ld(dev.at(self.args.cos_sin, ix.rope_at(L, row, 0, lane)), F32)
        sin = dev.ld(dev.at(self.args.cos_sin, ix.rope_at(L, row, 1, lane)), F32)
        return x0 * cos - x1 * sin, x0 * sin + x1 * cos

    def lds16(self, i: Any) -> Any:
        """Four consecutive bf16 of the pool (element ``i``, 8-byte aligned): one MFMA operand."""
        return fx.ptr_load(self.pool16 + i, result_type=fx.Vector.make_type(4, fx.Int16))

    def lds16_put(self, i: Any, bits: Any) -> None:
        fx.ptr_store(fx.Vector.from_elements([fx.Int16(bits)], dtype=fx.Int16), self.pool16 + i)

    @staticmethod
    def bf16x4(v: list[Any]) -> Any:
        """Four float32 -> their bf16 as the Int16 x 4 operand of ``mfma_f32_16x16x16bf16_1k``."""
        words = [dev.bf16_pair(v[0], v[1]), dev.bf16_pair(v[2], v[3])]
        return fx.Vector.from_elements(words, dtype=I32).bitcast(fx.Int16)

    def q_operand(self, row: Any, layer: Any, norm_w: Any) -> list[Any]:
        """B operand of S^T = K Q^T for token ``row``: lane (g4, l16) holds dims 16 ks + 4 g4 .. + 3 of head l16 for
        each of the 8 K-steps ks, RMSNormed over the head (the 4 lanes of a head sum their squares) and rotated (dims
        d and d + 64 are K-steps ks and ks + 4 of the same lane)."""
        L, g4, l16, hd = self.L, self.g4, self.l16, self.L.model.head_dim
        qkv = self.sc(layer, "qkv")
        x = []
        for ks in range_constexpr(hd // 16):
            d0 = 16 * ks + 4 * g4
            v = fx.generic_load(dev.ptr(dev.at(qkv, ix.qkv_at(L, row, 0, l16 * hd + d0)), fx.BFloat16, 8),
                                dtype=fx.BFloat16, count=4).to(F32)
            x.append([v[j] for j in range_constexpr(4)])
        ss = F32(0.0)
        for ks in range_constexpr(hd // 16):
            for j in range_constexpr(4):
                ss = ss + x[ks][j] * x[ks][j]
        ss = ss + ss.shuffle_xor(I32(16), I32(WAVE))
        ss = ss + ss.shuffle_xor(I32(32), I32(WAVE))
        rstd = fx.rsqrt(ss / F32(float(hd)) + F32(Dims().eps))
        n = [[x[ks][j] * rstd * self.bf16_at(dev.at(norm_w, ix.bf16_at(16 * ks + 4 * g4 + j)))
              for j in range_constexpr(4)]
             for ks in range_constexpr(hd // 16)]
        half = hd // 32  # K-steps per rotated half
        out = []
        for ks in range_constexpr(hd // 16):
            lo, hi = ks % half, ks % half + half
            vals = []
            for j in range_constexpr(4):
                d = 16 * lo + 4 * g4 + j
                cos = dev.ld(dev.at(self.args.cos_sin, ix.rope_at(L, row, 0, d)), F32)
                sin = dev.ld(dev.at(self.args.cos_sin, ix.rope_at(L, row, 1, d)), F32)
                vals.append(n[lo][j] * cos - n[hi][j] * sin if ks < half else n[lo][j] * sin + n[hi][j] * cos)
            out.append(self.bf16x4(vals))
        return out

    @flyc.jit
    def stage_rows(self, r: Any, layer: Any, kn: Any, cache: Any, nblk: Any, write_cache: Any) -> None:
        """This step's new keys (RMSNormed, rotated) and values of request ``r`` as bf16 in the LDS staging rows; the
        chunk of the newest blocks also writes them to their cache slots."""
        L, lane, hd, qh = self.L, self.lane, self.L.model.head_dim, self.L.model.q_heads
        for i in range(self.wave, L.QPR, L.waves):
            row = r * L.QPR + i
            k0, k1 = self.head_vec(row, qh * hd, layer, kn)
            v0, v1 = self.head_vec(row, (qh + 1) * hd, layer)
            for value, (x0, x1) in ((0, (k0, k1)), (1, (v0, v1))):
                self.lds16_put(ix.staged(L, i, value, lane), dev.bf16_bits(x0))
                self.lds16_put(ix.staged(L, i, value, lane + WAVE), dev.bf16_bits(x1))
            if write_cache:
                slot = dev.ld(dev.at(self.args.slots, ix.slot_at(row)), I32)
                for value, (x0, x1) in ((0, (k0, k1)), (1, (v0, v1))):
                    self.st_bf16(dev.at(cache, ix.cache_at(L, slot, nblk, value, lane)), x0)
                    self.st_bf16(dev.at(cache, ix.cache_at(L, slot, nblk, value, lane + WAVE)), x1)

    def piece_of(self, e: int) -> tuple[Any, Any, Any]:
        """Thread's piece ``e``: (K 0 or V 1, key in the block, first dim / 8)."""
        L, hd = self.L, self.L.model.head_dim
        piece = ix.smin(self.tid + e * L.threads, pieces_total(L) - 1)
        return piece // (L.BLOCK * hd // 8), (piece // (hd // 8)) % L.BLOCK, piece % (hd // 8)

    def fill_cached(self, r: Any, blk: Any, lo: Any, hi: Any, cache: Any, nblk: Any) -> list[Any]:
        """This thread's pieces (8 bf16 as 4 Int32) of block ``blk``'s K and V as the cache holds them, through the
        page table (keys clamped into ``[lo, hi]``, so every read is of a mapped page). They do not depend on this
        step's qkv, so the chunk's first two blocks load before its wait."""
        L = self.L
        out = []
        for e in range_constexpr(fill_pieces(L)):
            value, kk, d8 = self.piece_of(e)
            held = ix.smin(ix.smax(blk * L.BLOCK + kk, lo), hi)
            page = dev.ld(dev.at(self.args.block_table, ix.page_at(L, r, self.args.bt_width, held)), I32)
            out.append(fx.generic_load(dev.ptr(dev.at(cache, ix.cache_at(L, ix.page_slot(L, page, held), nblk, value,
                                                                          8 * d8)), I32, 16), dtype=I32, count=4))
        return out

    def fill_fresh(self, cached: list[Any], blk: Any, lo: Any, hi: Any, p_first: Any) -> list[Any]:
        """The pieces as the tiles take them: ``cached`` (``fill_cached``) for the keys before this step's,
        this step's keys from the staging rows, zeros outside ``[lo, hi]`` (masked, and never NaN under a zero
        weight)."""
        L = self.L
        out = []
        for e in range_constexpr(fill_pieces(L)):
            value, kk, d8 = self.piece_of(e)
            key = blk * L.BLOCK + kk
            new = fx.ptr_load(self.pool16 + ix.staged(L, ix.smin(ix.smax(key - p_first, 0), L.QPR - 1), value, 8 * d8),
                              result_type=fx.Vector.make_type(8, fx.Int16)).bitcast(I32)
            inside = (key >= lo) & (key <= hi)
            fresh = key >= p_first
            out.append([inside.select(fresh.select(new[w], cached[e][w]), I32(0)) for w in range_constexpr(4)])
        return out

    def fill_load(self, r: Any, blk: Any, lo: Any, hi: Any, p_first: Any, cache: Any, nblk: Any) -> list[Any]:
        """Block ``blk``'s pieces, cached and fresh (``fill_cached``, ``fill_fresh``)."""
        return self.fill_fresh(self.fill_cached(r, blk, lo, hi, cache, nblk), blk, lo, hi, p_first)

    @flyc.jit
    def fill_store(self, pair: Any, pieces: list[Any]) -> None:
        """The pieces into tile pair ``pair``: K row-major (two 8-byte stores: padded rows are 8-byte aligned), V
        transposed."""
        L = self.L
        for e in range_constexpr(fill_pieces(L)):
            value, kk, d8 = self.piece_of(e)
            words = pieces[e]
            if value == 0:
                for h in range_constexpr(2):
                    half = fx.Vector.from_elements(words[2 * h:2 * h + 2], dtype=I32).bitcast(F32)
                    fx.ptr_store(half, self.pool + ix.tile_k_word(L, pair, kk, 8 * d8 + 4 * h))
            else:
                for w in range_constexpr(4):
                    self.lds16_put(ix.tile_v(L, pair, kk, 8 * d8 + 2 * w), words[w])
                    self.lds16_put(ix.tile_v(L, pair, kk, 8 * d8 + 2 * w + 1), words[w].shrui(I32(16)))

    def block_acc(self, pair: Any, blk: Any, q: list[Any], state: tuple, p: Any, lo: Any, hi: Any,
                  masked: bool) -> tuple:
        """One 16-key block into one token row's online softmax over its 16 heads, on MFMA. S^T = K Q^T leaves lane
        (g4, l16) keys 4 g4 + j of head l16, which is the B operand (P^T) of O^T = V^T P^T as it stands: no shuffle
        between the two products. m is the head's max (shuffled over g4), l the lane's share of its sum; o the lane's
        dims 16 dt + 4 g4 + j."""
        L, g4, l16, hd = self.L, self.g4, self.l16, self.L.model.head_dim
        m_run, l_run, o = state
        acc = fx.Vector.filled(4, 0.0, F32)
        for ks in range_constexpr(hd // 16):
            a = self.lds16(ix.tile_k(L, pair, l16, 16 * ks + 4 * g4))
            acc = rocdl.mfma_f32_16x16x16bf16_1k(T.f32x4, [a, q[ks], acc, 0, 0, 0])
        s = []
        for j in range_constexpr(4):
            v = acc[j] * F32(hd ** -0.5)
            if fx.const_expr(masked):
                v = ix.key_seen(L, blk * L.BLOCK + 4 * g4 + j, p, lo, hi).select(v, F32(float("-inf")))
            s.append(v)
        top = s[0].maximumf(s[1]).maximumf(s[2]).maximumf(s[3])
        top = top.maximumf(top.shuffle_xor(I32(16), I32(WAVE)))
        top = top.maximumf(top.shuffle_xor(I32(32), I32(WAVE)))
        m_new = m_run.maximumf(top)
        m_use = (m_new == F32(float("-inf"))).select(F32(0.0), m_new)
        alpha = fx.exp(m_run - m_use)
        pj = [fx.exp(v - m_use) for v in s]
        l_run = l_run * alpha + pj[0] + pj[1] + pj[2] + pj[3]
        pt = self.bf16x4(pj)
        out = []
        for dt in range_constexpr(hd // 16):
            a = self.lds16(ix.tile_v(L, pair, 4 * g4, 16 * dt + l16))
            out.append(rocdl.mfma_f32_16x16x16bf16_1k(T.f32x4, [a, pt, o[dt] * self.splat(alpha), 0, 0, 0]))
        return m_new, l_run, out

    def request_length(self) -> Any:
        """The length of this block's request, from ``seq_lens`` (read once, before the layers)."""
        L, n_rows = self.L, self.args.n_rows
        request = ix.smin((self.bid - L.ATT0) // ix.chunks_per_request(L, n_rows), n_rows // L.QPR - 1)
        return dev.ld(dev.at(self.table(0, L.T_SEQ_LENS), ix.seq_len_at(request)), I32)

    @flyc.jit
    def run(self, layer: Any, tag: Any, seq_len: Any) -> None:
        """This L block's chunk of its request's window, after every G block's qkv rows, then its merge tasks;
        ``seq_len``: the request's length from ``seq_lens``, read once before the layers. A block past the
        launch's chunks has none."""
        L, a, wave, g4, l16, hd = self.L, self.args, self.wave, self.g4, self.l16, self.L.model.head_dim
        waves, n_rows = L.waves, a.n_rows
        tokens_per_wave = -(-L.QPR // waves)  # token rows (16 heads each) one attention wave accumulates
        pidx = self.bid - L.ATT0
        n_req = n_rows // L.QPR
        cpr = ix.chunks_per_request(L, n_rows)
        cache = self.table(layer, L.T_CACHE)
        nblk = I32(self.table(layer, L.T_NBLK))
        qn, kn = self.table(layer, L.T_Q_NORM), self.table(layer, L.T_K_NORM)
        if pidx < cpr * n_req:
            r, c = pidx // cpr, pidx % cpr
            p_first = dev.ld(dev.at(a.positions, ix.position_at(r * L.QPR)), I32)
            p_last = p_first + L.QPR - 1
            lo, hi, b0w, b1w = ix.window(L, p_first, seq_len)
            q0, cnt = ix.chunk(c, b1w - b0w + 1, cpr)
            b_a = b1w - q0  # the chunk's blocks, newest first: b_a, b_a - 1, .., b_a - cnt + 1
            # The first two blocks' cached keys and values load under the wait for this step's qkv, as the seed's.
            first = [self.fill_cached(r, b_a - pair, lo, hi, cache, nblk) for pair in range_constexpr(2)]
            self.wait_flags(self.flag("qkvf", 0), L.NG, tag, 5)
            self.stage_rows(r, layer, kn, cache, nblk, c == 0)
            gpu.barrier()
            for pair in range_constexpr(2):
                if pair < cnt:
                    self.fill_store(pair, self.fill_fresh(first[pair], b_a - pair, lo, hi, p_first))
            gpu.barrier()
            rows = [ix.smin(wave + waves * t, L.QPR - 1) for t in range_constexpr(tokens_per_wave)]
            qs = [self.q_operand(r * L.QPR + i, layer, qn) for i in rows]
            zero = fx.Vector.filled(4, 0.0, F32)
            states = [(F32(float("-inf")), F32(0.0), [zero] * (hd // 16)) for _ in range_constexpr(tokens_per_wave)]
            # Block it in tile pair it % 2; block it + 2's pieces load into registers while block it is consumed, then
            # refill the pair it used. Interior blocks run unmasked, edge blocks masked.
            for it in range(0, cnt):
                pair = it % 2
                blk = b_a - it
                ahead = self.fill_load(r, blk - 2, lo, hi, p_first, cache, nblk)
                inner = ix.interior(L, blk, p_first, p_last, lo, hi)
                for t in range_constexpr(tokens_per_wave):
                    p = p_first + rows[t]
                    state = states[t]
                    if inner:
                        state = self.block_acc(pair, blk, qs[t], state, p, lo, hi, False)
                    else:
                        state = self.block_acc(pair, blk, qs[t], state, p, lo, hi, True)
                    states[t] = state
                gpu.barrier()
                if it + 2 < cnt:
                    self.fill_store(pair, ahead)
                gpu.barrier()
            for t in range_constexpr(tokens_per_wave):
                m_run, l_run, o = states[t]
                l_run = l_run + l_run.shuffle_xor(I32(16), I32(WAVE))
                l_run = l_run + l_run.shuffle_xor(I32(32), I32(WAVE))
                if wave + waves * t < L.QPR:
                    if g4 == 0:
                        dev.st(dev.at(a.scratch, ix.partial_at(L, layer, pidx, rows[t], l16)), m_run, F32)
                        dev.st(dev.at(a.scratch, ix.partial_l(L, layer, pidx, rows[t], l16)), l_run, F32)
                    for dt in range_constexpr(hd // 16):
                        for j in range_constexpr(4):
                            dim = 16 * dt + 4 * g4 + j
                            dev.st(dev.at(a.scratch, ix.partial_o(L, layer, pidx, rows[t], l16, dim)), o[dt][j], F32)
            self.publish("apf", pidx, tag)
        MergeRole.of(self).run(layer, tag, pidx, cpr)
