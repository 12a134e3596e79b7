"""The MiniMax drafter "wide" megakernel for one TP4 rank (FlyDSL, gfx942 / gfx950).

One persistent launch of ``layout.BLOCKS`` blocks runs a whole draft step. Blocks take roles by
id, as in the seed and as ``emulation.py`` runs them: G blocks ``[0, NG)`` own GEMV rows (QKV,
o_proj, gate/up, down) for every token row; L blocks ``[ATT0, NORM0)`` own one attention chunk
of a request, then merge tasks; N blocks ``[NORM0, BLOCKS)`` own one token row per rank (the
residual, every RMSNorm and 8-bit quantisation) and the all-gathers. Blocks hand work on through
tagged flag words in global memory and tagged words in the ranks' symmetric peer regions; every
address comes from ``indexing.py``, the functions the emulation runs on integers. A wait that
passes its deadline writes the health buffer and lets the launch end.

Numerics (what ``numerics.Formats`` emulates; checked against the float64 model within
``numerics.error_bound``): 8-bit weights and activations with float32 scales into
``mfma_f32_16x16x32_fp8_fp8`` (float32 accumulation); qkv, act, partial sums, the K/V cache and the
norm weights as bf16; the residual and every softmax in float32. The attention output is quantised
per row and head quarter (one merge task's heads, ``indexing.a8_scale_at``), finer than
``reference.forward_tp4``'s per-row scale.

Attention, as the seed designs it: an L block takes one chunk (``W_NA // requests`` blocks) of its
request's sliding window (``seq_lens`` gives the request's length) and streams its 16-key paged blocks,
newest first, through two LDS tile pairs (K row-major, V transposed; cached keys through the page
table, this step's from LDS staging rows); block it + 2 loads into registers while block it is consumed.
Each wave holds one token row's 16 heads: S^T = K Q^T and O^T = V^T P^T on ``mfma_f32_16x16x16bf16_1k``
(q, K, V and P in bf16), an online softmax in float32 between them, interior blocks unmasked and edge
blocks (window edge, paging edge, this step's causal keys) masked.
"""


from typing import Any

from . import indexing as ix
from .layout import MAX_ROWS, WAVE, DrafterLayout

# The launcher's parameters as the offline compile describes them: 21 addresses, then rank,
# the block table's width and the launch's row count. Every pointer argument is loaded at entry and held
# in SGPRs through every role, so the step's ``seq_lens`` travels in the pointer table and the 4 ranks'
# symmetric regions in one device array (``peers``): with them as arguments the MFMA attention's extra
# scalars cost 3-6 SGPR spills.
KERNEL_ARG_SPEC = [["i64", None]] * 21 + [["i32", None]] * 3


def build_wide_for(arch: str, ng: int, threads: int, w_na: int, qpr: int, layers: int = 1,
                   model: dict[str, int] | None = None):
    """``build_wide`` from JSON-friendly arguments (the offline compile's builder); ``model``: ``ModelDims``
    fields other than ``layers`` (the interpreter's small model)."""
    from .layout import ModelDims

    dims = ModelDims(layers=layers, **(model or {}))
    return build_wide(DrafterLayout(ng=ng, threads=threads, w_na=w_na, qpr=qpr, model=dims), arch)


