"""A FlyDSL kernel that evaluates ``indexing.py`` on FlyDSL values, one result per thread and
function: the proof that the kernel can trace the same functions the emulation runs on
integers. Compiled offline here; on an AMD GPU its output equals the functions on integers."""

from __future__ import annotations

from . import indexing as ix
from .layout import DrafterLayout

N_ROWS = 61  # a partial last tile


def probe_values(layout: DrafterLayout, tid: object, n_rows: object) -> list[object]:
    """The probed expressions of thread ``tid`` (an int here, a FlyDSL value in the kernel)."""
    row = tid % 64
    cpr = ix.chunks_per_request(layout, n_rows - n_rows % layout.QPR)
    q0, cnt = ix.chunk(tid % cpr, tid % 300 + 1, cpr)
    lo, hi, b0, b1 = ix.window(layout, tid * 37, tid * 37 + layout.QPR)
    t, hq, r = ix.merge_task(layout, tid % (4 * 64))
    return [
        ix.owner_rank(row), ix.owner_slot(row), ix.tile_row(tid // 16 % 4, tid % 16, n_rows),
        ix.rs_pair(layout, layout.Y_RSD, tid % 4, row, (tid % layout.NG) * layout.O_R, tid % 16),
        ix.ag_x8_row(layout, layout.Y_AGX, row), ix.ag_bf_pair(layout, layout.Y_AGF, row, tid % 16),
        ix.flag_word(layout, "apf", tid % layout.W_NA), ix.tag(tid % 5, tid % 3),
        ix.qkv_element(layout, row, tid % layout.NG, tid % layout.QKV_R),
        q0, cnt, lo, hi, b0, b1, t, hq, r,
        ix.position_at(row), ix.slot_at(row), ix.page_at(layout, r, 7, tid * 37),
        ix.page_slot(layout, tid % 11, tid * 37), ix.cache_at(layout, tid * 3, 40, tid % 2, tid % 128),
        ix.rope_at(layout, row, tid % 2, tid % 64),
    ]


def build_index_probe(ng: int, threads: int, w_na: int, qpr: int):
    """The ``@flyc.jit`` launcher: ``out[tid * K + i]`` = the i-th probed value of thread ``tid``."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    layout = DrafterLayout(ng=ng, threads=threads, w_na=w_na, qpr=qpr)
    k = len(probe_values(layout, 0, N_ROWS))

    @flyc.kernel(known_block_size=[threads, 1, 1])
    def drafter_index_probe(out: fx.Tensor):
        tid = fx.Int32(fx.thread_idx.x)
        flat = fx.logical_divide(fx.rocdl.make_buffer_tensor(out), fx.make_layout(1, 1))
        atom = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), 32)
        for i, v in enumerate(probe_values(layout, tid, fx.Int32(N_ROWS))):
            r = fx.make_rmem_tensor(1, fx.Int32)
            fx.memref_store(fx.Int32(v), r, 0)
            fx.copy(atom, r, fx.slice(flat, (None, tid * k + i)))

    @flyc.jit
    def launch(out: fx.Tensor, stream: fx.Stream = fx.Stream(None)):  # noqa: B008
        drafter_index_probe(out).launch(grid=(1, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch
