"""Coverage: the share of the calls a miss ledger recorded that each way of serving took, under each state of the
tables the calls met (``report --ledger``).

A ledger's records name the tables a call was served under (a digest of the table files and their times), so a
kernel's traffic splits into periods, one per state of its tables, in the order they were first met: the first is
"before" (the tables the traffic first met), the last "after". Coverage is the share served by the problem's own
tuned entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from kerneltune.tables.ledger import Ledger, Served

COLUMNS = ["kernel", "device_kind", "period", "tables", "first_seen", "last_seen", "problems", "calls",
           *(str(s) for s in Served), "coverage"]


def coverage_frame(ledgers: list[Ledger]) -> pd.DataFrame:
    """One row per kernel, device kind and tables state: calls, the calls each way served, coverage (0 to 1)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for ledger in ledgers:
        for r in ledger.records:
            row = rows.setdefault((ledger.kernel, ledger.device_kind, r.tables), {
                "kernel": ledger.kernel, "device_kind": ledger.device_kind, "tables": r.tables,
                "first_seen": r.first_seen, "last_seen": r.last_seen, "problems": set(), "calls": 0,
                **{str(s): 0 for s in Served}})
            row["first_seen"] = min(row["first_seen"], r.first_seen)
            row["last_seen"] = max(row["last_seen"], r.last_seen)
            row["problems"].add(repr(sorted(r.problem.items())))
            row["calls"] += r.count
            row[str(r.served)] += r.count
    frame = pd.DataFrame([{**row, "problems": len(row["problems"])} for row in rows.values()],
                         columns=[c for c in COLUMNS if c not in ("period", "coverage")])
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    frame = frame.sort_values(["kernel", "device_kind", "first_seen", "tables"], ignore_index=True)
    frame.insert(2, "period", frame.groupby(["kernel", "device_kind"]).cumcount() + 1)
    frame["coverage"] = frame[str(Served.TUNED)] / frame["calls"]
    return frame


def before_after(frame: pd.DataFrame) -> list[tuple[str, str, float, float, int]]:
    """(kernel, device kind, coverage in the first period, in the last, periods) for each kernel and device."""
    out = []
    for (kernel, device), rows in frame.groupby(["kernel", "device_kind"], sort=True):
        out.append((str(kernel), str(device), float(rows["coverage"].iloc[0]), float(rows["coverage"].iloc[-1]),
                    len(rows)))
    return out


TEMPLATE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kerneltune coverage</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em auto;padding:0 1em;max-width:1240px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.2em}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}
th{background:#f0f0f0;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#3a3}
</style></head><body>
<h1>kerneltune coverage</h1>
<p>The calls the miss ledger ({{ where }}) recorded, by how each was served, under each state of the tables they met
(period 1 first). Coverage: the share served by the problem's own tuned entry.</p>
{% for k in kernels %}<h2>{{ k.kernel }} on {{ k.device }}: {{ k.before }} &rarr; {{ k.after }}</h2>
<table><tr><th>period</th><th>tables</th><th>first seen</th><th>last seen</th><th>problems</th><th>calls</th>
{% for s in served %}<th>{{ s }}</th>{% endfor %}<th>coverage</th></tr>
{% for r in k.rows %}<tr><td class="num">{{ r.period }}</td><td>{{ r.tables }}</td><td>{{ r.first_seen }}</td>
<td>{{ r.last_seen }}</td><td class="num">{{ r.problems }}</td><td class="num">{{ r.calls }}</td>
{% for s in served %}<td class="num">{{ r[s] }}</td>{% endfor %}
<td class="num">{{ r.coverage_text }} <span class="bar" style="width:{{ r.coverage_px }}px"></span></td></tr>
{% endfor %}</table>{% endfor %}
</body></html>
""", autoescape=True)


def percent(share: float) -> str:
    return f"{100 * share:.0f}%"


def render_coverage_html(frame: pd.DataFrame, where: str, path: Path) -> None:
    """A self-contained page: a table per kernel and device, its periods in order (every string escaped)."""
    kernels = []
    for (kernel, device), rows in frame.groupby(["kernel", "device_kind"], sort=True):
        items = [{**r, "coverage_text": percent(r["coverage"]), "coverage_px": round(100 * r["coverage"])}
                 for r in rows.to_dict("records")]
        kernels.append({"kernel": kernel, "device": device, "rows": items, "before": percent(items[0]["coverage"]),
                        "after": percent(items[-1]["coverage"])})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TEMPLATE.render(kernels=kernels, where=where, served=[str(s) for s in Served]), encoding="utf-8")
