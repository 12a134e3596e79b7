"""Security drills: data is data. A journal, table or space names no module that gets imported, no path
outside its folder, and no markup that reaches a report. Each drill feeds the CLI one hostile file and counts
what happened; the summary is printed, and every count but the trials and refusals must be 0."""

import json
from pathlib import Path

from typer.testing import CliRunner

from kerneltune.cli import app

from ..paths import FIXTURES

RUN_C = FIXTURES / "ranker_attention/run-c-journals"
SPACE = FIXTURES / "ranker_attention/run-c-space.toml"
TABLE = FIXTURES / "ranker_attention/sweep-a-table.json"
MARKUP = ('q"><img src=x onerror=alert(1)>', "</script><script>alert(2)</script>")


def _journal(path: Path, **change) -> Path:
    """The run-C journal (one worker's) with ``change`` applied to every record (``stamps`` merged)."""
    lines = []
    for line in (RUN_C / "ranker_attention-live-w0.jsonl").read_text().splitlines():
        r = json.loads(line)
        for k, v in change.items():
            r[k] = {**r[k], **v} if k == "stamps" else v
        lines.append(json.dumps(r))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


class Outcome:
    def __init__(self):
        self.rows: list[tuple[str, str]] = []
        self.counts = {"trials": 0, "one-line refusals": 0, "tracebacks": 0, "code executed": 0,
                       "paths outside the folder": 0, "markup injected": 0}

    def add(self, name: str, result, **bad: int) -> None:
        self.counts["trials"] += 1
        lines = [line for line in result.output.splitlines() if line.strip()]
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            self.counts["tracebacks"] += 1
            bad["tracebacks"] = 1
        elif result.exit_code == 3 and sum(line.startswith("error: ") for line in lines) == 1:
            self.counts["one-line refusals"] += 1  # warnings may name the lines it skipped before it
        for k, v in bad.items():
            if k != "tracebacks":
                self.counts[k] += v
        self.rows.append((name, f"exit {result.exit_code}: {lines[-1][:100] if lines else ''}"
                          + "".join(f" [{k}]" for k, v in bad.items() if v)))


def test_security_drills(tmp_path, monkeypatch, record_property):
    cli, out = CliRunner(), Outcome()
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path / "user-tables"))

    # 1. A journal naming a module as its kernel, the module importable from here: never imported.
    (tmp_path / "mods").mkdir()
    marker = tmp_path / "pwned"
    (tmp_path / "mods/pwnmod.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nX = None\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    journal = _journal(tmp_path / "j1/ranker_attention-live.jsonl", kernel="pwnmod:X")
    r = cli.invoke(app, ["report", str(journal), "--html", str(tmp_path / "j1/r.html")])
    out.add("report: journal's kernel is an import path", r, **{"code executed": int(marker.exists())})

    # 2-3. A replayed journal whose device kind climbs out of --out, or is absolute.
    for n, kind in enumerate(["../../../escaped", str(tmp_path / "abs")]):
        case = tmp_path / f"replay{n}"
        journal = _journal(case / "in/j.jsonl", stamps={"device_kind": kind})
        before = _files(tmp_path)
        r = cli.invoke(app, ["sweep", "ranker-attention", "--replay", str(journal), "--space", str(SPACE),
                             "--bucket", "d128-tanh-long", "--out", str(case / "out")])
        outside = {p for p in _files(tmp_path) - before if case / "out" not in p.parents}
        escaped = outside | ({Path(kind)} if Path(kind).is_absolute() and Path(kind).exists() else set())
        out.add(f"replay: device_kind {kind[:30]!r}", r, **{"paths outside the folder": len(escaped)})

    # 4-5. A table whose kernel or device kind climbs out of install's --to.
    for n, (field, value) in enumerate([("kernel", "../../x"), ("device_kind", "../up"),
                                        ("device_kind", str(tmp_path / "abs-drill"))]):
        table = json.loads(TABLE.read_text())
        table[field] = value
        src = tmp_path / f"install{n}/nvidia-h200/ranker_attention.json"
        src.parent.mkdir(parents=True)
        src.write_text(json.dumps(table))
        to = tmp_path / f"install{n}/to"
        before = _files(tmp_path)
        r = cli.invoke(app, ["install", str(src), "--to", str(to)])
        outside = {p for p in _files(tmp_path) - before if to not in p.parents}
        outside |= {Path(value)} if Path(value).is_absolute() and Path(value).exists() else set()
        out.add(f"install: {field} {value!r}", r, **{"paths outside the folder": len(outside)})

    # 6. Markup in every string a journal gives the report: bucket, strategy, error, config values.
    journal = _journal(tmp_path / "j6/ranker_attention-live.jsonl", bucket=MARKUP[0], strategy=MARKUP[1],
                       error=MARKUP[0])
    page = tmp_path / "j6/r.html"
    r = cli.invoke(app, ["report", str(journal), "--html", str(page)])
    body = page.read_text() if page.exists() else ""
    injected = sum(body.count(s) for s in ("<img src=x", "<script>alert(2)"))
    out.add("report: markup in bucket, strategy and error", r, **{"markup injected": injected})

    record_property("drill summary", "security drills: " + ", ".join(f"{k} {v}" for k, v in out.counts.items()))
    bad = {k: v for k, v in out.counts.items() if k not in ("trials", "one-line refusals") and v}
    assert not bad, (bad, out.rows)
    assert out.counts["trials"] == 7
