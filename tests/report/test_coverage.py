"""report --ledger: the recorded calls by how they were served, one period per state of the tables they met, in
the terminal, the CSV and the HTML (strings from the ledger escaped)."""

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kerneltune.cli.app import app
from kerneltune.report.coverage import before_after, coverage_frame
from kerneltune.tables.ledger import LedgerRecord, Served, add_to_ledger, ledger_path, read_ledgers


def rec(rows, served, count, tables, when):
    return LedgerRecord("h", tables, {"rows": rows}, served, count, when, when)


@pytest.fixture
def ledger(tmp_path):
    add_to_ledger(ledger_path(tmp_path, "cpu", "k"), "k", "cpu", [
        rec(64, Served.TUNED, 66, "before", "2026-12-07T10:00:00Z"),
        rec(96, Served.NEIGHBOUR, 100, "before", "2026-12-07T10:00:01Z"),
        rec(97, Served.HEURISTIC, 34, "before", "2026-12-07T10:00:02Z"),
        rec(64, Served.TUNED, 100, "after", "2026-12-07T11:00:00Z"),
        rec(96, Served.TUNED, 99, "after", "2026-12-07T11:00:00Z"),
        rec(97, Served.FALLBACK, 1, "after", "2026-12-07T11:00:01Z"),
    ])
    return tmp_path


def test_periods_in_the_order_first_met_with_their_shares(ledger):
    frame = coverage_frame(read_ledgers(ledger))
    assert list(frame["tables"]) == ["before", "after"] and list(frame["period"]) == [1, 2]
    first, last = frame.to_dict("records")
    assert (first["calls"], first["tuned"], first["neighbour"], first["heuristic"], first["problems"]) == (
        200, 66, 100, 34, 3)
    assert first["coverage"] == pytest.approx(0.33) and last["coverage"] == pytest.approx(0.995)
    assert before_after(frame) == [("k", "cpu", pytest.approx(0.33), pytest.approx(0.995), 2)]


def kerneltune(*args, env):
    return subprocess.run([sys.executable, "-m", "kerneltune", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_the_command_writes_the_csv_and_the_html(ledger, tmp_path):
    env = {**os.environ, "KERNELTUNE_CACHE": str(tmp_path / "unused")}
    r = kerneltune("report", "--ledger", "--ledger-path", str(ledger), "--csv", str(tmp_path / "c.csv"), "--html",
                   str(tmp_path / "c.html"), env=env)
    assert r.returncode == 0, r.stderr
    assert "k on cpu: coverage 33% -> 100% (2 state(s) of its tables)" in r.stdout  # 99.5% shows as 100%
    rows = (tmp_path / "c.csv").read_text().splitlines()
    assert rows[0] == ("kernel,device_kind,period,tables,first_seen,last_seen,problems,calls,tuned,fallback,"
                       "neighbour,heuristic,coverage")
    assert rows[1].startswith("k,cpu,1,before,") and rows[1].endswith(",200,66,0,100,34,0.33")
    html = (tmp_path / "c.html").read_text()
    assert "k on cpu: 33% &rarr; 100%" in html and html.count("<tr>") == 3


def test_the_table_in_a_file_has_the_room_it_needs_and_at_a_given_width_folds_never_cuts(tmp_path):
    """`report --ledger > file` cut the kernel's name, the tables' hash and the date ("rowsum_ke…"); COLUMNS=200 was
    the way round it."""
    name = "rowsum_kernel_with_a_name_of_forty_chars"
    add_to_ledger(ledger_path(tmp_path, "cpu", name), name, "cpu", [
        rec(64, Served.TUNED, 6, "0123456789abcdef0123", "2026-12-07T10:00:00Z")])
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = kerneltune("report", "--ledger", "--ledger-path", str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if name in line)
    assert "0123456789abcdef0123" in row and "2026-12-07T10:00:00Z" in row and "…" not in r.stdout
    narrow = kerneltune("report", "--ledger", "--ledger-path", str(tmp_path), env={**env, "COLUMNS": "100"})
    assert "…" not in narrow.stdout and max(len(line) for line in narrow.stdout.splitlines()) <= 100


def test_strings_from_the_ledger_are_escaped(tmp_path):
    path = ledger_path(tmp_path, "cpu", "k")
    add_to_ledger(path, "k", "cpu", [rec(1, Served.TUNED, 1, "<b>x</b>", "2026-12-07T10:00:00Z")])
    from kerneltune.report.coverage import render_coverage_html

    render_coverage_html(coverage_frame(read_ledgers(tmp_path)), "<i>where</i>", tmp_path / "c.html")
    html = (tmp_path / "c.html").read_text()
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "<i>where" not in html


@pytest.mark.parametrize(("args", "why"), [
    (("report",), "give RESULTS"),
    (("report", "--ledger", "some-results"), "drop RESULTS"),
    (("report", "--ledger-path", "x"), "add --ledger"),
    (("report", "--ledger"), "holds no recorded call"),
    (("report", "--ledger", "--ledger-path", "nowhere"), "nowhere: no ledger there"),
])
def test_what_report_refuses(tmp_path, monkeypatch, args, why):
    """In this process (the command line's parse and its one line), not a subprocess: six are a second each."""
    (tmp_path / "cache" / "ledger").mkdir(parents=True)
    monkeypatch.setenv("KERNELTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "400")
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 3 and why in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
