"""A rank's weights in the megakernel's format, from the reference's float64 master weights.

Per layer, row-major 8-bit rows with one float32 scale per row (the reference's
``f8_codes``): ``w_qkv [QKV_N, H]`` (this rank's q heads, then its k and v head),
``w_o [H, o_in]`` (this rank's input columns), ``w_gu [2 IR, H]`` (gate rows, then up rows),
``w_d [H, IR]``; layers stacked, so layer ``l`` of a weight starts at ``l`` times its per-layer
bytes, as the kernel addresses it. The bytes are what the runner uploads; ``dequantize`` gives
back the float64 values the reference's TP4 computation uses, which the tests compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .layout import TP
from .reference import F8_DTYPE, Dims, Weights, f8_codes


@dataclass(frozen=True)
class PackedWeight:
    data: torch.Tensor  # uint8 [layers, rows, K]: the 8-bit codes
    scale: torch.Tensor  # float32 [layers, rows]

    def dequantize(self, arch: str) -> torch.Tensor:
        return self.data.view(F8_DTYPE[arch]).to(torch.float64) * self.scale.to(torch.float64)[..., None]

    @property
    def nbytes(self) -> int:
        return self.data.numel() + 4 * self.scale.numel()


def rank_slices(d: Dims, w: dict[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor]:
    """This rank's float64 rows of each GEMV, in the kernel's row order."""
    qh, kvh, inter, hd = d.q_heads // TP, d.kv_heads // TP, d.intermediate // TP, d.head_dim
    nq, nkv = d.q_heads * hd, d.kv_heads * hd
    q_rows = slice(rank * qh * hd, (rank + 1) * qh * hd)
    k_rows = slice(nq + rank * kvh * hd, nq + (rank + 1) * kvh * hd)
    v_rows = slice(k_rows.start + nkv, k_rows.stop + nkv)
    i_rows = slice(rank * inter, (rank + 1) * inter)
    return {
        "qkv": torch.cat([w["qkv"][q_rows], w["qkv"][k_rows], w["qkv"][v_rows]]),
        "o": w["o"][:, rank * qh * hd:(rank + 1) * qh * hd],
        "gu": torch.cat([w["gate"][i_rows], w["up"][i_rows]]),
        "d": w["down"][:, i_rows],
    }


def pack_rank(d: Dims, weights: Weights, rank: int, arch: str) -> dict[str, PackedWeight]:
    """Every GEMV weight of ``rank``, all layers, quantised row by row for ``arch``."""
    slices = [rank_slices(d, layer, rank) for layer in weights.layers]
    out: dict[str, PackedWeight] = {}
    for name in ("qkv", "o", "gu", "d"):
        codes, scales = zip(*(f8_codes(rows[name], arch) for rows in slices), strict=True)
        out[name] = PackedWeight(torch.stack([q.view(torch.uint8) for q in codes]),
                                 torch.stack([s[:, 0] for s in scales]))
    return out


def weight_bytes(packed: dict[str, PackedWeight]) -> int:
    """Bytes of weights and scales one rank streams per step: its share of the HBM floor."""
    return sum(p.nbytes for p in packed.values())
