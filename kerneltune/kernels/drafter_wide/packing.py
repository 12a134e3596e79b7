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
from .master_weights import DrawnWeights, gemv32
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


def pack_rank(d: Dims, weights: Weights | DrawnWeights, rank: int, arch: str) -> dict[str, PackedWeight]:
    """Every GEMV weight of ``rank``, all layers, quantised row by row for ``arch``."""
    return pack_ranks(d, weights, arch, (rank,))[0]


def pack_ranks(d: Dims, weights: Weights | DrawnWeights, arch: str, ranks: tuple[int, ...] = tuple(range(TP))
               ) -> list[dict[str, PackedWeight]]:
    """``pack_rank`` of each of ``ranks``, every matrix drawn once for them all and in the order it was drawn
    (``master_weights``: one float32 matrix held at a time). Rows are quantised each with its own scale, so a
    rank's rows of ``gu`` (its gate rows, then its up rows) are its gate's codes, then its up's."""
    qh, kvh, inter, hd = d.q_heads // TP, d.kv_heads // TP, d.intermediate // TP, d.head_dim
    nq, nkv = d.q_heads * hd, d.kv_heads * hd
    codes: list[dict[str, list[torch.Tensor]]] = [{k: [] for k in ("qkv", "o", "gu", "d")} for _ in ranks]
    scales: list[dict[str, list[torch.Tensor]]] = [{k: [] for k in ("qkv", "o", "gu", "d")} for _ in ranks]

    def quantised(parts: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        c, s = zip(*(f8_codes(p, arch) for p in parts), strict=True)
        return torch.cat([q.view(torch.uint8) for q in c]), torch.cat([x[:, 0] for x in s])

    def add(i: int, name: str, parts: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        codes[i][name].append(torch.cat([c for c, _ in parts]))
        scales[i][name].append(torch.cat([s for _, s in parts]))

    for layer in range(d.layers):
        w = gemv32(weights, layer, "qkv")
        for i, r in enumerate(ranks):
            k0 = nq + r * kvh * hd
            add(i, "qkv", [quantised([w[r * qh * hd:(r + 1) * qh * hd], w[k0:k0 + kvh * hd],
                                      w[k0 + nkv:k0 + nkv + kvh * hd]])])
        w = gemv32(weights, layer, "o")
        for i, r in enumerate(ranks):
            add(i, "o", [quantised([w[:, r * qh * hd:(r + 1) * qh * hd]])])
        w = gemv32(weights, layer, "gate")
        gate = [quantised([w[r * inter:(r + 1) * inter]]) for r in ranks]
        w = gemv32(weights, layer, "up")
        for i, r in enumerate(ranks):
            add(i, "gu", [gate[i], quantised([w[r * inter:(r + 1) * inter]])])
        w = gemv32(weights, layer, "down")
        for i, r in enumerate(ranks):
            add(i, "d", [quantised([w[:, r * inter:(r + 1) * inter]])])
        del w, gate
    return [{k: PackedWeight(torch.stack(codes[i][k]), torch.stack(scales[i][k])) for k in codes[i]}
            for i in range(len(ranks))]


def weight_bytes(packed: dict[str, PackedWeight]) -> int:
    """Bytes of weights and scales one rank streams per step: its share of the HBM floor."""
    return sum(p.nbytes for p in packed.values())
