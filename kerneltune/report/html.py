"""One self-contained HTML page: inline CSS, plotly.js inline once, no network needed to view it.

Grouped by kernel, then run, then bucket. Every time is also shown as "x% slower than the bucket's
best", coloured on one fixed scale (``charts.SLOWER_SCALE_MAX``), so colours compare across buckets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import jinja2
import pandas as pd
from markupsafe import Markup

from kerneltune.files.paths import make_folder
from kerneltune.files.records import Entry
from kerneltune.files.safe_io import write_atomic
from kerneltune.seams.protocols import Capability, ReportView
from kerneltune.seams.registry import UnknownName, registered_kernel

from . import charts
from .frame import row_config
from .rates import rate_text

TOP = 15  # ranking rows shown open; the rest fold under "all N candidates"

TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kerneltune report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>{{ plotly_js }}</script>
<style>
/* Charts sit in grid tracks that exist before any chart draws itself (auto-fill), so each one sizes to
   its own cell as its script runs, never to the whole row. */
body{font-family:system-ui,sans-serif;margin:1.5em auto;padding:0 1em;max-width:1240px;color:#222;
  box-sizing:border-box}
table{border-collapse:collapse;margin:0.5em 0 1.2em;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;overflow-wrap:anywhere;vertical-align:top}
th{background:#f0f0f0;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#070}.fail{color:#a00}.faster{background:#dfd}.slower{background:#fdd}
h2{margin-top:2em;border-bottom:2px solid #444}h3{margin-top:1.5em;border-bottom:1px solid #ddd}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:8px}.charts>div{min-width:0}
nav ul{columns:3 240px;font-size:13px}details summary{cursor:pointer;color:#36c}
.legend span{display:inline-block;padding:0 6px;margin-right:2px;font-size:12px}
</style></head><body>
<h1>kerneltune report</h1>
<p>{{ n_candidates }} candidates from {{ n_journals }} journal(s); devices: {{ devices }}.
Times are medians; "slower" is against the bucket's best in the same run, on one fixed colour scale:
<span class="legend">{% for label, color in legend %}<span style="background:{{ color }}">{{ label }}</span>
{% endfor %}</span>
</p>
<nav><ul>{% for k in kernels %}{% for run in k.runs %}{% for b in run.buckets %}
<li><a href="#{{ b.anchor }}">{{ k.name }} · {{ run.name }} · {{ b.name }}</a></li>{% endfor %}{% endfor %}{% endfor %}
<li><a href="#failures">failures</a></li><li><a href="#pruned">refused</a></li></ul></nav>
{% if bench %}<h2 id="bench">Against other kernels ({{ bench.device }})</h2>
<table class="bench"><tr><th>shape</th><th>cap</th><th>implementation</th><th>ms</th><th>spread</th>
<th>useful TFLOP/s</th><th>dense TFLOP/s</th><th>rel. error</th><th>× vs kerneltune</th><th>error</th></tr>
{% for r in bench.rows %}<tr><td>{{ r.shape }}</td><td>{{ r.cap_method }}</td><td>{{ r.impl }}</td>
<td class="num">{{ r.ms }}</td><td class="num">{{ r.spread }}</td><td class="num">{{ r.useful }}</td>
<td class="num">{{ r.dense }}</td><td class="num">{{ r.rel }}</td><td class="num">{{ r.ratio }}</td>
<td class="fail">{{ r.error }}</td></tr>
{% endfor %}</table>{% endif %}
{% if targets %}<h3 id="bench-targets">Targets ({{ targets.source }})</h3>
{% if targets.rows %}<table class="targets">
<tr><th>target</th><th>shape</th><th>cap</th><th>value</th><th>at least</th><th>verdict</th><th>how</th></tr>
{% for t in targets.rows %}<tr class="{{ t.css }}"><td>{{ t.target }}</td><td>{{ t.shape }}</td>
<td>{{ t.cap_method }}</td><td>{{ t.value_text }}</td><td>{{ t.at_least }}</td><td>{{ t.verdict }}</td>
<td>{{ t.note }}</td></tr>
{% endfor %}</table>{% endif %}{% endif %}
{% if baseline %}<h2 id="baseline">Against the baseline</h2>
<table class="baseline"><tr><th>bucket</th><th>best µs</th><th>baseline µs</th><th>ratio</th><th>verdict</th></tr>
{% for b in baseline %}<tr class="{{ b.verdict }}"><td>{{ b.bucket }}</td>
<td class="num">{{ '%.1f'|format(b.best) }}</td><td class="num">{{ '%.1f'|format(b.base) }}</td>
<td class="num">{{ '%.3f'|format(b.ratio) }}</td>
<td>{{ b.verdict }}</td></tr>{% endfor %}
</table>{% endif %}
{% for k in kernels %}<h2 id="kernel-{{ k.name }}" class="kernel">{{ k.name }}</h2>
{% for run in k.runs %}{% for b in run.buckets %}
<h3 id="{{ b.anchor }}">{{ b.name }} <small>(run {{ run.name }})</small></h3>
<div class="charts">{{ b.convergence }}{{ b.scatter }}{{ b.view }}</div>
{% macro rows(items, start) %}{% for r in items %}<tr><td class="num">{{ start + loop.index }}</td>
<td title="{{ r.whole }}">{{ r.config }}</td><td class="num">{{ r.median }}</td>
<td class="num" style="background:{{ r.color }}">{{ r.slower }}</td><td class="num">{{ r.spread }}</td>
<td class="num">{{ r.score }}</td><td class="num">{{ r.tflops }}</td><td class="num">{{ r.pct }}</td>
<td class="ok">{{ r.status }}</td></tr>{% endfor %}{% endmacro %}
{% set head %}<tr><th>#</th><th>config (what differs from the defaults)</th><th>median µs</th><th>slower</th>
<th>spread</th><th>static score</th><th>rate</th><th>% ceiling</th><th>status</th></tr>{% endset %}
<p class="source">Ranked: kernel source <code>{{ b.source }}</code>, the source of the bucket's newest records
{%- if b.older %}; the records of {{ b.older|length }} older source(s) are ranked apart below{% endif %}.</p>
<table class="ranking">{{ head }}{{ rows(b.ranking[:top], 0) }}</table>
{% if b.ranking|length > top %}<details><summary>all {{ b.ranking|length }} candidates</summary>
<table class="ranking-rest">{{ head }}{{ rows(b.ranking[top:], top) }}</table></details>{% endif %}
{% for o in b.older %}<details class="older"><summary>{{ o.ranking|length }} candidates of an older kernel source
<code>{{ o.source }}</code>, ranked apart</summary>
<table class="ranking-older">{{ head }}{{ rows(o.ranking, 0) }}</table></details>{% endfor %}
{% endfor %}{% endfor %}{% endfor %}
{% macro failure_table(rows) %}<table class="failures">
<tr><th>kernel</th><th>run</th><th>bucket</th><th>config</th><th>message</th></tr>
{% for r in rows %}<tr><td>{{ r.kernel }}</td><td>{{ r.run }}</td><td>{{ r.bucket }}</td><td>{{ r.config }}</td>
<td class="fail">{{ r.error }}</td></tr>
{% endfor %}</table>{% endmacro %}
<h2 id="failures">Failures by kind</h2>
{% for kind, rows in failures %}<h3>{{ kind }} ({{ rows|length }})</h3>
{% if rows|length > 10 %}<details><summary>all {{ rows|length }}</summary>{{ failure_table(rows) }}</details>
{% else %}{{ failure_table(rows) }}{% endif %}{% else %}<p>None.</p>{% endfor %}
<h2 id="pruned">Refused</h2>
{% if pruned %}<p>Configs the kernel refused for the bucket's problem before anything compiled: not failures,
counted apart. (Configs a space's constraints rule out are counted in the sweep's summary, not journaled.)</p>
<details><summary>{{ pruned|length }} configs</summary>{{ failure_table(pruned) }}</details>
{% else %}<p>None.</p>{% endif %}
<script>document.documentElement.dataset.scrollWidth = document.documentElement.scrollWidth;</script>
</body></html>""", autoescape=True)


