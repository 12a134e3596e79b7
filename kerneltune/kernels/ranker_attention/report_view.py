"""The ranker's own section of a bucket in the HTML report: the best time per (block_q, block_kv) tile,
as % slower than the bucket's best (a Plotly heat map; the report gives it its colour scale)."""

from __future__ import annotations

from typing import Any

import pandas as pd


def tile_heatmap(df: pd.DataFrame, bucket: str) -> Any:
    import plotly.graph_objects as go

    timed = df[df["median_us"].notna()] if "median_us" in df else df.iloc[0:0]
    if "config_block_q" not in timed or "config_block_kv" not in timed or timed.empty:
        return None
    best = timed.groupby(["config_block_q", "config_block_kv"])["median_us"].min()
    qs = sorted(int(q) for q in timed["config_block_q"].unique())
    ks = sorted(int(k) for k in timed["config_block_kv"].unique())
    lo = float(best.min())
    z = [[None if (q, k) not in best else (float(best[(q, k)]) / lo - 1) * 100 for k in ks] for q in qs]
    text = [["" if (q, k) not in best else f"{float(best[(q, k)]):.1f} µs" for k in ks] for q in qs]
    fig = go.Figure(go.Heatmap(z=z, x=[f"kv {k}" for k in ks], y=[f"q {q}" for q in qs], text=text,
                               texttemplate="%{text}",
                               hovertemplate="block_q %{y}, block_kv %{x}: %{text} (+%{z:.1f}%)<extra></extra>"))
    fig.update_layout(title="best per tile (block_q × block_kv)")
    return fig
