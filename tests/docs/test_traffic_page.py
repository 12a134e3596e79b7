"""The guide's "Tune what your traffic meets" page, run as written: its file blocks saved, its shell lines run in
order in an empty folder, as a reader would. It is the issue's whole loop on JAX: 200 calls of 6 shapes, 2 tuned;
the ledger holds the 4 others with their counts; sweep --from-ledger, install; the app again, every call served by
its own tuned entry; coverage 33% -> 100% in the report."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from kerneltune.tables.ledger import Served, read_ledger

from ..paths import REPO

PAGE = REPO / "docs" / "traffic.md"
BLOCK = re.compile(r"(?:<!-- (?P<kind>file|example): (?P<file>[\w.]+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


def blocks() -> list[tuple[str, str | None, str | None, str]]:
    """(language, 'file' or 'example' or None, its name, text) of every fenced block, in order."""
    return [(m["lang"], m["kind"], m["file"], m["body"]) for m in BLOCK.finditer(PAGE.read_text())]


def test_the_page_quotes_the_example_as_it_is():
    [(_, _, name, body)] = [b for b in blocks() if b[1] == "example"]
    assert body == (REPO / "examples" / name).read_text()


def test_the_triton_example_adds_at_most_three_lines():
    """The issue's target: a user adds at most 3 lines to an @triton.autotune kernel; the example marks its own."""
    added = [line for line in (REPO / "examples" / "triton_autotune.py").read_text().splitlines()
             if line.endswith("# kerneltune")]
    assert 1 <= len(added) <= 3
    assert "the two lines" in PAGE.read_text() and len(added) == 2


def _argv(line: str) -> tuple[dict[str, str], list[str]]:
    """A shell line's leading VAR=value assignments and its command, the venv's python and kerneltune for the bare
    names (the shell's PATH may hold others)."""
    args = shlex.split(line)
    env = {}
    while "=" in args[0] and not args[0].startswith("-"):
        key, _, value = args.pop(0).partition("=")
        env[key] = value
    if args[0] == "kerneltune":
        args = [sys.executable, "-m", "kerneltune", *args[1:]]
    elif args[0] == "python":
        args = [sys.executable, *args[1:]]
    return env, args


@pytest.mark.slow
def test_the_traffic_page_runs_as_written(tmp_path):
    env = {**os.environ, "KERNELTUNE_TABLES": str(tmp_path / "user-tables"),
           "KERNELTUNE_CACHE": str(tmp_path / "user-cache"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    env.pop("KERNELTUNE_RECORD", None)
    ledger = tmp_path / "user-cache" / "ledger" / "cpu" / "scale.json"
    outputs: list[tuple[str, subprocess.CompletedProcess]] = []
    for lang, kind, name, body in blocks():
        if kind == "file":
            (tmp_path / name).write_text(body)
            continue
        if lang != "sh":
            continue
        for line in body.strip().splitlines():
            extra, args = _argv(line)
            r = subprocess.run(args, cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"{line}\n{r.stdout}\n{r.stderr}"
            outputs.append((line, r))
            if line.endswith("python app.py") and not (tmp_path / "first-ledger.json").exists():
                shutil.copy(ledger, tmp_path / "first-ledger.json")

    lines = [line for line, _ in outputs]
    assert lines[0].startswith("kerneltune sweep") and "--from-ledger" in " ".join(lines)
    apps = [r for line, r in outputs if line.endswith("python app.py")]
    assert len(apps) == 2
    assert apps[0].stderr.count("not tuned; using nearest") == 4 and "not tuned" not in apps[1].stderr

    # The first run: the ledger holds the 4 untuned shapes with their counts, the 2 tuned ones as tuned.
    first = read_ledger(tmp_path / "first-ledger.json")
    assert first is not None and not first.skipped
    served = {(r.problem["rows"], r.served): r.count for r in first.records}
    assert served == {(48, Served.NEIGHBOUR): 34, (96, Served.NEIGHBOUR): 34, (192, Served.NEIGHBOUR): 33,
                      (384, Served.NEIGHBOUR): 33, (64, Served.TUNED): 33, (128, Served.TUNED): 33}

    # The sweep took exactly those four, the most called first.
    [sweep] = [r for line, r in outputs if "--from-ledger" in line]
    said = " ".join(sweep.stdout.split())
    assert re.search(r"4 bucket\(s\) from the ledger .* the most called first: rows=48,cols=32 \(34 calls\), "
                     r"rows=96,cols=32 \(34 calls\), rows=192,cols=32 \(33 calls\), rows=384,cols=32 \(33 calls\);",
                     said), said

    # The reports: 33% before; 33% -> 100% after, in the terminal, the CSV and the HTML.
    reports = [r for line, r in outputs if "report --ledger" in line]
    assert "scale on cpu: coverage 33% -> 33% (1 state(s)" in reports[0].stdout
    assert "scale on cpu: coverage 33% -> 100% (2 state(s)" in reports[1].stdout
    rows = (tmp_path / "coverage.csv").read_text().splitlines()
    assert rows[0].split(",")[-1] == "coverage" and len(rows) == 3
    before, after = (dict(zip(rows[0].split(","), r.split(","), strict=True)) for r in rows[1:])
    assert (before["calls"], before["tuned"], before["neighbour"]) == ("200", "66", "134")
    assert (after["calls"], after["tuned"], float(after["coverage"])) == ("200", "200", 1.0)
    html = (tmp_path / "coverage.html").read_text()
    assert "33% &rarr; 100%" in html and "<script" not in html

    # Every entry the app used is installed and was measured here.
    table = json.loads((tmp_path / "user-tables" / "cpu" / "scale.json").read_text())
    assert sorted(e["bucket"]["rows"] for e in table["entries"].values()) == [48, 64, 96, 128, 192, 384]