def _kernel(name: str) -> Any:
    """The journal's kernel, by its registered name only: a journal naming ``module:attr`` imports nothing."""
    try:
        return registered_kernel(name)
    except UnknownName:
        return None


def _kernel_view(kernel: Any, df: pd.DataFrame, bucket: str, name: str) -> str:
    """The kernel's own chart of a bucket (the ranker's tile heat map), where it declares one."""
    if kernel is None or Capability.REPORT_VIEW not in kernel.capabilities:
        return ""
    fig = cast(ReportView, kernel).report_view(df, bucket)
    return "" if fig is None else charts.heatmap(fig, name)


def _text(x: Any, spec: str) -> str:
    return "-" if x is None or pd.isna(x) else format(x, spec)


def _sources(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The bucket's records by kernel source, the current one first: the source of its newest record (a re-sweep of
    an edited kernel into the same folder once ranked one config #1 and #4, one row per source), then the older
    ones, newest first."""
    hashes = df["kernel_hash"].fillna("?").astype(str)
    newest = df.assign(_hash=hashes).groupby("_hash")["time"].max().fillna("").sort_values(ascending=False)
    return [(h, df[hashes == h]) for h in newest.index]


def _ranking(df: pd.DataFrame, cols: list[str], defaults: Mapping[str, Any], timed: bool) -> list[dict[str, Any]]:
    best = df["median_us"].min() if timed else None
    ranking = []
    for _, r in df.iterrows():
        slower = None if best is None or pd.isna(r["median_us"]) else (r["median_us"] / best - 1) * 100
        ranking.append({
            "config": charts.config_label(r, cols, defaults),
            "whole": " ".join(f"{k}={v}" for k, v in row_config(r, cols).items()),
            "median": _text(r["median_us"], ".1f"), "slower": "-" if slower is None else f"+{slower:.1f}%",
            "color": "transparent" if slower is None else charts.slower_color(slower),
            "spread": _text(None if pd.isna(r["spread"]) else 100 * r["spread"], ".2f") + "%",
            "score": _text(r["score"], ".0f"), "tflops": rate_text(r["tflops"]),
            "pct": _text(r["pct_ceiling"], ".1f"), "status": r["status"]})
    return ranking


def _bucket(kernel: Any, name: str, df: pd.DataFrame, config_cols: list[str], anchor: str) -> dict[str, Any]:
    """One bucket: the current kernel source's ranking, its charts and best; older sources' rankings apart."""
    defaults: Mapping[str, Any] = kernel.config_defaults if kernel is not None else {}
    timed = df["median_us"].notna().any()
    df = df.sort_values(["median_us" if timed else "score", "time"])
    cols = [c for c in config_cols if df[c].notna().any()]
    (source, df), *older = _sources(df)
    timed = df["median_us"].notna().any()
    best = df["median_us"].min() if timed else None
    ranking = _ranking(df, cols, defaults, timed)
    apart = [{"source": h, "ranking": _ranking(o, cols, defaults, o["median_us"].notna().any())} for h, o in older]
    charts_html = [charts.convergence(df, f"{anchor}-convergence"),
                   charts.time_by_config(df, cols, defaults, f"{anchor}-scatter")] if timed else []
    best_spread = float(df.loc[df["median_us"] == best, "spread"].fillna(0.0).max()) if timed else 0.0
    return {"name": name, "anchor": anchor, "ranking": ranking, "source": source, "older": apart, "best": best,
            "best_spread": best_spread,
            "convergence": Markup(charts_html[0] if charts_html else ""),
            "scatter": Markup(charts_html[1] if charts_html else ""),
            "view": Markup(_kernel_view(kernel, df, name, f"{anchor}-view") if timed else "")}


def _bench_rows(bench: dict) -> dict:
    """Rows of a `kerneltune bench` result, with each implementation's time over kerneltune's."""
    ours = {(r["shape"], r.get("cap_method")): r.get("median_ms") for r in bench["rows"] if r["impl"] == "kerneltune"}
    rows = []
    for r in bench["rows"]:
        base = ours.get((r["shape"], r.get("cap_method")))
        ratio = r["median_ms"] / base if base and r.get("median_ms") else None
        rows.append({"shape": r["shape"], "cap_method": r.get("cap_method", ""), "impl": r["impl"],
                     "ms": _text(r.get("median_ms"), ".3f"), "spread": _text(r.get("spread"), ".2%"),
                     "useful": _text(r.get("useful_tflops"), ".0f"), "dense": _text(r.get("dense_tflops"), ".0f"),
                     "rel": _text(r.get("rel_error"), ".1e"), "ratio": _text(ratio, ".2f"),
                     "error": r.get("error", "")})
    return {"device": bench.get("stamps", {}).get("gpu", "?"), "rows": rows}


def _target_rows(verdicts: list[dict], source: str) -> dict:
    rows = [{**v, "value_text": "-" if v["value"] is None else f"{v['value']:.2f}", "note": v.get("note", ""),
             "css": {"met": "faster", "missed": "slower"}.get(v["verdict"], "")} for v in verdicts]
    return {"source": source, "rows": rows}


def render_html(frame: pd.DataFrame, n_journals: int, baseline: dict[str, Entry] | None, out: Path,
                bench: dict | None = None, bench_targets: tuple[list[dict], str] | None = None) -> None:
    """The report; ``bench`` is a `kerneltune bench` result, ``bench_targets`` its verdicts and their source."""
    config_cols = [c for c in frame.columns if c.startswith("config_")]
    # Timed candidates by median; a compile-only sweep's by its static score (lower is better).
    # A candidate stopped early is ranked too, its status saying its median is one batch's.
    ranked = frame[frame["status"].isin(("ok", "stopped early"))
                   & (frame["median_us"].notna() | frame["score"].notna())]
    kernels = []
    for kname, kdf in ranked.groupby(ranked["kernel"].fillna("?"), sort=True):
        kernel = _kernel(str(kname))
        runs = []
        for rname, rdf in kdf.groupby("run", sort=True):
            # Element ids from counters only: a bucket or kernel name from a journal never enters markup or
            # the charts' scripts unescaped.
            buckets = [_bucket(kernel, str(b), bdf, config_cols, f"k{len(kernels)}-r{len(runs)}-b{i}")
                       for i, (b, bdf) in enumerate(rdf.groupby("bucket", sort=True))]
            runs.append({"name": rname, "buckets": buckets})
        kernels.append({"name": kname, "runs": runs})
    def listed(df: pd.DataFrame) -> list[dict[str, Any]]:
        return [{"kernel": r["kernel"], "run": r["run"], "bucket": r["bucket"],
                 "config": " ".join(f"{k}={v}" for k, v in row_config(r, config_cols).items()),
                 "error": r["error"]}
                for _, r in df.iterrows()]

    invalid = frame["invalidity"].fillna("")
    failures = [(kind, listed(df)) for kind, df in frame[(invalid != "") & (invalid != "refused")]
                .groupby("invalidity", sort=True)]
    pruned = listed(frame[invalid == "refused"])
    compare = []
    if baseline:
        for b in (b for k in kernels for run in k["runs"] for b in run["buckets"]):
            base = baseline.get(b["name"])
            if base is None or b["best"] is None:
                continue
            noise = max(base.spread or 0.0, b["best_spread"], 0.01)
            ratio = b["best"] / base.median_us
            verdict = "faster" if ratio < 1 - noise else "slower" if ratio > 1 + noise else "same"
            compare.append({"bucket": b["name"], "best": b["best"], "base": base.median_us, "ratio": ratio,
                            "verdict": verdict})
    devices = ", ".join(sorted(str(d) for d in frame["device"].dropna().unique())) or "none"
    legend = [(f"{p:g}%", charts.slower_color(p)) for p in (0, 2, 5, 10, 15, 20)] + [
        (f"≥{charts.SLOWER_SCALE_MAX:g}%", charts.slower_color(charts.SLOWER_SCALE_MAX))]
    make_folder(out.parent)
    write_atomic(out, TEMPLATE.render(n_candidates=len(frame), n_journals=n_journals, devices=devices, kernels=kernels,
                                   failures=failures, pruned=pruned, baseline=compare, top=TOP, legend=legend,
                                   plotly_js=Markup(charts.plotly_js()),
                                   bench=_bench_rows(bench) if bench else None,
                                   targets=_target_rows(*bench_targets) if bench_targets else None))
