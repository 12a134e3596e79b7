"""The drafter megakernel's index and address arithmetic, written once.

Every function here takes plain Python integers or FlyDSL values: it uses only ``+ - * // %``,
comparisons and the three dispatching helpers below, so the kernel traces exactly the code that
the CPU emulation (``emulation.py``) runs on integers. Byte offsets unless a name says words.
"""

from __future__ import annotations

from typing import Any

from .layout import TP, DrafterLayout

TILE = 16  # rows of one MFMA tile
K_CHUNK = 32  # bytes of a row one lane holds per chunk: four MFMA K-steps of 8
CHUNK_K = 4 * K_CHUNK  # a chunk's span of a row: the 4 lane groups of a token row, 128 aligned values
PAIR_BYTES = 8  # a reduce-scatter or bf16 all-gather word: two bf16 values, then a 4-byte tag
TAG_HALF = 4  # the tag's byte offset in such a word


def _is_int(*xs: Any) -> bool:
    return all(isinstance(x, int) for x in xs)


def smin(a: Any, b: Any) -> Any:
    if _is_int(a, b):
        return min(a, b)
    import flydsl.expr as fx

    return fx.min(a, b)


def smax(a: Any, b: Any) -> Any:
    if _is_int(a, b):
        return max(a, b)
    import flydsl.expr as fx

    return fx.max(a, b)


def select(cond: Any, a: Any, b: Any) -> Any:
    return (a if cond else b) if isinstance(cond, bool) else cond.select(a, b)


# ----------------------------------------------------------------- tags and row ownership
def tag(step: Any, layer: Any) -> Any:
    """The tag every flag and tagged word of ``layer`` in launch ``step`` carries (never 0)."""
    return step * 8 + layer + 1


def owner_rank(row: Any) -> Any:
    """Token rows are owned round robin: the owner sums a row's partials and norms it."""
    return row % TP


def owner_slot(row: Any) -> Any:
    """The row's index among its owner's rows (the norm block that handles it)."""
    return row // TP


def own_row(norm_block: Any, rank: Any) -> Any:
    return TP * norm_block + rank


def gathered_row(norm_block: Any, c: Any) -> Any:
    """The c-th (0..3) row norm block ``norm_block`` copies into this rank's scratch."""
    return norm_block + TILE * c


# ----------------------------------------------------------------- GEMV tiles
def tile_count(n_rows: Any) -> Any:
    return (n_rows + TILE - 1) // TILE


def tile_row(t: Any, l16: Any, n_rows: Any) -> Any:
    """Lane ``l16``'s token row of tile ``t``; rows past ``n_rows`` repeat the last one."""
    return TILE * t + smin(l16, smax(n_rows - TILE * t, 1) - 1)


def k_offset(layout: DrafterLayout, chunk: Any, wave: Any, g4: Any) -> Any:
    """Byte offset in a K-long 8-bit row of lane group ``g4``'s 32 bytes of ``chunk`` of ``wave``:
    over every (chunk, wave, g4) the offsets tile the row once."""
    return (chunk * layout.waves + wave) * CHUNK_K + g4 * K_CHUNK


def quarter_of(col: Any, k: int) -> Any:
    """Which quarter of a K-long row column ``col`` lies in (one scale per head quarter of o_proj's input)."""
    return col // (k // 4)


def k_quarter(layout: DrafterLayout, chunk: Any, wave: Any, k: int) -> Any:
    """The quarter of a K-long row a wave's chunk lies in."""
    return quarter_of(k_offset(layout, chunk, wave, 0), k)


def mfma_row(lane: Any, i: Any) -> Any:
    """Row of a 16x16 MFMA output tile held in value ``i`` (0..3) of ``lane``; its column is lane % 16."""
    return 4 * (lane // TILE) + i


def red_word(layout: DrafterLayout, slot: Any, wave: Any, i: Any, lane: Any) -> Any:
    """LDS word (float32) where ``wave`` leaves value ``i`` of ``lane`` of its partial tile in ``slot``."""
    return (slot * layout.waves + wave) * (TILE * TILE) + i * 64 + lane


def red_element(layout: DrafterLayout, slot: Any, wave: Any, m: Any, n: Any) -> Any:
    """LDS word of element (row m, column n) of ``wave``'s partial tile: ``red_word`` inverted."""
    return red_word(layout, slot, wave, m % 4, (m // 4) * TILE + n)


def qkv_element(layout: DrafterLayout, row: Any, block: Any, r: Any) -> Any:
    """Element (bf16) index in the qkv scratch of GEMV block ``block``'s output row ``r``."""
    return row * layout.QKV_N + block * layout.QKV_R + r


def act_element(layout: DrafterLayout, row: Any, block: Any, r: Any) -> Any:
    return row * layout.IR + block * layout.GU_R + r


def qkv_at(layout: DrafterLayout, row: Any, block: Any, r: Any) -> Any:
    """Byte offset of ``qkv_element`` (bf16)."""
    return 2 * qkv_element(layout, row, block, r)


def act_at(layout: DrafterLayout, row: Any, block: Any, r: Any) -> Any:
    """Byte offset of ``act_element`` (bf16)."""
    return 2 * act_element(layout, row, block, r)


def row8_at(row: Any, k: Any, byte: Any) -> Any:
    """Byte ``byte`` of 8-bit row ``row`` of a ``k``-byte-wide matrix (weights, x8, h8, a8 rows)."""
    return row * k + byte


def scale_at(row: Any) -> Any:
    """Byte offset of row ``row``'s float32 scale (weights' rows, the x8 and h8 rows)."""
    return 4 * row


def bf16_at(element: Any) -> Any:
    """Byte offset of bf16 element ``element`` of a vector (the norm weights)."""
    return 2 * element


def hidden_at(layout: DrafterLayout, row: Any, element: Any) -> Any:
    """Byte offset of bf16 element ``element`` of token row ``row`` of a ``[rows, hidden]`` array (x_in, h_out)."""
    return 2 * (row * layout.model.hidden + element)


def weight_layer_at(layout: DrafterLayout, name: str, layer: Any) -> Any:
    """Byte offset of layer ``layer``'s 8-bit rows of weight ``name`` (qkv, o, gu, d: layers stacked)."""
    m = layout.model
    rows, k = {"qkv": (layout.QKV_N, m.hidden), "o": (m.hidden, m.o_in), "gu": (2 * m.intermediate, m.hidden),
               "d": (m.hidden, m.intermediate)}[name]
    return layer * (rows * k)


def scale_layer_at(layout: DrafterLayout, name: str, layer: Any) -> Any:
    """Byte offset of layer ``layer``'s float32 row scales of weight ``name``."""
    m = layout.model
    rows = {"qkv": layout.QKV_N, "o": m.hidden, "gu": 2 * m.intermediate, "d": m.hidden}[name]
    return layer * (4 * rows)


# ----------------------------------------------------------------- peer memory
def rs_pair(layout: DrafterLayout, region: Any, src_rank: Any, row: Any, col0: Any, p: Any) -> Any:
    """Byte offset, in the row owner's symmetric region, of source rank ``src_rank``'s partial
    sums of hidden columns ``col0 + 2p`` and ``col0 + 2p + 1`` of token ``row`` (data, then tag)."""
    return region + src_rank * layout.RS_STRIDE + (owner_slot(row) * layout.ROW_PAIRS + col0 // 2 + p) * PAIR_BYTES


def ag_x8_row(layout: DrafterLayout, region: Any, row: Any) -> Any:
    """Byte offset of an all-gathered 8-bit row: ``hidden`` bytes, a 4-byte scale, a 4-byte tag."""
    return region + row * (layout.model.hidden + 8)


def ag_x8_byte(layout: DrafterLayout, region: Any, row: Any, byte: Any) -> Any:
    """Byte ``byte`` of an all-gathered 8-bit row's codes."""
    return ag_x8_row(layout, region, row) + byte


def ag_x8_scale(layout: DrafterLayout, region: Any, row: Any) -> Any:
    return ag_x8_row(layout, region, row) + layout.model.hidden


def ag_x8_tag(layout: DrafterLayout, region: Any, row: Any) -> Any:
    return ag_x8_row(layout, region, row) + layout.model.hidden + 4


def ag_bf_pair(layout: DrafterLayout, region: Any, row: Any, p: Any) -> Any:
    return region + (row * layout.ROW_PAIRS + p) * PAIR_BYTES


def pair_slots(word: Any) -> tuple[Any, Any, Any]:
    """Byte offsets of a tagged pair word's low bf16, high bf16 and tag (the emulation's slots)."""
    return word, word + 2, word + TAG_HALF


def rs_tag(layout: DrafterLayout, region: Any, src_rank: Any, row: Any, col0: Any, p: Any) -> Any:
    """Byte offset of the tag half of ``rs_pair``'s word (data in the low 4 bytes, the tag in the high 4)."""
    return rs_pair(layout, region, src_rank, row, col0, p) + TAG_HALF


def ag_bf_tag(layout: DrafterLayout, region: Any, row: Any, p: Any) -> Any:
    """Byte offset of the tag half of ``ag_bf_pair``'s word."""
    return ag_bf_pair(layout, region, row, p) + TAG_HALF


def peer_at(rank: Any) -> Any:
    """Byte offset of rank ``rank``'s symmetric-region address (int64) in ``peers``."""
    return 8 * rank


def table_at(layout: DrafterLayout, layer: Any, slot: Any) -> Any:
    """Byte offset of a layer's pointer-table entry (int64)."""
    return (layer * layout.TABLE_SLOTS + slot) * 8


# ----------------------------------------------------------------- scratch and flags
def scratch_at(layout: DrafterLayout, layer: Any, name: str) -> Any:
    return layer * layout.W_LAYER_BYTES + layout.W_L_OFF[name]


def flag_word(layout: DrafterLayout, name: str, index: Any) -> Any:
    """Byte offset of publisher ``index``'s flag word. Flags are shared by every layer: the tag
    tells the layers apart and only grows, so a waiter asks for a tag at least as new as its own."""
    return layout.W_F_OFF[name] + index * 8


# ----------------------------------------------------------------- attention
def chunks_per_request(layout: DrafterLayout, n_rows: Any) -> Any:
    return layout.W_NA // (n_rows // layout.QPR)


def window(layout: DrafterLayout, p_first: Any, seq_len: Any) -> tuple[Any, Any, Any, Any]:
    """Keys a request's rows can see, ``[lo, hi]`` (from its first row's position to its last key,
    ``seq_len - 1``), and the paged blocks holding them."""
    lo = smax(p_first - layout.WINDOW + 1, 0)
    hi = seq_len - 1
    return lo, hi, lo // layout.BLOCK, hi // layout.BLOCK


def seq_len_at(request: Any) -> Any:
    """Byte offset of a request's length (int32: cached tokens plus this step's rows) in ``seq_lens``."""
    return 4 * request


def interior(layout: DrafterLayout, block: Any, p_first: Any, p_last: Any, lo: Any, hi: Any) -> Any:
    """Whether every key of paged block ``block`` is seen by every row of the request (rows at
    positions ``p_first`` .. ``p_last``, keys ``[lo, hi]``): such a block needs no mask. A row at ``p``
    sees the keys in ``(p - WINDOW, p]``."""
    first, last = block * layout.BLOCK, block * layout.BLOCK + layout.BLOCK - 1
    return (first > p_last - layout.WINDOW) & (first >= lo) & (last <= hi) & (last <= p_first)


def key_seen(layout: DrafterLayout, key: Any, p: Any, lo: Any, hi: Any) -> Any:
    """Whether the row at position ``p`` sees ``key`` (the mask of an edge block)."""
    return (key >= lo) & (key <= hi) & (key > p - layout.WINDOW) & (key <= p)


# LDS of an attention block, in bf16 elements: the K|V tile pairs (K row-major [key][dim], V transposed
# [dim][key], so that each lane's MFMA operand is 4 consecutive elements, rows padded so that the 16 lanes
# of one operand read fall in different banks), then this step's new rows.
def tile_k(layout: DrafterLayout, pair: Any, key: Any, dim: Any) -> Any:
    """bf16 element of (``key`` of the block, ``dim``) in tile pair ``pair``'s K tile."""
    return pair * layout.PAIR_ELEMENTS + key * layout.K_ROW + dim


def tile_v(layout: DrafterLayout, pair: Any, key: Any, dim: Any) -> Any:
    """bf16 element of (``key``, ``dim``) in tile pair ``pair``'s V tile, stored transposed."""
    return pair * layout.PAIR_ELEMENTS + layout.BLOCK * layout.K_ROW + dim * layout.V_ROW + key


def tile_k_word(layout: DrafterLayout, pair: Any, key: Any, dim: Any) -> Any:
    """LDS word (4 bytes) of ``tile_k``: ``dim`` even."""
    return tile_k(layout, pair, key, dim) // 2


def reduce_word(layout: DrafterLayout, wave: Any) -> Any:
    """LDS word of ``wave``'s share of a block reduction: the pool's last ``waves`` words."""
    return layout.pool_words - layout.waves + wave


def merge_max_word(layout: DrafterLayout, wave: Any, c: Any) -> Any:
    """LDS word of chunk ``c``'s running max for ``wave``'s head in a merge task (``c < cpr <= W_NA``): the tile
    pairs' words, which the block's attention chunk has finished with."""
    return wave * layout.W_NA + c


def staged(layout: DrafterLayout, row_in_request: Any, value: Any, dim: Any) -> Any:
    """bf16 element of this step's new key (``value`` 0, normed and rotated) or value (1) of a request's
    row, staged in LDS after the tile pairs (the rows are not in the cache yet when other chunks read)."""
    return 2 * layout.PAIR_ELEMENTS + (2 * row_in_request + value) * layout.model.head_dim + dim


def chunk(c: Any, n_blocks: Any, cpr: Any) -> tuple[Any, Any]:
    """Chunk ``c`` of ``cpr``: its first block counted from the newest, and how many blocks."""
    q0 = (c * n_blocks) // cpr
    return q0, ((c + 1) * n_blocks) // cpr - q0


def partial_at(layout: DrafterLayout, layer: Any, block: Any, row_in_request: Any, head: Any) -> Any:
    """Byte offset of one (m, l, o[D]) float32 partial of an attention block."""
    per_head = (2 + layout.model.head_dim) * 4
    return (scratch_at(layout, layer, "ap") + block * layout.AP_STRIDE
            + (row_in_request * layout.model.q_heads + head) * per_head)


def partial_l(layout: DrafterLayout, layer: Any, block: Any, row_in_request: Any, head: Any) -> Any:
    """Byte offset of a partial's softmax sum l (after its max m, at ``partial_at``)."""
    return partial_at(layout, layer, block, row_in_request, head) + 4


def partial_o(layout: DrafterLayout, layer: Any, block: Any, row_in_request: Any, head: Any, dim: Any) -> Any:
    """Byte offset of a partial's output dimension ``dim`` (float32, after m and l)."""
    return partial_at(layout, layer, block, row_in_request, head) + 8 + 4 * dim


def a8_at(layout: DrafterLayout, row: Any, head: Any, dim: Any) -> Any:
    """Byte offset, in the a8 scratch, of dimension ``dim`` of ``head`` of a merged attention row (8-bit)."""
    return row * layout.model.o_in + head * layout.model.head_dim + dim


def a8_scale_at(layout: DrafterLayout, layer: Any, row: Any, quarter: Any) -> Any:
    """Byte offset of the float32 scale of one head quarter (one merge task's heads) of an
    attention row: the o_proj input is quantised per quarter, as each merge task writes it."""
    return scratch_at(layout, layer, "as") + (row * 4 + quarter) * 4


def merge_task(layout: DrafterLayout, task: Any) -> tuple[Any, Any, Any]:
    """Merge task -> (token row, head quarter, request): each task merges 4 heads of one row."""
    t = task // 4
    return t, task % 4, t // layout.QPR


# ----------------------------------------------------------------- step inputs and the paged KV cache
def position_at(row: Any) -> Any:
    """Byte offset of a token row's position (int32) in ``positions``."""
    return 4 * row


def slot_at(row: Any) -> Any:
    """Byte offset of a token row's cache slot (int32) in ``slots``: where its new K and V go."""
    return 4 * row


def page_at(layout: DrafterLayout, request: Any, bt_width: Any, key: Any) -> Any:
    """Byte offset of the block-table word (int32) naming the page that holds ``key`` of ``request``."""
    return 4 * (request * bt_width + key // layout.BLOCK)


def page_slot(layout: DrafterLayout, page: Any, key: Any) -> Any:
    """The cache slot of ``key`` in its page (the host computes ``slots`` with it too)."""
    return page * layout.BLOCK + key % layout.BLOCK


def cache_at(layout: DrafterLayout, slot: Any, n_pages: Any, value: Any, dim: Any) -> Any:
    """Byte offset in a rank's KV cache, all K pages then all V pages of ``BLOCK`` slots x head_dim
    bf16 each, of dimension ``dim`` of slot ``slot``'s key (``value`` 0) or value (1)."""
    return 2 * ((value * n_pages * layout.BLOCK + slot) * layout.model.head_dim + dim)


def rope_at(layout: DrafterLayout, row: Any, sin: Any, j: Any) -> Any:
    """Byte offset in the float32 RoPE table (per row: the cos of the head_dim / 2 angles, then their
    sin) of angle ``j``'s cos (``sin`` 0) or sin (1) at a token row's position."""
    return 4 * (row * layout.model.head_dim + sin * (layout.model.head_dim // 2) + j)