def build_wide(layout: DrafterLayout, arch: str, yw: int = 0, wait_ticks: int = 1_000_000_000):
    """The ``@flyc.jit`` launcher of the wide drafter kernel for one TP4 rank.

    ``yw``: the byte offset of the rank's symmetric regions in the peer buffer; ``wait_ticks``:
    how long (``s_memrealtime`` ticks) a wait may take before it reports a miss."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import gpu, range_constexpr, rocdl
    from flydsl.expr.typing import T

    from . import device as dev
    from .reference import F8_MAX, Dims

    if arch not in F8_MAX:
        raise ValueError(f"arch: {arch!r} is not one of {sorted(F8_MAX)}")
    f8_max = F8_MAX[arch]  # the reference's 8-bit format of the arch: what v_cvt_pk_fp8_f32 produces there
    L, m = layout, layout.model
    waves, threads = L.waves, L.threads
    hidden, o_in, inter, hd, qh = m.hidden, m.o_in, m.intermediate, m.head_dim, m.q_heads
    I32, I64, F32 = fx.Int32, fx.Int64, fx.Float32
    sm_scale = hd ** -0.5
    eps = Dims().eps
    if hd != 2 * WAVE:
        raise ValueError(f"head_dim {hd}: the attention maps one head onto one wave of {WAVE} lanes x 2")
    if L.ROW_PAIRS % threads:
        raise ValueError(f"threads {threads} must divide a row's {L.ROW_PAIRS} bf16 pairs")
    per_thread = L.ROW_PAIRS // threads
    hold = L.holds_weights  # weights in registers across the token tiles where they fit (``HELD_CHUNKS``)
    if ix.amax_word(L, 16) > ix.reduce_word(L, 0):  # the GEMV slots, 16 act row amaxes, the reductions' words
        raise ValueError(f"LDS pool of {L.pool_words} words cannot hold {ix.amax_word(L, 0)} + 16 + {waves}")
    most_flags = max(L.NG, 4 * MAX_ROWS, L.W_NA)
    heads_per_task = qh // 4
    tokens_per_wave = -(-L.QPR // waves)  # token rows (16 heads each) one attention wave accumulates
    if L.BLOCK != 16 or qh != 16:
        raise ValueError(f"KV block {L.BLOCK}, {qh} heads: the attention's MFMA tile is 16 keys x 16 heads")

    @fx.struct
    class Smem:
        pool: fx.Array[fx.Float32, L.pool_words, 16]

    @flyc.kernel(name=f"drafter_wide_{arch}", known_block_size=[threads, 1, 1])
    def drafter_wide(x_in: I64, h_out: I64, tab: I64, w_qkv: I64, s_qkv: I64, w_o: I64, s_o: I64, w_gu: I64,
                     s_gu: I64, w_d: I64, s_d: I64, fin_ln: I64, cos_sin: I64, block_table: I64, positions: I64,
                     slots: I64, scratch: I64, sym: I64, peers: I64, step: I64, health: I64, rank: I32,
                     bt_width: I32, n_rows: I32):
        tid = I32(fx.thread_idx.x)
        bid = I32(fx.block_idx.x)
        lane = tid % WAVE
        wave = tid // WAVE
        g4 = lane // 16
        l16 = lane % 16
        pool_ptr = fx.SharedAllocator().allocate(Smem).peek().pool.ptr
        pool = fx.recast_iter(F32, pool_ptr)
        pool16 = fx.recast_iter(fx.Int16, pool_ptr)  # the attention's bf16 tiles and staged rows
        step_ = dev.ld(step, I32)
        deadline = dev.realtime() + I64(wait_ticks)

        # ------------------------------------------------------------ shared helpers
        def flag(name: str, index: Any) -> Any:
            return dev.at(scratch, ix.flag_word(L, name, index))

        def sc(layer: Any, name: str) -> Any:
            return dev.at(scratch, ix.scratch_at(L, layer, name))

        def peer(r: Any) -> Any:
            """Rank ``r``'s symmetric region (``peers``: 4 addresses)."""
            return dev.ld(dev.at(peers, ix.peer_at(r)), I64, 8)

        def table(layer: Any, slot: int) -> Any:
            return dev.ld(dev.at(tab, ix.table_at(L, layer, slot)), I64, 8)

        def lds(i: Any) -> Any:
            return fx.ptr_load(pool + i, result_type=fx.Vector.make_type(1, F32))[0]

        def lds_put(i: Any, v: Any) -> None:
            fx.ptr_store(fx.Vector.from_elements([v], dtype=F32), pool + i)

        def wave_sum(v: Any) -> Any:
            for k in range_constexpr(6):
                v = v + v.shuffle_xor(I32(32 >> k), I32(WAVE))
            return v

        def wave_max(v: Any) -> Any:
            for k in range_constexpr(6):
                v = v.maximumf(v.shuffle_xor(I32(32 >> k), I32(WAVE)))
            return v

        def block_reduce(v: Any, is_max: bool) -> Any:
            v = wave_max(v) if is_max else wave_sum(v)
            gpu.barrier()
            if lane == 0:
                lds_put(ix.reduce_word(L, wave), v)
            gpu.barrier()
            total = lds(ix.reduce_word(L, 0))
            for w in range_constexpr(1, waves):
                total = total.maximumf(lds(ix.reduce_word(L, w))) if is_max else total + lds(ix.reduce_word(L, w))
            return total

        def bf16_at(addr: Any) -> Any:
            return dev.bf16_value(I32(dev.ld(addr, fx.Int16, 2)) & 0xFFFF)

        def st_bf16(addr: Any, v: Any) -> None:
            dev.st(addr, fx.Int16(dev.bf16_bits(v)), fx.Int16, 2)

        def f8_pair(lo: Any, hi: Any) -> Any:
            """Two float32 (already divided by their scale) -> their 8-bit codes in the low 16 bits of an
            Int32, ``lo`` first: ``v_cvt_pk_fp8_f32`` gives e4m3fnuz on gfx942 and e4m3fn on gfx950."""
            return I32(rocdl.cvt_pk_fp8_f32(T.i32, lo, hi, I32(0), False)) & 0xFFFF

        def f8_word(v: Any) -> Any:
            """Eight float32 -> one Int64 of 8-bit codes (an MFMA operand)."""
            lo = rocdl.cvt_pk_fp8_f32(T.i32, v[0], v[1], I32(0), False)
            lo = rocdl.cvt_pk_fp8_f32(T.i32, v[2], v[3], lo, True)
            hi = rocdl.cvt_pk_fp8_f32(T.i32, v[4], v[5], I32(0), False)
            hi = rocdl.cvt_pk_fp8_f32(T.i32, v[6], v[7], hi, True)
            return (I64(hi) << 32) | I64(fx.Uint32(lo))

        def splat(v: Any) -> Any:
            return fx.Vector.from_elements([v], dtype=F32).broadcast_to(4)

        # ------------------------------------------------------------ G: GEMV tiles
        def weights(w_base: Any, w_row: Any, k: int) -> Any:
            """This lane's chunks of the 8-bit weight row ``w_row``. Where they fit (``hold``) they load once
            and stay in registers across the flag wait and every token tile, as the seed holds them (one HBM
            read a step, not one a token tile); else ``gemv`` loads them chunk by chunk for each token tile."""
            if fx.const_expr(hold):
                return [dev.row_chunk(L, w_base, w_row, k, c, wave, g4) for c in range_constexpr(L.chunks(k))]
            return w_base, w_row, k

        def gemv(w: Any, b_chunks: list[Any], b_scales: list[Any], slot: int) -> None:
            """This wave's share of one 16x16 tile (weight rows x token rows) into LDS ``slot``; each
            chunk's product carries the lane's token-row scale of that chunk."""
            acc = fx.Vector.filled(4, 0.0, F32)
            for c in range_constexpr(len(b_chunks)):
                if fx.const_expr(hold):  # noqa: SIM108 (a trace-time choice, as the kernel writes them)
                    a = w[c]
                else:
                    a = dev.row_chunk(L, *w, c, wave, g4)
                acc = acc + dev.mma_chunk(a, b_chunks[c]) * splat(b_scales[c])
            dev.red_store(L, pool, slot, acc, wave, lane)

        def rows8(base: Any, scales: Any, t: Any, k: int) -> tuple[list[Any], list[Any]]:
            row = ix.tile_row(t, l16, n_rows)
            s = dev.ld(dev.at(scales, ix.scale_at(row)), F32)
            chunks = [dev.row_chunk(L, base, row, k, c, wave, g4) for c in range_constexpr(L.chunks(k))]
            return chunks, [s] * L.chunks(k)

        def a8_rows(layer: Any, t: Any) -> tuple[list[Any], list[Any]]:
            """Attention rows: one scale per head quarter; a wave's chunk lies inside one quarter."""
            row = ix.tile_row(t, l16, n_rows)
            chunks, scales = [], []
            for c in range_constexpr(L.chunks(o_in)):
                chunks.append(dev.row_chunk(L, sc(layer, "a8"), row, o_in, c, wave, g4))
                quarter = ix.k_quarter(L, c, wave, o_in)
                scales.append(dev.ld(dev.at(scratch, ix.a8_scale_at(L, layer, row, quarter)), F32))
            return chunks, scales

        def act_rows(layer: Any, t: Any) -> tuple[list[Any], list[Any]]:
            """The tile's bf16 act rows, quantised here with each row's amax (found first)."""
            act = sc(layer, "act")
            for i in range(wave, 16, waves):
                row = ix.tile_row(t, i, n_rows)
                a = F32(0.0)
                for k in range_constexpr(inter // WAVE):
                    a = a.maximumf(abs_f(bf16_at(dev.at(act, ix.act_at(L, row, 0, k * WAVE + lane)))))
                a = wave_max(a)
                if lane == 0:
                    lds_put(ix.amax_word(L, i), a)
            gpu.barrier()
            amax = lds(ix.amax_word(L, l16)).maximumf(F32(1e-12))
            inv = F32(f8_max) / amax
            row = ix.tile_row(t, l16, n_rows)
            chunks = []
            for c in range_constexpr(L.chunks(inter)):
                k0 = ix.k_offset(L, c, wave, g4)
                words = []
                for i in range_constexpr(4):
                    v = fx.generic_load(dev.ptr(dev.at(act, ix.act_at(L, row, 0, k0 + 8 * i)), fx.BFloat16, 16),
                                        dtype=fx.BFloat16, count=8)
                    words.append(f8_word(v.to(F32) * fx.Vector.from_elements([inv], dtype=F32).broadcast_to(8)))
                chunks.append(words)
            return chunks, [amax / F32(f8_max)] * L.chunks(inter)

        def abs_f(v: Any) -> Any:
            return v.maximumf(-v)

        def tile_value(slot: int, r: Any, col: Any, w_scales: Any, w_row0: Any) -> Any:
            return dev.red_sum(L, pool, slot, r, col) * dev.ld(dev.at(w_scales, ix.scale_at(w_row0 + r)), F32)

        def push_pairs(t: Any, c0: Any, w_scales: Any, region: int, tag: Any) -> None:
            """A reduced 16x16 tile's token rows as tagged bf16 pairs to each row's owner."""
            tok, p = tid // 8, tid % 8
            row = 16 * t + tok
            if (tid < 128) & (row < n_rows):
                lo = tile_value(0, 2 * p, tok, w_scales, c0)
                hi = tile_value(0, 2 * p + 1, tok, w_scales, c0)
                addr = dev.at(peer(ix.owner_rank(row)), yw + ix.rs_pair(L, region, rank, row, c0, p))
                dev.st(addr, dev.tagged_word(dev.bf16_pair(lo, hi), tag), I64, 8, release=True)

        def to_owners(w_base: Any, w_scales: Any, k: int, rows: int, operands: Any, region: int, tag: Any,
                      wait: Any) -> None:
            """o_proj and down: this block's ``rows`` output columns of every token row, as partial
            sums pushed to each token row's owner; the first weight tile loads before ``wait``."""
            for tt in range_constexpr(rows // 16):
                c0 = bid * rows + 16 * tt
                held = weights(w_base, c0 + l16, k)
                if fx.const_expr(tt == 0):
                    wait()
                for t in range(ix.tile_count(n_rows)):
                    b, s = operands(t)
                    gemv(held, b, s, 0)
                    gpu.barrier()
                    push_pairs(t, c0, w_scales, region, tag)
                    gpu.barrier()

        def gemv_role(layer: Any, tag: Any) -> None:
            nt = ix.tile_count(n_rows)
            em, en = (tid // 16) % 16, tid % 16

            def weights_of(name: str, w: Any, s: Any) -> tuple[Any, Any]:
                return dev.at(w, ix.weight_layer_at(L, name, layer)), dev.at(s, ix.scale_layer_at(L, name, layer))

            qkv_w, qkv_s = weights_of("qkv", w_qkv, s_qkv)
            o_w, o_s = weights_of("o", w_o, s_o)
            gu_w, gu_s = weights_of("gu", w_gu, s_gu)
            d_w, d_s = weights_of("d", w_d, s_d)

            wq = weights(qkv_w, bid * L.QKV_R + ix.smin(l16, L.QKV_R - 1), hidden)
            dev.wait_flags(flag("x8f", 0), n_rows, most_flags, tag, tid, threads, deadline, health, 1, bid)
            for t in range(nt):
                b, s = rows8(sc(layer, "x8"), sc(layer, "xs"), t, hidden)
                gemv(wq, b, s, 0)
                gpu.barrier()
                row = 16 * t + en
                if (tid < 256) & (em < L.QKV_R) & (row < n_rows):
                    st_bf16(dev.at(sc(layer, "qkv"), ix.qkv_at(L, row, bid, em)),
                            tile_value(0, em, en, qkv_s, bid * L.QKV_R))
                gpu.barrier()
            dev.publish(flag("qkvf", bid), tag, tid)

            to_owners(o_w, o_s, o_in, L.O_R, lambda t: a8_rows(layer, t), L.Y_RSO, tag, lambda: dev.wait_flags(
                flag("attf", 0), 4 * n_rows, most_flags, tag, tid, threads, deadline, health, 2, bid))

            g0 = bid * L.GU_R
            w_gate = weights(gu_w, g0 + ix.smin(l16, L.GU_R - 1), hidden)
            w_up = weights(gu_w, L.IR + g0 + ix.smin(l16, L.GU_R - 1), hidden)
            dev.wait_flags(flag("h8f", 0), n_rows, most_flags, tag, tid, threads, deadline, health, 3, bid)
            for t in range(nt):
                b, s = rows8(sc(layer, "h8"), sc(layer, "hs"), t, hidden)
                gemv(w_gate, b, s, 0)
                gemv(w_up, b, s, 1)
                gpu.barrier()
                row = 16 * t + en
                if (tid < 256) & (em < L.GU_R) & (row < n_rows):
                    g = dev.bf16_value(dev.bf16_bits(tile_value(0, em, en, gu_s, g0))).minimumf(F32(7.0))
                    u = dev.bf16_value(dev.bf16_bits(tile_value(1, em, en, gu_s, L.IR + g0)))
                    u = u.maximumf(F32(-7.0)).minimumf(F32(7.0))
                    a = g / (F32(1.0) + fx.exp(g * F32(-1.702))) * (u + F32(1.0))
                    st_bf16(dev.at(sc(layer, "act"), ix.act_at(L, row, bid, em)), a)
                gpu.barrier()
            dev.publish(flag("actf", bid), tag, tid)

            to_owners(d_w, d_s, inter, L.D_R, lambda t: act_rows(layer, t), L.Y_RSD, tag, lambda: dev.wait_flags(
                flag("actf", 0), L.NG, most_flags, tag, tid, threads, deadline, health, 4, bid))

        # ------------------------------------------------------------ L: attention and merges
        def head_vec(row: Any, col0: Any, layer: Any, norm_w: Any = None) -> tuple:
            """Lane's dims (lane, lane + 64) of one head of a qkv row: raw (v), or RMSNormed with
            ``norm_w`` and rotated at the row's position (q, k)."""
            qkv = sc(layer, "qkv")
            x0 = bf16_at(dev.at(qkv, ix.qkv_at(L, row, 0, col0 + lane)))
            x1 = bf16_at(dev.at(qkv, ix.qkv_at(L, row, 0, col0 + lane + WAVE)))
            if fx.const_expr(norm_w is None):
                return x0, x1
            rstd = fx.rsqrt(wave_sum(x0 * x0 + x1 * x1) / F32(float(hd)) + F32(eps))
            x0 = x0 * rstd * bf16_at(dev.at(norm_w, ix.bf16_at(lane)))
            x1 = x1 * rstd * bf16_at(dev.at(norm_w, ix.bf16_at(lane + WAVE)))
            cos = dev.ld(dev.at(cos_sin, ix.rope_at(L, row, 0, lane)), F32)
            sin = dev.ld(dev.at(cos_sin, ix.rope_at(L, row, 1, lane)), F32)
            return x0 * cos - x1 * sin, x0 * sin + x1 * cos

        def lds16(i: Any) -> Any:
            """Four consecutive bf16 of the pool (element ``i``, 8-byte aligned): one MFMA operand."""
            return fx.ptr_load(pool16 + i, result_type=fx.Vector.make_type(4, fx.Int16))

        def lds16_put(i: Any, bits: Any) -> None:
            fx.ptr_store(fx.Vector.from_elements([fx.Int16(bits)], dtype=fx.Int16), pool16 + i)

        def bf16x4(v: list[Any]) -> Any:
            """Four float32 -> their bf16 as the Int16 x 4 operand of ``mfma_f32_16x16x16bf16_1k``."""
            words = [dev.bf16_pair(v[0], v[1]), dev.bf16_pair(v[2], v[3])]
            return fx.Vector.from_elements(words, dtype=I32).bitcast(fx.Int16)

        def q_operand(row: Any, layer: Any, norm_w: Any) -> list[Any]:
            """B operand of S^T = K Q^T for token ``row``: lane (g4, l16) holds dims 16 ks + 4 g4 .. + 3 of
            head l16 for each of the 8 K-steps ks, RMSNormed over the head (the 4 lanes of a head sum their
            squares) and rotated (dims d and d + 64 are K-steps ks and ks + 4 of the same lane)."""
            qkv = sc(layer, "qkv")
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
            rstd = fx.rsqrt(ss / F32(float(hd)) + F32(eps))
            n = [[x[ks][j] * rstd * bf16_at(dev.at(norm_w, ix.bf16_at(16 * ks + 4 * g4 + j)))
                  for j in range_constexpr(4)]
                 for ks in range_constexpr(hd // 16)]
            half = hd // 32  # K-steps per rotated half
            out = []
            for ks in range_constexpr(hd // 16):
                lo, hi = ks % half, ks % half + half
                vals = []
                for j in range_constexpr(4):
                    d = 16 * lo + 4 * g4 + j
                    cos = dev.ld(dev.at(cos_sin, ix.rope_at(L, row, 0, d)), F32)
                    sin = dev.ld(dev.at(cos_sin, ix.rope_at(L, row, 1, d)), F32)
                    vals.append(n[lo][j] * cos - n[hi][j] * sin if ks < half else n[lo][j] * sin + n[hi][j] * cos)
                out.append(bf16x4(vals))
            return out

        def stage_rows(r: Any, layer: Any, kn: Any, cache: Any, nblk: Any, write_cache: Any) -> None:
            """This step's new keys (RMSNormed, rotated) and values of request ``r`` as bf16 in the LDS
            staging rows; the chunk of the newest blocks also writes them to their cache slots."""
            for i in range(wave, L.QPR, waves):
                row = r * L.QPR + i
                k0, k1 = head_vec(row, qh * hd, layer, kn)
                v0, v1 = head_vec(row, (qh + 1) * hd, layer)
                for value, (a, b) in ((0, (k0, k1)), (1, (v0, v1))):
                    lds16_put(ix.staged(L, i, value, lane), dev.bf16_bits(a))
                    lds16_put(ix.staged(L, i, value, lane + WAVE), dev.bf16_bits(b))
                if write_cache:
                    slot = dev.ld(dev.at(slots, ix.slot_at(row)), I32)
                    for value, (a, b) in ((0, (k0, k1)), (1, (v0, v1))):
                        st_bf16(dev.at(cache, ix.cache_at(L, slot, nblk, value, lane)), a)
                        st_bf16(dev.at(cache, ix.cache_at(L, slot, nblk, value, lane + WAVE)), b)

        pieces_total = 2 * L.BLOCK * hd // 8  # 8-bf16 pieces of a block's K and V
        fill_pieces = -(-pieces_total // threads)  # per thread (threads past the last repeat it)

        def piece_of(e: int) -> tuple[Any, Any, Any]:
            """Thread's piece ``e``: (K 0 or V 1, key in the block, first dim / 8)."""
            piece = ix.smin(tid + e * threads, pieces_total - 1)
            return piece // (L.BLOCK * hd // 8), (piece // (hd // 8)) % L.BLOCK, piece % (hd // 8)

        def fill_load(r: Any, blk: Any, lo: Any, hi: Any, p_first: Any, cache: Any, nblk: Any) -> list[Any]:
            """This thread's pieces (8 bf16 as 4 Int32) of block ``blk``'s K and V, as the tiles take them:
            cached keys through the page table, this step's keys from the staging rows, zeros outside
            ``[lo, hi]`` (masked, and never NaN under a zero weight)."""
            out = []
            for e in range_constexpr(fill_pieces):
                value, kk, d8 = piece_of(e)
                key = blk * L.BLOCK + kk
                held = ix.smin(ix.smax(key, lo), hi)
                page = dev.ld(dev.at(block_table, ix.page_at(L, r, bt_width, held)), I32)
                cached = fx.generic_load(dev.ptr(dev.at(cache, ix.cache_at(L, ix.page_slot(L, page, held), nblk, value,
                                                                            8 * d8)), I32, 16), dtype=I32, count=4)
                new = fx.ptr_load(pool16 + ix.staged(L, ix.smin(ix.smax(key - p_first, 0), L.QPR - 1), value, 8 * d8),
                                  result_type=fx.Vector.make_type(8, fx.Int16)).bitcast(I32)
                inside = (key >= lo) & (key <= hi)
                fresh = key >= p_first
                out.append([inside.select(fresh.select(new[w], cached[w]), I32(0)) for w in range_constexpr(4)])
            return out

        def fill_store(pair: Any, pieces: list[Any]) -> None:
            """The pieces into tile pair ``pair``: K row-major (two 8-byte stores: padded rows are 8-byte
            aligned), V transposed."""
            for e in range_constexpr(fill_pieces):
                value, kk, d8 = piece_of(e)
                words = pieces[e]
                if value == 0:
                    for h in range_constexpr(2):
                        half = fx.Vector.from_elements(words[2 * h:2 * h + 2], dtype=I32).bitcast(F32)
                        fx.ptr_store(half, pool + ix.tile_k_word(L, pair, kk, 8 * d8 + 4 * h))
                else:
                    for w in range_constexpr(4):
                        lds16_put(ix.tile_v(L, pair, kk, 8 * d8 + 2 * w), words[w])
                        lds16_put(ix.tile_v(L, pair, kk, 8 * d8 + 2 * w + 1), words[w].shrui(I32(16)))

        def block_acc(pair: Any, blk: Any, q: list[Any], state: tuple, p: Any, lo: Any, hi: Any,
                      masked: bool) -> tuple:
            """One 16-key block into one token row's online softmax over its 16 heads, on MFMA. S^T = K Q^T
            leaves lane (g4, l16) keys 4 g4 + j of head l16, which is the B operand (P^T) of O^T = V^T P^T
            as it stands: no shuffle between the two products. m is the head's max (shuffled over g4), l the
            lane's share of its sum; o the lane's dims 16 dt + 4 g4 + j."""
            m_run, l_run, o = state
            acc = fx.Vector.filled(4, 0.0, F32)
            for ks in range_constexpr(hd // 16):
                a = lds16(ix.tile_k(L, pair, l16, 16 * ks + 4 * g4))
                acc = rocdl.mfma_f32_16x16x16bf16_1k(T.f32x4, [a, q[ks], acc, 0, 0, 0])
            s = []
            for j in range_constexpr(4):
                v = acc[j] * F32(sm_scale)
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
            b = bf16x4(pj)
            out = []
            for dt in range_constexpr(hd // 16):
                a = lds16(ix.tile_v(L, pair, 4 * g4, 16 * dt + l16))
                out.append(rocdl.mfma_f32_16x16x16bf16_1k(T.f32x4, [a, b, o[dt] * splat(alpha), 0, 0, 0]))
            return m_new, l_run, out

        def attention_role(layer: Any, tag: Any, seq_len: Any) -> None:
            """``seq_len``: the request's length from ``seq_lens``, read once before the layers."""
            pidx = bid - L.ATT0
            n_req = n_rows // L.QPR
            cpr = ix.chunks_per_request(L, n_rows)
            cache = table(layer, L.T_CACHE)
            nblk = I32(table(layer, L.T_NBLK))
            qn, kn = table(layer, L.T_Q_NORM), table(layer, L.T_K_NORM)
            if pidx < cpr * n_req:
                r, c = pidx // cpr, pidx % cpr
                p_first = dev.ld(dev.at(positions, ix.position_at(r * L.QPR)), I32)
                p_last = p_first + L.QPR - 1
                lo, hi, b0w, b1w = ix.window(L, p_first, seq_len)
                q0, cnt = ix.chunk(c, b1w - b0w + 1, cpr)
                b_a = b1w - q0  # the chunk's blocks, newest first: b_a, b_a - 1, .., b_a - cnt + 1
                dev.wait_flags(flag("qkvf", 0), L.NG, most_flags, tag, tid, threads, deadline, health, 5, bid)
                stage_rows(r, layer, kn, cache, nblk, c == 0)
                gpu.barrier()
                for pair in range_constexpr(2):
                    if pair < cnt:
                        fill_store(pair, fill_load(r, b_a - pair, lo, hi, p_first, cache, nblk))
                gpu.barrier()
                rows = [ix.smin(wave + waves * t, L.QPR - 1) for t in range_constexpr(tokens_per_wave)]
                qs = [q_operand(r * L.QPR + i, layer, qn) for i in rows]
                zero = fx.Vector.filled(4, 0.0, F32)
                states = [(F32(float("-inf")), F32(0.0), [zero] * (hd // 16)) for _ in range_constexpr(tokens_per_wave)]
                # Block it in tile pair it % 2; block it + 2's pieces load into registers while block it is
                # consumed, then refill the pair it used. Interior blocks run unmasked, edge blocks masked.
                for it in range(0, cnt):
                    pair = it % 2
                    blk = b_a - it
                    ahead = fill_load(r, blk - 2, lo, hi, p_first, cache, nblk)
                    inner = ix.interior(L, blk, p_first, p_last, lo, hi)
                    for t in range_constexpr(tokens_per_wave):
                        p = p_first + rows[t]
                        state = states[t]
                        if inner:
                            state = block_acc(pair, blk, qs[t], state, p, lo, hi, False)
                        else:
                            state = block_acc(pair, blk, qs[t], state, p, lo, hi, True)
                        states[t] = state
                    gpu.barrier()
                    if it + 2 < cnt:
                        fill_store(pair, ahead)
                    gpu.barrier()
                for t in range_constexpr(tokens_per_wave):
                    m_run, l_run, o = states[t]
                    l_run = l_run + l_run.shuffle_xor(I32(16), I32(WAVE))
                    l_run = l_run + l_run.shuffle_xor(I32(32), I32(WAVE))
                    if wave + waves * t < L.QPR:
                        if g4 == 0:
                            dev.st(dev.at(scratch, ix.partial_at(L, layer, pidx, rows[t], l16)), m_run, F32)
                            dev.st(dev.at(scratch, ix.partial_l(L, layer, pidx, rows[t], l16)), l_run, F32)
                        for dt in range_constexpr(hd // 16):
                            for j in range_constexpr(4):
                                dim = 16 * dt + 4 * g4 + j
                                dev.st(dev.at(scratch, ix.partial_o(L, layer, pidx, rows[t], l16, dim)), o[dt][j], F32)
                dev.publish(flag("apf", pidx), tag, tid)
            for task in range(pidx, 4 * n_rows, L.W_NA):
                t, hq, r = ix.merge_task(L, task)
                dev.wait_flags(flag("apf", r * cpr), cpr, most_flags, tag, tid, threads, deadline, health, 6, bid)
                h = hq * heads_per_task + ix.smin(wave, heads_per_task - 1)
                i = t - r * L.QPR
                top = F32(float("-inf"))
                for c in range(cpr):
                    top = top.maximumf(dev.ld(dev.at(scratch, ix.partial_at(L, layer, r * cpr + c, i, h)), F32))
                num0, num1, den = F32(0.0), F32(0.0), F32(0.0)
                for c in range(cpr):
                    part = r * cpr + c
                    mc = dev.ld(dev.at(scratch, ix.partial_at(L, layer, part, i, h)), F32)
                    f = (mc == F32(float("-inf"))).select(F32(0.0), fx.exp(mc - top))
                    den = den + f * dev.ld(dev.at(scratch, ix.partial_l(L, layer, part, i, h)), F32)
                    num0 = num0 + f * dev.ld(dev.at(scratch, ix.partial_o(L, layer, part, i, h, lane)), F32)
                    num1 = num1 + f * dev.ld(dev.at(scratch, ix.partial_o(L, layer, part, i, h, lane + WAVE)), F32)
                mine = wave < heads_per_task
                out0, out1 = num0 / den, num1 / den
                amax = block_reduce(mine.select(abs_f(out0).maximumf(abs_f(out1)), F32(0.0)), True)
                amax = amax.maximumf(F32(1e-12))
                inv = F32(f8_max) / amax
                if mine:
                    a8 = sc(layer, "a8")
                    codes = f8_pair(out0 * inv, out1 * inv)
                    dev.st(dev.at(a8, ix.a8_at(L, t, h, lane)), fx.Int8(codes & 0xFF), fx.Int8, 1)
                    dev.st(dev.at(a8, ix.a8_at(L, t, h, lane + WAVE)), fx.Int8(codes.shrui(fx.Int32(8))), fx.Int8, 1)
                if tid == 0:
                    dev.st(dev.at(scratch, ix.a8_scale_at(L, layer, t, hq)), amax / F32(f8_max), F32)
                dev.publish(flag("attf", task), tag, tid)

        # ------------------------------------------------------------ N: row norms, all-gathers
        j = bid - L.NORM0
        t_own = ix.own_row(j, rank)
        own = t_own < n_rows
        t_read = ix.smin(t_own, n_rows - 1)

        def pair_of(k: int) -> Any:
            return tid + k * threads

        def norm_pairs(res: list[Any], w_addr: Any) -> list[Any]:
            ss = F32(0.0)
            for lo, hi in res:
                ss = ss + lo * lo + hi * hi
            rstd = fx.rsqrt(block_reduce(ss, False) / F32(float(hidden)) + F32(eps))
            out = []
            for k in range_constexpr(per_thread):
                p = pair_of(k)
                lo, hi = res[k]
                out.append((lo * rstd * bf16_at(dev.at(w_addr, ix.bf16_at(2 * p))),
                            hi * rstd * bf16_at(dev.at(w_addr, ix.bf16_at(2 * p + 1)))))
            return out

        def put_x8(vals: list[Any], region: int, tag: Any) -> None:
            """The owned row, quantised with its amax, into this rank's all-gather region, then its tag."""
            a = F32(0.0)
            for lo, hi in vals:
                a = a.maximumf(abs_f(lo)).maximumf(abs_f(hi))
            amax = block_reduce(a, True).maximumf(F32(1e-12))
            inv = F32(f8_max) / amax
            if own:
                for k in range_constexpr(per_thread):
                    lo, hi = vals[k]
                    dev.st(dev.at(sym, yw + ix.ag_x8_byte(L, region, t_own, 2 * pair_of(k))),
                           fx.Int16(f8_pair(lo * inv, hi * inv)), fx.Int16, 2)
            dev.release_block()
            if own & (tid == 0):
                dev.st(dev.at(sym, yw + ix.ag_x8_scale(L, region, t_own)), amax / F32(f8_max), F32)
                dev.st(dev.at(sym, yw + ix.ag_x8_tag(L, region, t_own)), I32(tag), I32, 4, release=True)

        def gather_x8(region: int, layer: Any, tag: Any, data: str, scale: str, fname: str, site: int) -> None:
            for c in range(4):
                t = ix.gathered_row(j, c)
                if t < n_rows:
                    src = peer(ix.owner_rank(t))
                    dev.wait_tagged(dev.at(src, yw + ix.ag_x8_tag(L, region, t)), tag, deadline, health, site, bid)
                    dst = sc(layer, data)
                    for k in range_constexpr(-(-hidden // (8 * threads))):
                        w8 = (tid + k * threads) * 8
                        if w8 < hidden:
                            dev.st(dev.at(dst, ix.row8_at(t, hidden, w8)),
                                   dev.ld(dev.at(src, yw + ix.ag_x8_byte(L, region, t, w8)), I64, 8, coherent=True),
                                   I64, 8)
                    if tid == 0:
                        dev.st(dev.at(sc(layer, scale), ix.scale_at(t)),
                               dev.ld(dev.at(src, yw + ix.ag_x8_scale(L, region, t)), F32, coherent=True), F32)
                    dev.publish(flag(fname, t), tag, tid)

        def row_sum4(region: int, tag: Any, site: int) -> list[Any]:
            """The owned row's partial sums from the 4 ranks (tagged pairs in this rank's region):
            first every word this thread reads carries ``tag``, then the reads."""
            if own:
                for k in range(per_thread * 4):
                    word = dev.at(sym, yw + ix.rs_tag(L, region, k % 4, t_read, 0, pair_of(k // 4)))
                    dev.wait_tagged(word, tag, deadline, health, site, bid)
            out = []
            for k in range_constexpr(per_thread):
                lo, hi = F32(0.0), F32(0.0)
                for src in range_constexpr(4):
                    word = dev.at(sym, yw + ix.rs_pair(L, region, src, t_read, 0, pair_of(k)))
                    d = dev.ld(word, I32, 4, acquire=True)
                    lo = lo + dev.bf16_value(d & 0xFFFF)
                    hi = hi + dev.bf16_value(d.shrui(fx.Int32(16)))
                out.append((lo, hi))
            return out

        def add(res: list[Any], more: list[Any]) -> list[Any]:
            return [(a + c, b + d) for (a, b), (c, d) in zip(res, more, strict=True)]

        def norm_role() -> None:
            res = [(bf16_at(dev.at(x_in, ix.hidden_at(L, t_read, 2 * pair_of(k)))),
                    bf16_at(dev.at(x_in, ix.hidden_at(L, t_read, 2 * pair_of(k) + 1))))
                   for k in range_constexpr(per_thread)]
            for layer in range_constexpr(L.LAYERS):
                tag = ix.tag(step_, layer)
                if layer > 0:
                    res = add(res, row_sum4(L.Y_RSD, tag - 1, 7))
                put_x8(norm_pairs(res, table(layer, L.T_IN_LN)), L.Y_AGX, tag)
                gather_x8(L.Y_AGX, layer, tag, "x8", "xs", "x8f", 10)
                res = add(res, row_sum4(L.Y_RSO, tag, 8))
                put_x8(norm_pairs(res, table(layer, L.T_POST_LN)), L.Y_AGH, tag)
                gather_x8(L.Y_AGH, layer, tag, "h8", "hs", "h8f", 11)
            ftag = ix.tag(step_, L.LAYERS)
            res = add(res, row_sum4(L.Y_RSD, ftag - 1, 9))
            out = norm_pairs(res, fin_ln)
            if own:
                for k in range_constexpr(per_thread):
                    lo, hi = out[k]
                    word = dev.at(sym, yw + ix.ag_bf_pair(L, L.Y_AGF, t_own, pair_of(k)))
                    dev.st(word, dev.tagged_word(dev.bf16_pair(lo, hi), ftag), I64, 8, release=True)
            for c in range(4):
                t = ix.gathered_row(j, c)
                if t < n_rows:
                    for k in range(per_thread):
                        p = pair_of(k)
                        src = peer(ix.owner_rank(t))
                        dev.wait_tagged(dev.at(src, yw + ix.ag_bf_tag(L, L.Y_AGF, t, p)), ftag, deadline, health, 12,
                                        bid)
                        word = dev.at(src, yw + ix.ag_bf_pair(L, L.Y_AGF, t, p))
                        dev.st(dev.at(h_out, ix.hidden_at(L, t, 2 * p)), dev.ld(word, I32, 4, acquire=True), I32)

        if bid < L.NG:
            for layer in range_constexpr(L.LAYERS):
                gemv_role(layer, ix.tag(step_, layer))
        elif bid < L.NORM0:
            request = ix.smin((bid - L.ATT0) // ix.chunks_per_request(L, n_rows), n_rows // L.QPR - 1)
            seq_len = dev.ld(dev.at(table(0, L.T_SEQ_LENS), ix.seq_len_at(request)), I32)
            for layer in range_constexpr(L.LAYERS):
                attention_role(layer, ix.tag(step_, layer), seq_len)
        else:
            norm_role()

    @flyc.jit
    def launch(x_in: I64, h_out: I64, tab: I64, w_qkv: I64, s_qkv: I64, w_o: I64, s_o: I64, w_gu: I64,
               s_gu: I64, w_d: I64, s_d: I64, fin_ln: I64, cos_sin: I64, block_table: I64, positions: I64,
               slots: I64, scratch: I64, sym: I64, peers: I64, step: I64, health: I64, rank: I32,
               bt_width: I32, n_rows: I32,
               stream: fx.Stream = fx.Stream(None)):  # noqa: B008
        drafter_wide(x_in, h_out, tab, w_qkv, s_qkv, w_o, s_o, w_gu, s_gu, w_d, s_d, fin_ln, cos_sin, block_table,
                     positions, slots, scratch, sym, peers, step, health, rank, bt_width,
                     n_rows).launch(grid=(L.BLOCKS, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch
