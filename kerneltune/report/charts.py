"""The report's charts, drawn by Plotly: axes, ticks, labels and hover; the page embeds plotly.js once,
so it stays one self-contained file that opens offline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .configs import config_text
from .frame import row_config

# "x% slower than the bucket's best" on one fixed scale for every bucket and chart: 0% green, 25% and
# beyond red, so 517 µs against 520 µs reads as the same colour, not as the two ends of the range.
SLOWER_SCALE_MAX = 25.0
SLOWER_COLORS = [[0.0, "#1a9850"], [0.2, "#91cf60"], [0.4, "#fee08b"], [0.7, "#fc8d59"], [1.0, "#d73027"]]


def plotly_js() -> str:
    """plotly.js itself, for one inline <script> in the page head."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def heatmap(fig: Any, name: str) -> str:
    """A kernel's heat map of "% slower than the best", on the fixed scale."""
    fig.update_traces(zmin=0, zmax=SLOWER_SCALE_MAX, colorscale=SLOWER_COLORS,
                      colorbar={"title": {"text": "% slower"}}, selector={"type": "heatmap"})
    return _div(fig, name)


def _div(fig: Any, name: str) -> str:
    fig.update_layout(autosize=True, margin={"l": 60, "r": 20, "t": 40, "b": 50}, template="plotly_white",
                      font={"size": 12})
    # The chart takes its cell's width (Plotly's default is a fixed 700 px, which a narrow cell would cut).
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=name, default_width="100%",
                       default_height="320px", config={"responsive": True, "displayModeBar": False})


def config_label(row: Mapping[str, Any], config_cols: list[str], defaults: Mapping[str, Any]) -> str:
    """A frame row's config (its ``config_*`` columns) as the fields that differ from the defaults."""
    return config_text(row_config(row, config_cols), defaults)


def slower_color(pct: float) -> str:
    """The fixed scale's colour for ``pct`` % slower than the best, as the charts draw it."""
    from plotly.colors import sample_colorscale

    return sample_colorscale(SLOWER_COLORS, [min(max(pct / SLOWER_SCALE_MAX, 0.0), 1.0)])[0]


def best_so_far(df: pd.DataFrame) -> dict[str, pd.Series]:
    """Each strategy's best time so far, candidate by candidate in the order they were measured: by time, and
    within one time (whole seconds: a fast sweep measures many a second) in journal order, the frame's index
    (``load_frame``). Sorted by time alone, a bucket's rows ranked fastest first stayed so within each second, and
    the chart was flat at the best from the first candidate."""
    timed = df[df["median_us"].notna()].sort_index().sort_values("time", kind="stable", na_position="last")
    return {str(strategy): runs["median_us"].astype(float).cummin()
            for strategy, runs in timed.groupby(timed["strategy"].fillna("?"), sort=True)}


def convergence(df: pd.DataFrame, name: str) -> str:
    """Best time so far against candidates measured, in the order they were measured, one line per strategy."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for strategy, best in best_so_far(df).items():
        fig.add_trace(go.Scatter(
            x=list(range(1, len(best) + 1)), y=best, mode="lines+markers", name=str(strategy),
            hovertemplate="candidate %{x}<br>best so far %{y:.1f} µs<extra>%{fullData.name}</extra>"))
    fig.update_layout(title="best so far", xaxis_title="candidates measured", yaxis_title="median µs",
                      showlegend=True)
    return _div(fig, name)


def time_by_config(df: pd.DataFrame, config_cols: list[str], defaults: Mapping[str, Any], name: str) -> str:
    """Every timed candidate's median against its config (fastest first), coloured by % slower than the
    bucket's best on the fixed scale; hover gives the whole config and the spread."""
    import plotly.graph_objects as go

    timed = df[df["median_us"].notna()].sort_values("median_us")
    best = float(timed["median_us"].min())
    slower = (timed["median_us"].astype(float) / best - 1) * 100
    labels = [config_label(r, config_cols, defaults) for _, r in timed.iterrows()]
    whole = ["<br>".join(f"{k}={v}" for k, v in row_config(r, config_cols).items()) for _, r in timed.iterrows()]
    fig = go.Figure(go.Scatter(
        x=list(range(1, len(timed) + 1)), y=timed["median_us"].astype(float), mode="markers",
        marker={"size": 9, "color": slower.clip(upper=SLOWER_SCALE_MAX), "cmin": 0, "cmax": SLOWER_SCALE_MAX,
                "colorscale": SLOWER_COLORS, "colorbar": {"title": {"text": "% slower"}}},
        customdata=list(zip(labels, whole, slower, timed["spread"].astype(float).fillna(0) * 100, strict=True)),
        hovertemplate="%{customdata[0]}<br>%{y:.1f} µs (+%{customdata[2]:.1f}%, spread %{customdata[3]:.2f}%)"
                      "<br>%{customdata[1]}<extra></extra>"))
    fig.update_layout(title="time by config (fastest first)", xaxis_title="config rank", yaxis_title="median µs")
    return _div(fig, name)
