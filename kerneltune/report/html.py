"""One self-contained HTML page: inline CSS and SVG, no scripts or network needed to view it."""

from __future__ import annotations

import html
from pathlib import Path
from typing import cast

import jinja2
import pandas as pd

from kerneltune.protocols import Capability, ReportView
from kerneltune.registry import UnknownName, load_kernel

TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kerneltune report</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}
th{background:#f0f0f0}.ok{color:#070}.fail{color:#a00}.faster{background:#dfd}.slower{background:#fdd}
h2{margin-top:2em;border-bottom:1px solid #ddd}svg{background:#fafafa;border:1px solid #ddd}
</style></head><body>
<h1>kerneltune report</h1>
<p>{{ n_candidates }} candidates from {{ n_journals }} journal(s); devices: {{ devices }}.</p>
{% if bench %}<h2 id="bench">Against other kernels ({{ bench.device }})</h2>
<table class="bench"><tr><th>shape</th><th>cap</th><th>implementation</th><th>ms</th><th>spread</th>
<th>useful TFLOP/s</th><th>dense TFLOP/s</th><th>rel. error</th><th>× vs kerneltune</th><th>error</th></tr>
{% for r in bench.rows %}<tr><td>{{ r.shape }}</td><td>{{ r.cap_method }}</td><td>{{ r.impl }}</td>
<td>{{ r.ms }}</td><td>{{ r.spread }}</td><td>{{ r.useful }}</td><td>{{ r.dense }}</td><td>{{ r.rel }}</td>
<td>{{ r.ratio }}</td><td class="fail">{{ r.error }}</td></tr>
{% endfor %}</table>{% endif %}
{% if targets %}<h3 id="bench-targets">Targets ({{ targets.source }})</h3>
{% if targets.rows %}<table class="targets">
<tr><th>target</th><th>shape</th><th>cap</th><th>value</th><th>at least</th><th>verdict</th></tr>
{% for t in targets.rows %}<tr class="{{ t.css }}"><td>{{ t.target }}</td><td>{{ t.shape }}</td>
<td>{{ t.cap_method }}</td><td>{{ t.value_text }}</td><td>{{ t.at_least }}</td><td>{{ t.verdict }}</td></tr>
{% endfor %}</table>{% endif %}{% endif %}
{% if baseline %}<h2 id="baseline">Against the baseline</h2>
<table class="baseline"><tr><th>bucket</th><th>best µs</th><th>baseline µs</th><th>ratio</th><th>verdict</th></tr>
{% for b in baseline %}<tr class="{{ b.verdict }}"><td>{{ b.bucket }}</td><td>{{ '%.1f'|format(b.best) }}</td>
<td>{{ '%.1f'|format(b.base) }}</td><td>{{ '%.3f'|format(b.ratio) }}</td><td>{{ b.verdict }}</td></tr>{% endfor %}
</table>{% endif %}
{% for b in buckets %}
<h2 id="bucket-{{ b.name }}">Bucket {{ b.name }}</h2>
<table class="ranking"><tr><th>#</th>{% for c in b.config_cols %}<th>{{ c }}</th>{% endfor %}
<th>median µs</th><th>spread</th><th>static score</th><th>TFLOP/s</th><th>% ceiling</th><th>status</th></tr>
{% for r in b.ranking %}<tr><td>{{ loop.index }}</td>{% for c in b.config_cols %}<td>{{ r[c] }}</td>{% endfor %}
<td>{{ '-' if r.median_us is none else '%.1f'|format(r.median_us) }}</td>
<td>{{ '%.2f%%'|format(100 * r.spread) }}</td><td>{{ r.score_text }}</td>
<td>{{ r.tflops_text }}</td><td>{{ r.pct_text }}</td><td class="ok">{{ r.status }}</td></tr>{% endfor %}
</table>
<div class="charts">{{ b.view }} {{ b.scatter }}</div>
{% endfor %}
<h2 id="failures">Failures by kind</h2>
{% for kind, rows in failures %}<h3>{{ kind }} ({{ rows|length }})</h3>
<table class="failures"><tr><th>bucket</th><th>config</th><th>message</th></tr>
{% for r in rows %}<tr><td>{{ r.bucket }}</td><td>{{ r.config }}</td><td class="fail">{{ r.error }}</td></tr>
{% endfor %}
</table>{% else %}<p>None.</p>{% endfor %}
</body></html>""", autoescape=True)


def _kernel_view(df: pd.DataFrame, bucket: str) -> str:
    """The kernel's own section of a bucket (the ranker's tile heat map), where it declares one."""
    names = df["kernel"].dropna().unique()
    if len(names) != 1:
        return ""
    try:
        kernel = load_kernel(str(names[0]))
    except UnknownName:
        return ""
    if Capability.REPORT_VIEW not in kernel.capabilities:
        return ""
    return cast(ReportView, kernel).report_view(df, bucket)


def _scatter(df: pd.DataFrame, bucket: str) -> str:
    d = df.dropna(subset=["median_us"])
    if d.empty:
        return ""
    w, h, pad = 420, 260, 45
    x = d["median_us"].astype(float)
    y = d["pct_ceiling"].astype(float).fillna(0.0)
    x0, x1 = x.min(), x.max() if x.max() > x.min() else x.min() + 1
    y1 = max(y.max(), 1.0)
    pts = "".join(
        f'<circle cx="{pad + (xi - x0) / (x1 - x0) * (w - 2 * pad):.1f}" '
        f'cy="{h - pad - yi / y1 * (h - 2 * pad):.1f}" r="4" fill="#36c"/>' for xi, yi in zip(x, y, strict=True))
    return (f'<svg class="scatter" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">'
            f'<title>time vs % of ceiling, {html.escape(bucket)}</title>'
            f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#444"/>'
            f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#444"/>'
            f'<text x="{w / 2 - 40}" y="{h - 10}" font-size="12">median µs ({x0:.0f}–{x1:.0f})</text>'
            f'<text x="5" y="{pad - 10}" font-size="12">% of bf16 ceiling (max {y1:.0f})</text>{pts}</svg>')


def _bench_rows(bench: dict) -> dict:
    """Rows of a `kerneltune bench` result, with each implementation's time over kerneltune's."""
    ours = {(r["shape"], r.get("cap_method")): r.get("median_ms") for r in bench["rows"] if r["impl"] == "kerneltune"}

    def fmt(x: float | None, spec: str) -> str:
        return "-" if x is None else format(x, spec)

    rows = []
    for r in bench["rows"]:
        base = ours.get((r["shape"], r.get("cap_method")))
        ratio = r["median_ms"] / base if base and r.get("median_ms") else None
        rows.append({"shape": r["shape"], "cap_method": r.get("cap_method", ""), "impl": r["impl"],
                     "ms": fmt(r.get("median_ms"), ".3f"), "spread": fmt(r.get("spread"), ".2%"),
                     "useful": fmt(r.get("useful_tflops"), ".0f"), "dense": fmt(r.get("dense_tflops"), ".0f"),
                     "rel": fmt(r.get("rel_error"), ".1e"), "ratio": fmt(ratio, ".2f"), "error": r.get("error", "")})
    return {"device": bench.get("stamps", {}).get("gpu", "?"), "rows": rows}


def _target_rows(verdicts: list[dict], source: str) -> dict:
    rows = [{**v, "value_text": "-" if v["value"] is None else f"{v['value']:.2f}",
             "css": {"met": "faster", "missed": "slower"}.get(v["verdict"], "")} for v in verdicts]
    return {"source": source, "rows": rows}


def render_html(frame: pd.DataFrame, n_journals: int, baseline: dict[str, dict] | None, out: Path,
                bench: dict | None = None, bench_targets: tuple[list[dict], str] | None = None) -> None:
    """The report; ``bench`` is a `kerneltune bench` result, ``bench_targets`` its verdicts and their source."""
    config_cols = [c for c in frame.columns if c.startswith("config_")]
    buckets = []
    # Timed candidates by median; a compile-only sweep's by its static score (lower is better).
    ranked = frame[(frame["status"] == "ok") & (frame["median_us"].notna() | frame["score"].notna())]
    for name, df in ranked.groupby("bucket", sort=True):
        df = df.sort_values("median_us" if df["median_us"].notna().any() else "score")
        cols = [c for c in config_cols if df[c].notna().any()]
        ranking = []
        for _, r in df.iterrows():
            row = {c: r[c] for c in cols}
            row.update(median_us=r["median_us"] if pd.notna(r["median_us"]) else None,
                       spread=r["spread"] if pd.notna(r["spread"]) else 0.0, status=r["status"],
                       score_text="-" if pd.isna(r["score"]) else f"{r['score']:.0f}",
                       tflops_text="-" if pd.isna(r["tflops"]) else f"{r['tflops']:.0f}",
                       pct_text="-" if pd.isna(r["pct_ceiling"]) else f"{r['pct_ceiling']:.1f}")
            ranking.append(row)
        buckets.append({"name": name, "config_cols": cols, "ranking": ranking,
                        "view": jinja2.utils.markupsafe.Markup(_kernel_view(df, name)),
                        "scatter": jinja2.utils.markupsafe.Markup(_scatter(df, name))})
    failed = frame[frame["invalidity"].fillna("") != ""]
    failures = []
    for kind, df in failed.groupby("invalidity", sort=True):
        rows = [{"bucket": r["bucket"], "config": {c[7:]: r[c] for c in config_cols if pd.notna(r[c])},
                 "error": r["error"]} for _, r in df.iterrows()]
        failures.append((kind, rows))
    compare = []
    if baseline:
        for b in buckets:
            base = baseline.get(b["name"])
            if base is None or b["ranking"][0]["median_us"] is None:
                continue
            best = b["ranking"][0]["median_us"]
            noise = max(base.get("spread", 0.0), b["ranking"][0]["spread"], 0.01)
            ratio = best / base["median_us"]
            verdict = "faster" if ratio < 1 - noise else "slower" if ratio > 1 + noise else "same"
            compare.append({"bucket": b["name"], "best": best, "base": base["median_us"], "ratio": ratio,
                            "verdict": verdict})
    devices = ", ".join(sorted(str(d) for d in frame["device"].dropna().unique())) or "none"
    out.write_text(TEMPLATE.render(n_candidates=len(frame), n_journals=n_journals, devices=devices, buckets=buckets,
                                   failures=failures, baseline=compare,
                                   bench=_bench_rows(bench) if bench else None,
                                   targets=_target_rows(*bench_targets) if bench_targets else None))
