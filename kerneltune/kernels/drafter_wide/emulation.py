"""The whole TP4 launch of the drafter megakernel, emulated on the CPU.

Every block of every role (G: GEMV rows, L: attention chunks and merges, N: row norms and the
all-gathers) of each of the 4 ranks runs as a coroutine over NumPy buffers standing for each
rank's scratch (global memory), flag words, symmetric peer region and paged KV cache. Addresses
come from ``indexing.py``, the functions the kernel traces, and the step's positions, slots, block
table and RoPE table are the arrays the host uploads (``host_inputs.py``), read at the kernel's
offsets. A wait yields until the words it polls carry its tag; when no block can run while some
still wait, the launch is a deadlock and is reported with every outstanding wait instead of hanging.

Memory is byte-addressed: a value stored at byte offset ``b`` sits in slot ``b`` whatever its
width, and every slot starts as NaN, so a value read from a wrong or unwritten address poisons
the output. The G blocks' LDS is a per-block array of float32 words (NaN at first): each GEMV
tile's per-wave partial sums go through it at the kernel's ``red_word`` / ``red_element``.
In float64 (``numbers=None``) nothing is rounded: the launch's data movement and order must then
reproduce the float64 reference exactly. With ``numbers`` an arch, every value is rounded where the
kernel rounds it (``numerics.Formats``: 8-bit weights and activations with their scales, bf16 stores,
float32 arithmetic) and h_out must stay within ``numerics.error_bound`` of the float64 reference.

The blocks run in one fixed order (each runs until it waits), or, given a seed, in a random
interleaving: each round visits the blocks in a random order and runs each a random number of steps.
Every flag publish is also a point where another block may run, so a publish that comes before its
data, or a wait that is missing, shows in some seeded schedules as NaN in the output or a deadlock
(``faults`` ``early:<flag>`` and ``nowait:<flag>``), where the fixed order runs past it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kerneltune.seams.protocols import EmulationCheck

from . import indexing as ix
from .health import SITES
from .host_inputs import host_arrays, word
from .layout import TP, DrafterLayout
from .numerics import Formats, bounded_reference, frobenius_error
from .packing import pack_ranks, rank_slices
from .reference import (
    F8_DTYPE,
    Dims,
    StepInputs,
    Weights,
    make_inputs,
    make_weights,
    rms_norm,
    swiglu_clamped,
)

_Wait = tuple[Callable[[], bool], str]
Block = Generator[_Wait, None, None]
# A point where the scheduler may switch blocks: after every flag publish.
_YIELD: _Wait = (lambda: True, "yield")


class Deadlock(RuntimeError):
    """No block can run and some still wait: ``waits`` names each (rank, block, site)."""

    def __init__(self, waits: list[str]):
        super().__init__(f"deadlock: {len(waits)} blocks wait with nothing left to run; first: "
                         + "; ".join(waits[:4]))
        self.waits = waits


@dataclass
class EmulationResult:
    h_out: list[np.ndarray]  # every rank's copy, [n_rows, hidden]
    blocks: int
    resumes: int
    schedule: str  # a digest of the order in which blocks resumed: equal digests, equal interleavings
    caches: list[list[np.ndarray]]  # every rank's KV cache per layer after the step, flat (ix.cache_at)


@dataclass
class _Rank:
    rank: int
    scratch: np.ndarray
    flags: np.ndarray
    sym: np.ndarray
    h_out: np.ndarray
    w: list[dict[str, np.ndarray]] = field(default_factory=list)
    cache: list[np.ndarray] = field(default_factory=list)  # per layer, this rank's flat KV cache (ix.cache_at)


def shard_weights(d: Dims, weights: Weights, numbers: str | None = None) -> list[list[dict[str, Any]]]:
    """Each rank's slices of the master weights: float64, or (``numbers`` an arch) the values of the
    8-bit rows and scales the runner uploads (``packing.pack_ranks``, held as codes: ``Dequantized``) and of the bf16
    norm weights."""
    num = Formats(numbers)
    inter = d.intermediate // TP
    norms = ("in_ln", "post_ln", "q_norm", "k_norm")
    shards: list[list[dict[str, Any]]] = [[] for _ in range(TP)]
    if num.exact:
        for w in weights.layers:
            held = {k: w[k] for k in ("qkv", "o", "gate", "up", "down")}  # each drawn once for the four ranks
            for r in range(TP):
                rw = {k: v.numpy() for k, v in rank_slices(d, held, r).items()}
                shards[r].append({"qkv": rw["qkv"], "o": rw["o"], "gate": rw["gu"][:inter], "up": rw["gu"][inter:],
                                  "down": rw["d"], **{k: num.bf16(w[k].numpy()) for k in norms}})
        return shards
    table = torch_decode_table(num.arch)
    for r, packed in enumerate(pack_ranks(d, weights, num.arch)):
        for layer, w in enumerate(weights.layers):
            rw = {k: Dequantized(p.data[layer].numpy(), p.scale[layer].numpy(), table) for k, p in packed.items()}
            shards[r].append({"qkv": rw["qkv"], "o": rw["o"], "gate": rw["gu"].rows(0, inter),
                              "up": rw["gu"].rows(inter, 2 * inter), "down": rw["d"],
                              **{k: num.bf16(w[k].numpy()) for k in norms}})
    return shards


def torch_decode_table(arch: str) -> np.ndarray:
    """float32 [256]: each 8-bit code's value as torch decodes it (``PackedWeight.dequantize``'s)."""
    import torch

    return torch.arange(256, dtype=torch.uint8).view(F8_DTYPE[arch]).float().numpy()


@dataclass(frozen=True)
class Dequantized:
    """A rank's 8-bit weight rows and their float32 scales, dequantised to float32 as a block reads its rows: the
    values ``PackedWeight.dequantize`` gives (code times scale, one float32 product), at a quarter of their bytes
    held (the 512-thread check shape's three layers: 0.5 GB of codes, 2 GB of float32 values)."""

    codes: np.ndarray  # uint8 [rows, K]
    scale: np.ndarray  # float32 [rows]
    table: np.ndarray  # float32 [256]: ``torch_decode_table``

    def __getitem__(self, rows: slice) -> np.ndarray:
        return self.table[self.codes[rows]] * self.scale[rows, None]

    def __len__(self) -> int:
        return self.codes.shape[0]

    def rows(self, lo: int, hi: int) -> Dequantized:
        return Dequantized(self.codes[lo:hi], self.scale[lo:hi], self.table)


def _norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return np.asarray(rms_norm(_t(x), _t(w), eps))


def _t(a: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


class Launch:
    """One step of the drafter on 4 emulated ranks. ``faults`` injects bugs at single sites, for
    the tests that prove the emulation catches them: ``{"tag:x8f": -1}`` publishes the x8 flags
    with a wrong tag, ``{"offset:rs": 8}`` writes reduce-scatter pairs 8 bytes off,
    ``{"offset:lds": 1}`` reads the GEMV tiles' LDS partial sums one word off,
    ``{"early:qkvf": 1}`` publishes the qkv flags before the qkv values are stored,
    ``{"nowait:qkvf": 1}`` drops the attention blocks' wait for them, ``{"noscale:x8": 1}`` reads the
    x8 rows' 8-bit codes without their scales (likewise ``w``, ``a8``, ``act``; in the kernel's
    formats), ``{"mask": 1}`` masks every attention block (interior ones too: the same result) and
    ``{"mask": -1}`` none (edge blocks then count keys outside the window). ``schedule_seed`` picks a
    random interleaving of the blocks (None: the fixed order); ``numbers`` the arch whose formats the
    values are rounded to (None: float64), with ``shards`` from ``shard_weights`` for the same ``numbers``."""

    def __init__(self, layout: DrafterLayout, dims: Dims, weights: Weights, inputs: StepInputs, step: int = 1,
                 faults: Mapping[str, int] | None = None,
                 shards: list[list[dict[str, Any]]] | None = None, schedule_seed: int | None = None,
                 numbers: str | None = None):
        n = inputs.x.shape[0]
        layout.check_rows(n)
        if inputs.qpr != layout.QPR:
            raise ValueError(f"inputs: {inputs.qpr} rows per request, the layout is built for QPR={layout.QPR}")
        if (dims.hidden, dims.head_dim, dims.kv_block, dims.window) != (
                layout.model.hidden, layout.model.head_dim, layout.BLOCK, layout.WINDOW):
            raise ValueError("dims: the reference's model and the layout's differ")
        self.L, self.d, self.inputs, self.n, self.step = layout, dims, inputs, n, step
        self.faults = dict(faults or {})
        self.schedule_seed = schedule_seed
        self.num = Formats(numbers)
        layers = len(weights.layers)
        self.layers = layers
        self.final_ln = self.num.bf16(weights.final_ln.numpy())
        shards = shards or shard_weights(dims, weights, numbers)
        self.ranks = []
        for r in range(TP):
            st = _Rank(r, np.full(layers * layout.W_LAYER_BYTES, np.nan), np.zeros(layout.W_LAYER_BYTES),
                       np.full(layout.Y_BYTES, np.nan), np.full((n, dims.hidden), np.nan), shards[r])
            st.cache = [np.stack([k.numpy()[:, :, r], v.numpy()[:, :, r]]).ravel()
                        for k, v in zip(inputs.k_cache, inputs.v_cache, strict=True)]
            self.ranks.append(st)
        self.n_pages = inputs.k_cache[0].shape[0] if inputs.k_cache else 0
        # Positions, slots, pages and the RoPE table as the host uploads them (float64 RoPE in float64 mode).
        self.host = host_arrays(layout, inputs, dims.rope_theta, self.num.dtype)
        # Index arrays of the GEMV tiles, from indexing.py once per distinct argument (every tile reuses them).
        self._index: dict[tuple[Any, ...], Any] = {}
        self._buffers: dict[tuple[Any, ...], np.ndarray] = {}

    # ------------------------------------------------------------- flags and tagged words
    def _publish(self, st: _Rank, name: str, index: int, tag: int, store: Callable[[], None]) -> Block:
        """``store`` the data, then publish its flag (fault ``early:<name>``: the other way round, with
        a scheduling point between them); another block may run after the publish."""
        early = bool(self.faults.get(f"early:{name}"))
        if not early:
            store()
        st.flags[ix.flag_word(self.L, name, index)] = tag + self.faults.get(f"tag:{name}", 0)
        yield _YIELD
        if early:
            store()

    def _flags_ready(self, st: _Rank, name: str, first: int, count: int, tag: int, site: int) -> _Wait:
        if self.faults.get(f"nowait:{name}"):
            return _YIELD
        words = ix.flag_word(self.L, name, first + np.arange(count))
        return (lambda: bool(np.all(st.flags[words] >= tag)),
                f"site {site} ({SITES[site]}): rank {st.rank} waits {count} {name} flags from {first} for tag {tag}")

    def _tagged(self, mem: np.ndarray, words: np.ndarray, tag: int, site: int, what: str) -> _Wait:
        return lambda: bool(np.all(mem[words] == tag)), f"site {site} ({SITES[site]}): {what}"

    # ------------------------------------------------------------- the launch
    def run(self) -> EmulationResult:
        blocks: list[tuple[str, Block]] = []
        for st in self.ranks:
            for b in range(self.L.BLOCKS):
                role = "G" if b < self.L.NG else "L" if b < self.L.NORM0 else "N"
                gen = (self._gemv(st, b) if role == "G" else self._attention(st, b - self.L.ATT0) if role == "L"
                       else self._norm_block(st, b - self.L.NORM0))
                blocks.append((f"rank {st.rank} block {b} ({role})", gen))
        rng = None if self.schedule_seed is None else np.random.default_rng(self.schedule_seed)
        resumes, schedule = _schedule(blocks, rng)
        return EmulationResult([st.h_out for st in self.ranks], len(blocks), resumes, schedule,
                               [st.cache for st in self.ranks])

    # ------------------------------------------------------------- G: GEMV rows
    def _rs_push(self, st: _Rank, region: int, rows: np.ndarray, col0: int, y: np.ndarray, tag: int) -> None:
        """Send each token row's partial sums of columns col0.. to the row's owner, as tagged pairs."""
        pairs = np.arange(y.shape[1] // 2)
        for t in rows:
            peer = self.ranks[ix.owner_rank(int(t))]
            at = ix.rs_pair(self.L, region, st.rank, int(t), col0, pairs) + self.faults.get("offset:rs", 0)
            lo, hi, tag_at = ix.pair_slots(at)
            peer.sym[lo], peer.sym[hi], peer.sym[tag_at] = y[t, 0::2], y[t, 1::2], tag

    def _partial_words(self, slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where every wave's values land (waves x 4 x 64 words) and which tile element each one is."""
        waves, i, lanes = np.ix_(np.arange(self.L.waves), np.arange(4), np.arange(64))
        return ix.red_word(self.L, slot, waves, i, lanes), ix.mfma_row(lanes[0], i[0]), lanes[0] % ix.TILE

    def _k_columns(self, k: int, wave: int) -> np.ndarray:
        """The K columns one wave sums of a tile of width ``k``, as the kernel splits them (``k_offset``)."""
        return np.concatenate([ix.k_offset(self.L, c, wave, g4) + np.arange(ix.K_CHUNK)
                               for c in range(self.L.chunks(k)) for g4 in range(4)])

    def _wave_split(self, k: int) -> list[np.ndarray] | tuple[int, int]:
        """Each wave's K columns (``k_offset``), or, where they are the regular split of the row into
        chunks of one run of 4 x 32 bytes per wave, ``(waves, run)``: the products then come from views."""
        waves = [self._k_columns(k, wave) for wave in range(self.L.waves)]
        run = 4 * ix.K_CHUNK
        regular = np.arange(k).reshape(-1, self.L.waves, run)
        if all(np.array_equal(cols, regular[:, wave].ravel()) for wave, cols in enumerate(waves)):
            return self.L.waves, run
        return waves

    def _element_words(self, slot: int) -> np.ndarray:
        waves, m, n = np.ix_(np.arange(self.L.waves), np.arange(ix.TILE), np.arange(ix.TILE))
        return ix.red_element(self.L, slot, waves, m, n)

    def _tokens(self) -> np.ndarray:
        """``[token tile, lane]``: the token row each lane of each tile reads (``tile_row``)."""
        return np.array([[ix.tile_row(t, lane, self.n) for lane in range(ix.TILE)]
                         for t in range(ix.tile_count(self.n))])

    def _cached(self, fn: Callable[..., Any], *args: int | str) -> Any:
        """``fn(*args)`` for an index function of the tiles, computed once per distinct argument."""
        key = (fn.__name__, *args)
        if key not in self._index:
            self._index[key] = fn(*args)
        return self._index[key]

    def _buffer(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A working array reused by every block: the block fills it and is done with it before it yields.
        A fresh one per block (MBs, each block's rows or LDS pools) cost a page fault per 4 KiB on first
        write, most of the emulation's time."""
        key = (name, shape)
        if key not in self._buffers:
            self._buffers[key] = np.empty(shape, dtype=self.num.dtype)
        return self._buffers[key]

    def _gemv_rows(self, w: list[np.ndarray], x: np.ndarray) -> list[np.ndarray]:
        """``x @ W.T`` for one or two weight blocks (gate and up share a pass: LDS slots 0 and 1), in the
        kernel's tiles: token tiles of 16 (``tile_row``), weight tiles of 16 rows (a block with fewer rows
        repeats its last one). Each wave leaves its share of a tile (its K columns, ``k_offset``) in LDS at
        ``red_word``, then the tile is summed back by element (``red_element``); the MFMA's own lane layout
        (value i of lane l is row ``mfma_row(l, i)``, column l % 16) is the hardware's, taken as documented.
        Every tile gets an LDS pool of its own, all at once: the kernel reuses one pool tile after tile, and
        a read of a word no partial was written to is NaN here instead of a stale partial there."""
        n, tile = self.n, ix.TILE
        # Each wave's partial products over its K columns, for every weight row and token row at once.
        split = self._cached(self._wave_split, x.shape[1])
        x = self.num.f32(x)
        parts = [_wave_products(wb, x, split) for wb in w]
        row_tiles = -(-len(w[0]) // tile)
        tokens = self._cached(self._tokens)
        lds = self._buffer("lds", (row_tiles, len(tokens), self.L.pool_words))
        lds.fill(np.nan)
        for slot, (wb, p) in enumerate(zip(w, parts, strict=True)):
            wrows = np.minimum(tile * np.arange(row_tiles)[:, None] + np.arange(tile), len(wb) - 1)
            tiles = p[:, wrows[:, None, :, None], tokens[None, :, None, :]]  # [wave, row tile, token tile, m, n]
            words, r, c = self._cached(self._partial_words, slot)
            lds[:, :, words] = tiles[:, :, :, r, c].transpose(1, 2, 0, 3, 4)
        out = []
        for slot, wb in enumerate(w):
            at = self._cached(self._element_words, slot) + self.faults.get("offset:lds", 0)
            y = lds[:, :, at].sum(axis=2)  # [row tile, token tile, m (weight row), n (token)]
            out.append(y.transpose(1, 3, 0, 2).reshape(len(tokens) * tile, row_tiles * tile)[:n, :len(wb)])
        return out

    def _gemv(self, st: _Rank, b: int) -> Block:
        L, n = self.L, self.n
        rows = np.arange(n)
        for layer in range(self.layers):
            tag = ix.tag(self.step, layer)
            w = st.w[layer]
            yield self._flags_ready(st, "x8f", 0, n, tag, 1)
            x8 = self._rows8(st, layer, "x8", "xs")
            r0 = b * L.QKV_R
            [out] = self._gemv_rows([self._w(w, "qkv", r0, L.QKV_R)], x8)
            el = ix.qkv_element(L, rows[:, None], b, np.arange(L.QKV_R)[None, :])
            yield from self._publish(st, "qkvf", b, tag,
                                     _store(st.scratch, ix.scratch_at(L, layer, "qkv") + 2 * el, self.num.bf16(out)))

            yield self._flags_ready(st, "attf", 0, 4 * n, tag, 2)
            a8 = self._a8_rows(st, layer)
            c0 = b * L.O_R
            [y] = self._gemv_rows([self._w(w, "o", c0, L.O_R)], a8)
            self._rs_push(st, L.Y_RSO, rows, c0, self.num.bf16(y), tag)

            yield self._flags_ready(st, "h8f", 0, n, tag, 3)
            h8 = self._rows8(st, layer, "h8", "hs")
            g0 = b * L.GU_R
            g, u = self._gemv_rows([self._w(w, "gate", g0, L.GU_R), self._w(w, "up", g0, L.GU_R)], h8)
            act = self.num.bf16(swiglu_clamped(_t(self.num.bf16(g)), _t(self.num.bf16(u))).numpy())
            el = ix.act_element(L, rows[:, None], b, np.arange(L.GU_R)[None, :])
            yield from self._publish(st, "actf", b, tag,
                                     _store(st.scratch, ix.scratch_at(L, layer, "act") + 2 * el, act))

            yield self._flags_ready(st, "actf", 0, L.NG, tag, 4)
            el = ix.act_element(L, rows[:, None], 0, np.arange(L.IR)[None, :])
            # Each chunk of a row (``ix.CHUNK_K`` aligned values) with its own amax, as the kernel reads it.
            codes, scale = self.num.f8_chunks(st.scratch[ix.scratch_at(L, layer, "act") + 2 * el], ix.CHUNK_K)
            act_rows = (codes * self._scales("act", scale)[..., None]).reshape(el.shape)
            [y] = self._gemv_rows([self._w(w, "down", c0, L.D_R)], act_rows)
            self._rs_push(st, L.Y_RSD, rows, c0, self.num.bf16(y), tag)

    def _w(self, w: dict[str, np.ndarray], name: str, r0: int, count: int) -> np.ndarray:
        """A block's weight rows (fault ``noscale:w``: their 8-bit codes, each row's scale left out)."""
        rows = w[name][r0:r0 + count]
        if not self.faults.get("noscale:w") or self.num.exact:
            return rows
        codes, _ = self.num.f8(rows)
        return codes

    def _scales(self, operand: str, scale: np.ndarray) -> np.ndarray:
        """An 8-bit operand's scales as read (fault ``noscale:<operand>``: ones, the codes taken as values)."""
        return np.ones_like(scale) if self.faults.get(f"noscale:{operand}") else scale

    def _rows8(self, st: _Rank, layer: int, data: str, scale: str, width: int | None = None) -> np.ndarray:
        """8-bit rows with their scales, read from this rank's scratch (dequantised)."""
        width = width or self.L.model.hidden
        at = self._cached(self._row_words, layer, data, width)
        sc = self._scales(data, st.scratch[ix.scratch_at(self.L, layer, scale) + ix.scale_at(np.arange(self.n))])
        rows = _gather(st.scratch, at)
        return self.num.f32(np.multiply(rows, sc[:, None], out=self._buffer("rows8", rows.shape)))

    def _row_words(self, layer: int, data: str, width: int) -> np.ndarray | tuple[slice, tuple[int, ...]]:
        return _as_slice(ix.scratch_at(self.L, layer, data)
                         + ix.row8_at(np.arange(self.n)[:, None], width, np.arange(width)[None, :]))

    def _a8_rows(self, st: _Rank, layer: int) -> np.ndarray:
        """Merged attention rows: 8-bit values with one scale per head quarter."""
        width = self.L.model.o_in
        cols = np.arange(width)
        at = ix.scratch_at(self.L, layer, "a8") + ix.row8_at(np.arange(self.n)[:, None], width, cols[None, :])
        sc = self._scales("a8", st.scratch[ix.a8_scale_at(self.L, layer, np.arange(self.n)[:, None],
                                                           ix.quarter_of(cols[None, :], width))])
        return self.num.f32(st.scratch[at] * sc)

    # ------------------------------------------------------------- L: attention and merges
    def _attention(self, st: _Rank, pidx: int) -> Block:
        L, n = self.L, self.n
        cpr = ix.chunks_per_request(L, n)
        for layer in range(self.layers):
            tag = ix.tag(self.step, layer)
            if pidx < cpr * (n // L.QPR):
                yield self._flags_ready(st, "qkvf", 0, L.NG, tag, 5)
                store = self._chunk(st, layer, pidx, cpr)
                yield from self._publish(st, "apf", pidx, tag, store)
            for task in range(pidx, 4 * n, L.W_NA):
                t, hq, r = ix.merge_task(L, task)
                yield self._flags_ready(st, "apf", r * cpr, cpr, tag, 6)
                merge = functools.partial(self._merge, st, layer, t, hq, r, cpr)
                yield from self._publish(st, "attf", task, tag, merge)

    def _chunk(self, st: _Rank, layer: int, pidx: int, cpr: int) -> Callable[[], None]:
        """Attention block ``pidx``'s chunk as the kernel computes it: this step's rows staged in LDS (and,
        for the chunk of the newest blocks, written to their cache slots), then the chunk's 16-key blocks,
        newest first, through the two LDS tile pairs (K row-major, V transposed, at ``indexing.py``'s
        elements) into each row's online softmax over its 16 heads: bf16 q, K, V and P into float32
        products, interior blocks unmasked, edge blocks masked. Returns the store of the (m, l, o)
        partials; the LDS is NaN until written, so a tile element read before it is filled poisons them."""
        L, d = self.L, self.d
        hd, qh, num = d.head_dim, L.model.q_heads, self.num
        r, c = pidx // cpr, pidx % cpr
        rows = np.arange(r * L.QPR, (r + 1) * L.QPR)
        pos = word(self.host.positions, ix.position_at(rows)).astype(np.int64)
        p_first, p_last = int(pos[0]), int(pos[0]) + L.QPR - 1
        seq_len = int(word(self.host.seq_lens, ix.seq_len_at(r)))
        lo, hi, b0w, b1w = ix.window(L, p_first, seq_len)
        q0, cnt = ix.chunk(c, b1w - b0w + 1, cpr)
        b_a = b1w - q0
        q, k_new, v_new = self._qkv_rows(st, layer, rows)
        cache, dim, kk = st.cache[layer], np.arange(hd), np.arange(L.BLOCK)[:, None]
        lds = np.full(2 * L.pool_words, np.nan)  # bf16 elements
        i = np.arange(L.QPR)[:, None]
        lds[ix.staged(L, i, 0, dim)], lds[ix.staged(L, i, 1, dim)] = num.bf16(k_new), num.bf16(v_new)
        if c == 0:
            slots = word(self.host.slots, ix.slot_at(rows))[:, None]
            cache[ix.cache_at(L, slots, self.n_pages, 0, dim) // 2] = num.bf16(k_new)
            cache[ix.cache_at(L, slots, self.n_pages, 1, dim) // 2] = num.bf16(v_new)

        def fill(pair: int, blk: int) -> None:
            key = blk * L.BLOCK + kk
            held = np.clip(key, lo, hi)
            page = word(self.host.block_table, ix.page_at(L, r, self.host.bt_width, held))
            slot = ix.page_slot(L, page, held)
            new_row = np.clip(key - p_first, 0, L.QPR - 1)
            inside, fresh = (key >= lo) & (key <= hi), key >= p_first
            for value, tile in ((0, ix.tile_k), (1, ix.tile_v)):
                cached = cache[ix.cache_at(L, slot, self.n_pages, value, dim) // 2]
                staged = lds[ix.staged(L, new_row, value, dim)]
                lds[tile(L, pair, kk, dim)] = np.where(inside, np.where(fresh, staged, cached), 0.0)

        for pair in range(min(2, cnt)):
            fill(pair, b_a - pair)
        qb = num.bf16(q)  # [rows, heads, dim]: the MFMA's bf16 operand
        m = np.full((L.QPR, qh), -np.inf, dtype=num.dtype)
        lsum = np.zeros((L.QPR, qh), dtype=num.dtype)
        o = np.zeros((L.QPR, qh, hd), dtype=num.dtype)
        masking = self.faults.get("mask")  # 1: mask every block, -1: none
        for it in range(cnt):
            pair, blk = it % 2, b_a - it
            keys = blk * L.BLOCK + np.arange(L.BLOCK)
            k_t, v_t = num.f32(lds[ix.tile_k(L, pair, kk, dim)]), num.f32(lds[ix.tile_v(L, pair, kk, dim)])
            s = num.f32(qb @ k_t.T) * num.f32(hd ** -0.5)  # [rows, heads, keys]
            inner = ix.interior(L, blk, p_first, p_last, lo, hi)
            if (not inner and masking != -1) or masking == 1:
                seen = ix.key_seen(L, keys[None, :], pos[:, None], lo, hi)
                s = np.where(seen[:, None, :], s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))
            m_use = np.where(np.isneginf(m_new), 0.0, m_new).astype(num.dtype)
            alpha = np.exp(m - m_use)
            p = np.exp(s - m_use[..., None])
            lsum = lsum * alpha + p.sum(axis=-1)
            o = o * alpha[..., None] + num.f32(num.bf16(p) @ v_t)
            m = m_new
            if it + 2 < cnt:
                fill(pair, blk - 2)
        heads = np.arange(qh)
        rows, hs = np.arange(L.QPR)[:, None], heads[None, :]
        words = np.concatenate([ix.partial_at(L, layer, pidx, rows, hs).ravel(),
                                ix.partial_l(L, layer, pidx, rows, hs).ravel(),
                                ix.partial_o(L, layer, pidx, rows[..., None], hs[..., None], dim).ravel()])
        return _store(st.scratch, words, np.concatenate([m.ravel(), lsum.ravel(), o.ravel()]))

    def _qkv_rows(self, st: _Rank, layer: int, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """The request's q (normed, rotated by the host's RoPE table), and its new k and v, from this
        rank's qkv scratch."""
        L, d = self.L, self.d
        hd, qh = d.head_dim, L.model.q_heads
        qkv = self.num.f32(st.scratch[ix.scratch_at(L, layer, "qkv")
                                      + ix.qkv_at(L, rows[:, None], 0, np.arange(L.QKV_N)[None, :])])
        w = st.w[layer]
        q = qkv[:, :qh * hd].reshape(len(rows), qh, hd)
        k = qkv[:, qh * hd:(qh + 1) * hd].reshape(len(rows), 1, hd)
        v = qkv[:, (qh + 1) * hd:].reshape(len(rows), hd)
        angles = np.arange(hd // 2)
        cos = word(self.host.cos_sin, ix.rope_at(L, rows[:, None], 0, angles))[:, None, :]
        sin = word(self.host.cos_sin, ix.rope_at(L, rows[:, None], 1, angles))[:, None, :]

        def rotated(x: np.ndarray) -> np.ndarray:
            x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
            return self.num.f32(np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1))

        return rotated(_norm(q, w["q_norm"], d.eps)), rotated(_norm(k, w["k_norm"], d.eps))[:, 0], v

    def _merge(self, st: _Rank, layer: int, t: int, hq: int, r: int, cpr: int) -> None:
        """Row ``t``'s heads of quarter ``hq``: every chunk's partials merged, then 8-bit with one scale."""
        L, hd = self.L, self.d.head_dim
        per_task = L.model.q_heads // 4
        i = t - r * L.QPR
        heads = range(hq * per_task, (hq + 1) * per_task)
        hs, parts = np.asarray(heads)[:, None], r * cpr + np.arange(cpr)[None, :]  # [head, chunk]
        m = self.num.f32(st.scratch[ix.partial_at(L, layer, parts, i, hs)])
        lsum = self.num.f32(st.scratch[ix.partial_l(L, layer, parts, i, hs)])
        o = self.num.f32(st.scratch[ix.partial_o(L, layer, parts[..., None], i, hs[..., None], np.arange(hd))])
        top = m.max(axis=1, keepdims=True)
        scale = np.where(np.isneginf(m), 0.0, np.exp(m - top)).astype(self.num.dtype)
        out = np.einsum("hc,hcd->hd", scale, o) / (scale * lsum).sum(axis=1)[:, None]
        codes, amax_scale = self.num.f8(out.ravel())
        at = ix.scratch_at(L, layer, "a8") + ix.a8_at(L, t, np.asarray(heads)[:, None], np.arange(hd))
        st.scratch[at.ravel()] = codes
        st.scratch[ix.a8_scale_at(L, layer, t, hq)] = amax_scale

    # ------------------------------------------------------------- N: row norms, all-gathers
    def _norm_block(self, st: _Rank, j: int) -> Block:
        L, d, n = self.L, self.d, self.n
        t_own = ix.own_row(j, st.rank)
        res = None

        def row_sum4(region: int, tag: int, site: int) -> Block:
            pairs = np.arange(L.ROW_PAIRS)
            at = np.stack([ix.rs_pair(L, region, src, t_own, 0, pairs) for src in range(TP)])
            lo_at, hi_at, tag_at = ix.pair_slots(at)
            yield self._tagged(st.sym, tag_at.ravel(), tag, site, f"rank {st.rank} norm block {j} waits the "
                               f"reduce-scatter of row {t_own} at {region} for tag {tag}")
            lo, hi = self.num.f32(st.sym[lo_at]).sum(axis=0), self.num.f32(st.sym[hi_at]).sum(axis=0)
            return np.stack([lo, hi], axis=1).ravel()

        def gather(region: int, layer: int, tag: int, data: str, scale: str, flag: str, site: int) -> Block:
            for c in range(4):
                t = ix.gathered_row(j, c)
                if t < n:
                    src = self.ranks[ix.owner_rank(t)].sym
                    yield self._tagged(src, np.array([ix.ag_x8_tag(L, region, t)]), tag, site,
                                       f"rank {st.rank} norm block {j} waits row {t}'s all-gather for tag {tag}")
                    cols = np.arange(d.hidden)
                    words = np.append(ix.scratch_at(L, layer, data) + ix.row8_at(t, d.hidden, cols),
                                      ix.scratch_at(L, layer, scale) + ix.scale_at(t))
                    # the row, then its scale
                    values = src[np.append(ix.ag_x8_byte(L, region, t, cols), ix.ag_x8_scale(L, region, t))]
                    yield from self._publish(st, flag, t, tag, _store(st.scratch, words, values))

        def put_x8(region: int, row_values: np.ndarray, tag: int) -> None:
            codes, scale = self.num.f8(row_values)
            st.sym[ix.ag_x8_byte(L, region, t_own, np.arange(d.hidden))] = codes
            st.sym[ix.ag_x8_scale(L, region, t_own)] = scale
            st.sym[ix.ag_x8_tag(L, region, t_own)] = tag

        for layer in range(self.layers):
            tag = ix.tag(self.step, layer)
            w = self.ranks[st.rank].w[layer]
            if t_own < n:
                if layer == 0:
                    res = self.num.f32(self.inputs.x[t_own].numpy())  # bf16 values: the kernel's x_in
                else:
                    res = res + (yield from row_sum4(L.Y_RSD, tag - 1, 7))
                put_x8(L.Y_AGX, _norm(res, w["in_ln"], d.eps), tag)
            yield from gather(L.Y_AGX, layer, tag, "x8", "xs", "x8f", 10)
            if t_own < n:
                res = res + (yield from row_sum4(L.Y_RSO, tag, 8))
                put_x8(L.Y_AGH, _norm(res, w["post_ln"], d.eps), tag)
            yield from gather(L.Y_AGH, layer, tag, "h8", "hs", "h8f", 11)
        ftag = ix.tag(self.step, self.layers)
        if t_own < n:
            res = res + (yield from row_sum4(L.Y_RSD, ftag - 1, 9))
            out = self.num.bf16(_norm(res, self.final_ln, d.eps))
            lo, hi, tag_at = ix.pair_slots(ix.ag_bf_pair(L, L.Y_AGF, t_own, np.arange(L.ROW_PAIRS)))
            st.sym[lo], st.sym[hi], st.sym[tag_at] = out[0::2], out[1::2], ftag
        for c in range(4):
            t = ix.gathered_row(j, c)
            if t < n:
                src = self.ranks[ix.owner_rank(t)].sym
                lo, hi, tag_at = ix.pair_slots(ix.ag_bf_pair(L, L.Y_AGF, t, np.arange(L.ROW_PAIRS)))
                yield self._tagged(src, tag_at, ftag, 12, f"rank {st.rank} norm block {j} waits h_out row {t} "
                                   f"for tag {ftag}")
                st.h_out[t, 0::2], st.h_out[t, 1::2] = src[lo], src[hi]


def _as_slice(words: np.ndarray) -> np.ndarray | tuple[slice, tuple[int, ...]]:
    """``words`` as (a slice, their shape) where they are one contiguous run in order, else unchanged:
    the same values, read as a view instead of a gather."""
    first = int(words.flat[0])
    if np.array_equal(words.ravel(), first + np.arange(words.size)):
        return slice(first, first + words.size), words.shape
    return words


def _gather(mem: np.ndarray, at: np.ndarray | tuple[slice, tuple[int, ...]]) -> np.ndarray:
    return mem[at[0]].reshape(at[1]) if isinstance(at, tuple) else mem[at]


def _wave_products(wb: np.ndarray, x: np.ndarray, split: list[np.ndarray] | tuple[int, int]) -> np.ndarray:
    """``[wave, weight row, token row]``: each wave's share of ``wb @ x.T`` over its K columns. A regular
    split ``(waves, run)`` multiplies strided views chunk by chunk, without copying a weight (10x faster)."""
    if isinstance(split, list):
        return np.stack([wb[:, cols] @ x[:, cols].T for cols in split])
    waves, run = split
    rows, k = wb.shape
    w4 = wb.reshape(rows, k // (waves * run), waves, run).transpose(2, 1, 0, 3)  # [wave, chunk, row, run]
    x4 = x.reshape(len(x), k // (waves * run), waves, run).transpose(2, 1, 3, 0)  # [wave, chunk, run, token]
    return np.matmul(w4, x4).sum(axis=1)


def _store(mem: np.ndarray, words: np.ndarray, values: np.ndarray) -> Callable[[], None]:
    def store() -> None:
        mem[words] = values

    return store


def _schedule(blocks: list[tuple[str, Block]], rng: np.random.Generator | None = None) -> tuple[int, str]:
    """Run coroutines until all finish; a wait parks its block until its condition holds. Without
    ``rng`` each round runs the blocks in order, each until it waits; with it, each round visits them
    in a random order and runs each for a random number of steps (1 or more, halving odds). Returns
    the resumes and a digest of the order of them."""
    live: list[tuple[str, Block, _Wait | None]] = [(name, gen, None) for name, gen in blocks]
    resumes = 0
    trace = hashlib.blake2b(digest_size=8)
    while live:
        progressed, still = False, []
        order = range(len(live)) if rng is None else rng.permutation(len(live))
        for i in order:
            name, gen, wait = live[i]
            budget = None if rng is None else int(rng.geometric(0.5))
            while (wait is None or wait[0]()) and budget != 0:
                resumes += 1
                progressed = True
                trace.update(name.encode())
                budget = None if budget is None else budget - 1
                try:
                    wait = next(gen)
                except StopIteration:
                    break
            else:
                still.append((name, gen, wait))
        live = still
        if live and not progressed:
            raise Deadlock([f"{name}: {wait[1]}" for name, _, wait in live if wait is not None])
    return resumes, trace.hexdigest()


def max_relative_error(h_out: np.ndarray, reference: np.ndarray) -> float:
    """Largest |difference| over the reference's largest magnitude (NaN counts as infinite)."""
    diff = np.abs(h_out - reference)
    return math.inf if np.isnan(diff).any() else float(diff.max() / np.abs(reference).max())


# (requests, rows per request, cached tokens per request): young, page-straddling and past-window requests.
CHECK_SHAPES = ((3, 2, (5, 94, 4500)), (4, 4, (0, 17, 4095, 6000)))


# The fixed order, then 8 seeded interleavings.
CHECK_SCHEDULES: tuple[int | None, ...] = (None, *range(8))
# The kernel's formats on each arch. Their values do not depend on the order the blocks run in (every
# block computes the same function of what it waits for), so they run in the fixed order.
CHECK_FORMATS: tuple[str, ...] = ("gfx942", "gfx950")
EXACT_TOLERANCE = 1e-12  # float64, nothing rounded: the largest error over the largest magnitude


def check_layouts(layouts: list[tuple[str, Callable[[int], DrafterLayout]]], seed: int = 0,
                  schedules: tuple[int | None, ...] = CHECK_SCHEDULES,
                  formats: tuple[str, ...] = CHECK_FORMATS) -> list[EmulationCheck]:
    """Emulate each layout (built for a shape's rows per request) on every check shape against the
    float64 model: in float64 in every schedule (within ``EXACT_TOLERANCE``), and in each arch's formats
    (relative Frobenius error within ``numerics.error_bound``). A deadlock is a failed check with its
    waits, not an exception."""
    dims = Dims(layers=1)
    weights = make_weights(dims, seed)
    runs = [(None, order) for order in schedules] + [(arch, None) for arch in formats]
    shards = {numbers: shard_weights(dims, weights, numbers) for numbers in dict.fromkeys(n for n, _ in runs)}
    checks = []
    for requests, qpr, context in CHECK_SHAPES:
        inputs = make_inputs(dims, requests=requests, qpr=qpr, context=list(context), seed=seed + 1)
        ref, bound = bounded_reference(dims, weights, inputs)
        ref = ref.numpy()
        shape = f"{requests}x{qpr} rows, ctx {'/'.join(map(str, context))}"
        for (name, build), (numbers, order) in itertools.product(layouts, runs):
            schedule = "fixed" if order is None else f"seed {order}"
            label = Formats(numbers).name
            try:
                result = Launch(build(qpr), dims, weights, inputs, shards=shards[numbers], schedule_seed=order,
                                numbers=numbers).run()
            except Deadlock as e:
                checks.append(EmulationCheck(name, shape, math.inf, 0, 0, str(e), schedule=schedule, numbers=label))
                continue
            if numbers is None:
                worst, limit = max(max_relative_error(h, ref) for h in result.h_out), EXACT_TOLERANCE
            else:
                worst, limit = max(frobenius_error(h, ref) for h in result.h_out), bound
            checks.append(EmulationCheck(name, shape, worst, result.blocks, result.resumes, tolerance=limit,
                                         schedule=schedule, numbers=label))
    return checks

