"""The ranker's own section of a bucket in the HTML report: best time per (block_q, block_kv) tile."""

from __future__ import annotations

import html
import math

import pandas as pd


def tile_heatmap(df: pd.DataFrame, bucket: str) -> str:
    if "config_block_q" not in df or "config_block_kv" not in df or df.empty:
        return ""
    best = df.groupby(["config_block_q", "config_block_kv"])["median_us"].min()
    qs = sorted(df["config_block_q"].unique())
    ks = sorted(df["config_block_kv"].unique())
    lo, hi = best.min(), best.max()
    cell, pad = 70, 80
    parts = [f'<svg class="heatmap" width="{pad + cell * len(ks) + 10}" height="{pad + cell * len(qs) + 10}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>best µs by block_q × block_kv, {html.escape(bucket)}</title>']
    for j, k in enumerate(ks):
        parts.append(f'<text x="{pad + j * cell + 20}" y="{pad - 8}" font-size="12">kv {k}</text>')
    for i, q in enumerate(qs):
        parts.append(f'<text x="5" y="{pad + i * cell + 38}" font-size="12">q {q}</text>')
        for j, k in enumerate(ks):
            v = best.get((q, k))
            if v is None or (isinstance(v, float) and math.isnan(v)):
                fill, label = "#ddd", "—"
            else:
                f = 0.0 if hi == lo else (v - lo) / (hi - lo)
                fill, label = f"rgb({int(80 + 175 * f)},{int(200 - 120 * f)},90)", f"{v:.0f}"
            parts.append(f'<rect x="{pad + j * cell}" y="{pad + i * cell}" width="{cell - 2}" height="{cell - 2}" '
                         f'fill="{fill}"/><text x="{pad + j * cell + 12}" y="{pad + i * cell + 38}" '
                         f'font-size="12">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


