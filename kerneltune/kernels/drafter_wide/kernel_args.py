"""The megakernel's 24 parameters, in order: the one list its launcher's two signatures (checked against it by a
test), the offline compile's argument spec and every host that launches it (by name) are built from.

Twenty-one byte addresses, then the rank, the block table's width and the launch's row count. Every pointer is
loaded at entry and held in SGPRs through every role, so the step's ``seq_lens`` travels in the pointer table and
the four ranks' symmetric regions in one device array (``peers``): as arguments of their own, the MFMA attention's
extra scalars cost 3-6 SGPR spills."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

I32_ARGS = frozenset({"rank", "bt_width", "n_rows"})  # the rest are 64-bit addresses


@dataclass(frozen=True)
class KernelArgs:
    x_in: Any
    h_out: Any
    tab: Any  # the per-layer pointer table (``DrafterLayout.TABLE_SLOTS`` entries a layer)
    w_qkv: Any
    s_qkv: Any
    w_o: Any
    s_o: Any
    w_gu: Any
    s_gu: Any
    w_d: Any
    s_d: Any
    fin_ln: Any
    cos_sin: Any
    block_table: Any
    positions: Any
    slots: Any
    scratch: Any
    sym: Any
    peers: Any
    step: Any
    health: Any
    rank: Any
    bt_width: Any
    n_rows: Any

    def ordered(self) -> list[Any]:
        """The values in the launcher's order."""
        return [getattr(self, name) for name in ARG_NAMES]


ARG_NAMES: tuple[str, ...] = tuple(f.name for f in fields(KernelArgs))
ARG_TYPES: tuple[str, ...] = tuple("i32" if name in I32_ARGS else "i64" for name in ARG_NAMES)
KERNEL_ARG_SPEC = [[t, None] for t in ARG_TYPES]  # as the offline compile describes the parameters
