"""The drafter megakernel's layout: every constant the kernel reads from ``layout``, derived
from the model's dimensions and a few free choices, with its invariants checked on construction.

Per TP rank (MiniMax drafter, TP4): hidden 6144; 16 query heads and 1 KV head of 128, so the
QKV GEMV has 2304 rows; o_proj reads 2048 and writes 6144; gate and up have 3072 rows each;
down reads 3072 and writes 6144. Blocks take roles by id: ``[0, NG)`` GEMV rows (G),
``[ATT0, NORM0)`` attention and merges (L), ``[NORM0, BLOCKS)`` row norms and all-gathers (N).
Free choices: NG, THREADS, W_NA; the rest follows. Seed values: NG 192, THREADS 512, W_NA 96.
"""

from __future__ import annotations

import functools
import itertools
import operator
from dataclasses import dataclass, field

TP = 4
WAVE = 64
TILE_ROWS = 16  # one MFMA tile of token rows / weight rows
K_BYTES_PER_LANE_CHUNK = 32  # 8-bit weights: one 32-byte chunk per lane and chunk index
# The most chunks of a weight row a lane holds in registers across the token tiles: the seed's 512 threads.
# The offline compile of 2026-12-05 (results/drafter_wide/2026-12-05-peer-coherence/) put holding them at 212
# VGPRs with 512 threads (6 chunks a row; one block per CU either way) but at 360 with 256 threads (12 chunks):
# one block per CU instead of two, where no layout of the MI355X's 64 x 1 bucket is co-resident.
HELD_CHUNKS = 6
NORM_BLOCKS = 16
MAX_ROWS = NORM_BLOCKS * TP  # each norm block owns one row per rank
TAG_BYTES = 4


class LayoutError(ValueError):
    """A layout that breaks a rule; the message names the rule."""


@dataclass(frozen=True)
class ModelDims:
    hidden: int = 6144
    q_heads: int = 16  # per rank
    kv_heads: int = 1  # per rank
    head_dim: int = 128
    intermediate: int = 3072  # per rank
    layers: int = 1
    window: int = 4096  # sliding window of attention, tokens
    kv_block: int = 16  # paged KV cache block, tokens

    @property
    def qkv_rows(self) -> int:
        return (self.q_heads + 2 * self.kv_heads) * self.head_dim

    @property
    def o_in(self) -> int:
        return self.q_heads * self.head_dim


def _seed_name(path: str) -> property:
    """A layout value under the upper-case name the seed kernel gives it (``model.layers`` for ``LAYERS``)."""
    get = operator.attrgetter(path)
    return property(lambda self: get(self), doc=f"``{path}``")


