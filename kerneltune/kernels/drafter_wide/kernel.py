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
per row and head quarter (one merge task's heads, ``indexing.a8_scale_at``) and the down projection's input
per 128-value chunk of a row (``indexing.CHUNK_K``), finer than ``reference.forward_tp4``'s per-row scale.

The roles, each in its module and traced in this order of the grid: ``gemv_role.py`` (G),
``attention_role.py`` then ``merge_role.py`` (L), ``norm_role.py`` (N); ``block.py`` holds what they
share (the arguments, a block's lanes and LDS pool, the lane helpers), ``device.py`` the memory,
flag and MFMA primitives.
"""

from . import indexing as ix
from .kernel_args import KERNEL_ARG_SPEC
from .layout import WAVE, DrafterLayout

__all__ = ["KERNEL_ARG_SPEC", "KERNEL_FILES", "build_wide", "build_wide_for"]

# The kernel's own code: this launcher, its parameters and the roles it traces (the device helpers are
# ``device.py``).
KERNEL_FILES = ("kernel.py", "kernel_args.py", "block.py", "gemv_role.py", "attention_role.py", "merge_role.py",
                "norm_role.py")


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
    from flydsl.expr import range_constexpr

    from .attention_role import AttentionRole
    from .block import I32, I64, Block
    from .gemv_role import GemvRole
    from .kernel_args import KernelArgs
    from .norm_role import NormRole, OwnedRow
    from .reference import F8_MAX

    if arch not in F8_MAX:
        raise ValueError(f"arch: {arch!r} is not one of {sorted(F8_MAX)}")
    L, m = layout, layout.model
    threads = L.threads
    if m.head_dim != 2 * WAVE:
        raise ValueError(f"head_dim {m.head_dim}: the attention maps one head onto one wave of {WAVE} lanes x 2")
    if L.ROW_PAIRS % threads:
        raise ValueError(f"threads {threads} must divide a row's {L.ROW_PAIRS} bf16 pairs")
    if ix.merge_max_word(L, L.waves, 0) > ix.reduce_word(L, 0):  # every wave's chunk maxima of a merge task
        raise ValueError(f"LDS pool of {L.pool_words} words cannot hold {L.waves} x {L.W_NA} chunk maxima")
    if ix.red_word(L, 2, 0, 0, 0) > ix.reduce_word(L, 0):  # the two GEMV slots, then the reductions' words
        raise ValueError(f"LDS pool of {L.pool_words} words cannot hold {ix.red_word(L, 2, 0, 0, 0)} + {L.waves}")
    if L.BLOCK != 16 or m.q_heads != 16:
        raise ValueError(f"KV block {L.BLOCK}, {m.q_heads} heads: the attention's MFMA tile is 16 keys x 16 heads")

    @fx.struct
    class Smem:
        pool: fx.Array[fx.Float32, L.pool_words, 16]

    @flyc.kernel(name=f"drafter_wide_{arch}", known_block_size=[threads, 1, 1])
    def drafter_wide(x_in: I64, h_out: I64, tab: I64, w_qkv: I64, s_qkv: I64, w_o: I64, s_o: I64, w_gu: I64,
                     s_gu: I64, w_d: I64, s_d: I64, fin_ln: I64, cos_sin: I64, block_table: I64, positions: I64,
                     slots: I64, scratch: I64, sym: I64, peers: I64, step: I64, health: I64, rank: I32,
                     bt_width: I32, n_rows: I32):
        args = KernelArgs(x_in, h_out, tab, w_qkv, s_qkv, w_o, s_o, w_gu, s_gu, w_d, s_d, fin_ln, cos_sin,
                          block_table, positions, slots, scratch, sym, peers, step, health, rank, bt_width, n_rows)
        b = Block.enter(L, F8_MAX[arch], yw, wait_ticks, args, Smem)
        row = OwnedRow.of(b)  # an N block's token row
        if b.bid < L.NG:
            for layer in range_constexpr(L.LAYERS):
                GemvRole.of(b).run(layer, ix.tag(b.step, layer))
        elif b.bid < L.NORM0:
            seq_len = AttentionRole.of(b).request_length()
            for layer in range_constexpr(L.LAYERS):
                AttentionRole.of(b).run(layer, ix.tag(b.step, layer), seq_len)
        else:
            NormRole.of(b).run(row)

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