@dataclass(frozen=True)
class DrafterLayout:
    """Construct with ``DrafterLayout(ng=..., threads=..., w_na=..., qpr=...)``; derived fields follow."""

    ng: int = 192
    threads: int = 512
    w_na: int = 96
    qpr: int = 1  # draft tokens (rows) per request
    lds_bytes_limit: int = 64 * 1024  # gfx942; 160 KiB on gfx950
    model: ModelDims = field(default_factory=ModelDims)

    def __post_init__(self) -> None:
        m = self.model
        rules = [
            (self.threads % WAVE == 0 and self.threads >= 256, f"THREADS {self.threads}: a multiple of 64, >= 256"),
            (m.qkv_rows % self.ng == 0, f"QKV rows {m.qkv_rows} must split evenly over NG={self.ng} blocks"),
            (m.qkv_rows // max(self.ng, 1) <= TILE_ROWS, f"QKV_R = {m.qkv_rows}/{self.ng} must fit one 16-row tile"),
            (m.hidden % (TILE_ROWS * self.ng) == 0,
             f"O_R = D_R = {m.hidden}/{self.ng} must be a whole number of 16-row tiles"),
            (m.intermediate % self.ng == 0 and m.intermediate // max(self.ng, 1) <= TILE_ROWS,
             f"GU_R = {m.intermediate}/{self.ng} must be whole and fit one 16-row tile"),
            (all(k % (self.waves * 4 * K_BYTES_PER_LANE_CHUNK) == 0 for k in (m.hidden, m.o_in, m.intermediate)),
             f"every GEMV K ({m.hidden}, {m.o_in}, {m.intermediate}) must be whole chunks of "
             f"{self.waves} waves x 4 lane groups x {K_BYTES_PER_LANE_CHUNK} B"),
            (1 <= self.qpr <= WAVE, f"QPR {self.qpr}: rows per request must be in [1, {WAVE}]"),
            (self.w_na >= MAX_ROWS // max(self.qpr, 1),
             f"W_NA {self.w_na} < the {MAX_ROWS // max(self.qpr, 1)} requests of QPR={self.qpr} rows a launch holds"),
            (m.window % m.kv_block == 0, f"WINDOW {m.window} must be whole KV blocks of {m.kv_block}"),
            (self.pool_words * 4 <= self.lds_bytes_limit,
             f"LDS pool {self.pool_words * 4} B exceeds the {self.lds_bytes_limit} B per block"),
        ]
        for ok, rule in rules:
            if not ok:
                raise LayoutError(rule)
        self._check_offsets()

    # ----------------------------------------------------------------- the seed's names
    THREADS = _seed_name("threads")
    NG = _seed_name("ng")
    W_NA = _seed_name("w_na")
    QPR = _seed_name("qpr")
    LAYERS = _seed_name("model.layers")
    BLOCK = _seed_name("model.kv_block")  # tokens per paged KV block
    WINDOW = _seed_name("model.window")

    # Slots of the per-layer pointer table ``tab`` (16 two-word entries per layer); the step's ``seq_lens``
    # address is in every layer's (the kernel reads layer 0's).
    T_CACHE, T_NBLK, T_Q_NORM, T_K_NORM, T_IN_LN, T_POST_LN, T_SEQ_LENS = range(7)
    TABLE_SLOTS = 16

    # ----------------------------------------------------------------- roles and GEMV rows
    @property
    def waves(self) -> int:
        return self.threads // WAVE

    @property
    def ATT0(self) -> int:  # the kernel's names
        return self.ng

    @property
    def NORM0(self) -> int:
        return self.ng + self.w_na

    @property
    def BLOCKS(self) -> int:
        return self.NORM0 + NORM_BLOCKS

    @property
    def QKV_N(self) -> int:
        return self.model.qkv_rows

    @property
    def QKV_R(self) -> int:
        return self.model.qkv_rows // self.ng

    @property
    def O_R(self) -> int:
        return self.model.hidden // self.ng

    @property
    def D_R(self) -> int:
        return self.model.hidden // self.ng

    @property
    def GU_R(self) -> int:
        return self.model.intermediate // self.ng

    @property
    def IR(self) -> int:  # up rows start after the gate rows
        return self.model.intermediate

    def chunks(self, k: int) -> int:
        """32-byte chunks each lane reads of a K-long 8-bit weight row."""
        return k // (self.waves * 4 * K_BYTES_PER_LANE_CHUNK)

    @property
    def holds_weights(self) -> bool:
        """Whether a G block holds its weight tile in registers across the token tiles (``HELD_CHUNKS``)."""
        return self.chunks(self.model.hidden) <= HELD_CHUNKS

    # ----------------------------------------------------------------- peer memory (bytes)
    @property
    def ROW_PAIRS(self) -> int:  # bf16 pairs of one hidden row
        return self.model.hidden // 2

    @property
    def RS_STRIDE(self) -> int:  # one source rank's reduce-scatter area
        return (MAX_ROWS // TP) * self.ROW_PAIRS * (4 + TAG_BYTES)

    @property
    def AG_X8_BYTES(self) -> int:  # all-gathered 8-bit rows with scale and tag
        return MAX_ROWS * (self.model.hidden + 4 + TAG_BYTES)

    @property
    def AG_BF_BYTES(self) -> int:  # all-gathered bf16 rows (final norm), tagged pairs
        return MAX_ROWS * self.ROW_PAIRS * (4 + TAG_BYTES)

    @property
    def Y_RSO(self) -> int:
        return 0

    @property
    def Y_RSD(self) -> int:
        return self.Y_RSO + TP * self.RS_STRIDE

    @property
    def Y_AGX(self) -> int:
        return self.Y_RSD + TP * self.RS_STRIDE

    @property
    def Y_AGH(self) -> int:
        return self.Y_AGX + self.AG_X8_BYTES

    @property
    def Y_AGF(self) -> int:
        return self.Y_AGH + self.AG_X8_BYTES

    @property
    def Y_BYTES(self) -> int:  # one rank's symmetric region
        return self.Y_AGF + self.AG_BF_BYTES

    # ----------------------------------------------------------------- per-layer scratch (bytes)
    def _scratch_sizes(self) -> dict[str, int]:
        m = self.model
        return {
            "x8": MAX_ROWS * m.hidden, "xs": MAX_ROWS * 4, "qkv": MAX_ROWS * m.qkv_rows * 2,
            "a8": MAX_ROWS * m.o_in, "as": MAX_ROWS * 4 * 4, "h8": MAX_ROWS * m.hidden, "hs": MAX_ROWS * 4,
            "act": MAX_ROWS * m.intermediate * 2, "ap": self.w_na * self.AP_STRIDE,
        }

    @functools.cached_property
    def W_L_OFF(self) -> dict[str, int]:  # a layer's activations, partials
        return _packed(self._scratch_sizes(), align=256)

    @property
    def AP_STRIDE(self) -> int:  # one attention block's partials: (m, l, o[128]) per row and head
        return self.qpr * self.model.q_heads * (2 + self.model.head_dim) * 4

    def _flag_counts(self) -> dict[str, int]:
        return {"x8f": MAX_ROWS, "qkvf": self.ng, "apf": self.w_na, "attf": MAX_ROWS * 4, "h8f": MAX_ROWS,
                "actf": self.ng}

    @functools.cached_property
    def W_F_OFF(self) -> dict[str, int]:  # flags: one 8-byte (count, tag) word per publisher
        sizes = self._scratch_sizes()
        end = max(off + sizes[name] for name, off in self.W_L_OFF.items())
        base = -(-end // 256) * 256
        flags = _packed({k: 8 * n for k, n in self._flag_counts().items()}, align=256)
        return {k: base + v for k, v in flags.items()}

    @functools.cached_property
    def W_LAYER_BYTES(self) -> int:  # one layer's scratch and flags, page aligned
        counts = self._flag_counts()
        end = max(off + 8 * counts[name] for name, off in self.W_F_OFF.items())
        return -(-end // 4096) * 4096

    # ----------------------------------------------------------------- LDS pool (32-bit words)
    # The attention's tiles, in bf16 elements. An MFMA operand read takes 8 bytes from each of 16 tile rows
    # (K: 16 keys, V transposed: 16 dims); unpadded, those rows lie 256 and 32 bytes apart, in 1 and 4 of
    # LDS's 32 four-byte banks: 16- and 4-way conflicts. 4 elements of padding put them in 16 different
    # bank pairs.
    @property
    def K_ROW(self) -> int:
        return self.model.head_dim + 4

    @property
    def V_ROW(self) -> int:
        return self.model.kv_block + 4

    @property
    def PAIR_ELEMENTS(self) -> int:  # one K tile and one V tile
        return self.BLOCK * self.K_ROW + self.model.head_dim * self.V_ROW

    @property
    def pool_words(self) -> int:
        """The largest role's LDS: GEMV reductions, attention tiles and staged rows, or a norm row."""
        gemv = 2 * self.waves * TILE_ROWS * TILE_ROWS
        attention = self.PAIR_ELEMENTS + self.qpr * self.model.head_dim  # 2 K|V tile pairs, new rows (words)
        norm = self.model.hidden // 2 + self.waves
        return max(gemv, attention, norm)

    def _check_offsets(self) -> None:
        sizes = {**self._scratch_sizes(), **{k: 8 * n for k, n in self._flag_counts().items()}}
        regions = sorted({**self.W_L_OFF, **self.W_F_OFF}.items(), key=lambda kv: kv[1])
        for (name, start), (nxt, nstart) in itertools.pairwise(regions):
            if start + sizes[name] > nstart:
                raise LayoutError(f"scratch regions overlap: {name} runs into {nxt}")
        if regions[-1][1] + sizes[regions[-1][0]] > self.W_LAYER_BYTES:
            raise LayoutError("scratch regions overrun W_LAYER_BYTES")
        peer = [("rso", self.Y_RSO, TP * self.RS_STRIDE), ("rsd", self.Y_RSD, TP * self.RS_STRIDE),
                ("agx", self.Y_AGX, self.AG_X8_BYTES), ("agh", self.Y_AGH, self.AG_X8_BYTES),
                ("agf", self.Y_AGF, self.AG_BF_BYTES)]
        for (a, sa, la), (b, sb, _) in itertools.pairwise(peer):
            if sa + la > sb:
                raise LayoutError(f"peer regions overlap: {a} runs into {b}")

    def check_rows(self, n_rows: int) -> None:
        """A launch's ``n_rows``: at most 64 (16 norm blocks x 4 ranks), whole requests."""
        if not 1 <= n_rows <= MAX_ROWS:
            raise LayoutError(f"n_rows {n_rows} must be in [1, {MAX_ROWS}]")
        if n_rows % self.qpr:
            raise LayoutError(f"n_rows {n_rows} must be whole requests of QPR={self.qpr} rows")


def _packed(sizes: dict[str, int], align: int) -> dict[str, int]:
    """Offsets of regions laid one after another, each aligned."""
    out, at = {}, 0
    for name, size in sizes.items():
        at = -(-at // align) * align
        out[name] = at
        at += size
    return out
