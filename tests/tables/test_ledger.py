"""The miss ledger: what a lookup records and how it was served, the file's merge, bounds and validation, the
recorder's writes (once per new problem, the rest at a flush), and many processes recording at once."""

import json
import logging
import os
import subprocess
import sys

import pytest

from kerneltune.files import logs
from kerneltune.tables import ledger as ledger_module
from kerneltune.tables import recording
from kerneltune.tables.ledger import (
    LedgerError,
    LedgerRecord,
    Served,
    add_to_ledger,
    ledger_path,
    merge,
    read_ledger,
    read_ledgers,
)
from kerneltune.tables.lookup import bucket_key, tuned_config
from kerneltune.tables.store import table_path, update_table

RUNNING = {"device": "cpu-model", "device_kind": "cpu", "matched": ["device"]}
HARD = ("dtype",)


def rec(rows=64, served=Served.NEIGHBOUR, count=1, first="2026-12-07T10:00:00Z", last="2026-12-07T10:00:00Z"):
    return LedgerRecord("h1", "none", {"rows": rows, "dtype": "float32"}, served, count, first, last)


@pytest.fixture
def recorder(tmp_path):
    """Recording on into a folder of the test's own; off, and forgotten, afterwards."""
    logs._said.clear()
    folder = tmp_path / "ledger"
    recording.record(True, folder)
    yield folder
    recording.record(False)
    recording._pending.clear()
    recording._written.clear()


def entry(rows, config, **extra):
    return {"bucket": {"rows": rows, "dtype": "float32"}, "config": config, "median_us": 1.0,
            "stamps": {"device": "cpu-model", "kernel_hash": "h1"}, **extra}


def table(root, *entries):
    update_table(table_path(root, "cpu", "k"), "k", "cpu",
                 lambda t: t["entries"].update({bucket_key(e["bucket"]): e for e in entries}))


def lookup(root, rows, refuses=None):
    return tuned_config("k", {"rows": rows, "dtype": "float32"}, "h1", HARD, RUNNING, (root,), refuses=refuses)


def test_each_way_a_lookup_serves_is_recorded(tmp_path, recorder):
    lookup(tmp_path / "none", 64)  # no table at all
    table(tmp_path / "t", entry(64, {"block": 8}, fallbacks=[{"config": {"block": 4}, "median_us": 2.0}]),
          entry(128, {"block": 16}))
    refuse_8 = lambda e: "block 8 refused" if e["config"]["block"] == 8 else None  # noqa: E731
    assert lookup(tmp_path / "t", 128) == {"block": 16}
    assert lookup(tmp_path / "t", 64, refuse_8) == {"block": 4}
    assert lookup(tmp_path / "t", 96) == {"block": 16}
    for _ in range(3):
        lookup(tmp_path / "t", 256)
    recording.flush()
    led = read_ledger(ledger_path(recorder, "cpu", "k"))
    got = {(r.problem["rows"], r.served, r.tables == "none"): r.count for r in led.records}
    assert got == {(64, Served.HEURISTIC, True): 1, (128, Served.TUNED, False): 1, (64, Served.FALLBACK, False): 1,
                   (96, Served.NEIGHBOUR, False): 1, (256, Served.NEIGHBOUR, False): 3}
    assert all(r.kernel_hash == "h1" and r.first_seen <= r.last_seen for r in led.records)


def test_a_new_problem_is_written_at_once_its_repeats_at_a_flush(tmp_path, recorder):
    path = ledger_path(recorder, "cpu", "k")
    lookup(tmp_path, 64)
    assert read_ledger(path).records[0].count == 1  # written on the problem's first call
    for _ in range(4):
        lookup(tmp_path, 64)
    assert read_ledger(path).records[0].count == 1  # counted, not written: the cached path touches no file
    recording.record(False)  # off writes what was counted
    assert read_ledger(path).records[0].count == 5
    lookup(tmp_path, 64)
    assert read_ledger(path).records[0].count == 5  # off: nothing counted


def test_the_tables_a_call_met_tell_periods_apart(tmp_path, recorder):
    table(tmp_path, entry(64, {"block": 8}))
    lookup(tmp_path, 96)
    table(tmp_path, entry(96, {"block": 8}))  # a table installed while the app runs
    os.utime(table_path(tmp_path, "cpu", "k"), ns=(1, 2))  # a time of its own, whatever the clock's resolution
    lookup(tmp_path, 96)
    recording.flush()
    led = read_ledger(ledger_path(recorder, "cpu", "k"))
    assert sorted(r.served for r in led.records) == [Served.NEIGHBOUR, Served.TUNED]
    assert len({r.tables for r in led.records}) == 2


def test_a_ledger_that_cannot_be_written_keeps_the_counts_and_says_so_once(tmp_path, recorder, caplog):
    recorder.parent.mkdir(exist_ok=True)
    recorder.write_text("a file where the folder goes")
    with caplog.at_level(logging.WARNING, "kerneltune.tables"):
        lookup(tmp_path, 64)
        lookup(tmp_path, 96)
        lookup(tmp_path, 64)
    said = [r.message for r in caplog.records if "miss ledger" in r.message]
    assert len(said) == 1 and str(recorder) in said[0]
    recorder.unlink()
    recording.flush()
    led = read_ledger(ledger_path(recorder, "cpu", "k"))
    assert sorted((r.problem["rows"], r.count) for r in led.records) == [(64, 2), (96, 1)]


def test_counts_merge_and_times_widen(tmp_path):
    path = ledger_path(tmp_path, "cpu", "k")
    add_to_ledger(path, "k", "cpu", [rec(count=2, first="2026-12-07T10:00:00Z", last="2026-12-07T10:05:00Z")])
    add_to_ledger(path, "k", "cpu", [rec(count=3, first="2026-12-07T09:00:00Z", last="2026-12-07T10:01:00Z"),
                                     rec(rows=96)])
    led = read_ledger(path)
    first = next(r for r in led.records if r.problem["rows"] == 64)
    assert (first.count, first.first_seen, first.last_seen) == (5, "2026-12-07T09:00:00Z", "2026-12-07T10:05:00Z")
    assert len(led.records) == 2 and led.dropped == 0
    assert json.loads(path.read_text())["schema"] == 1


def test_the_ledger_is_bounded_the_least_recent_go_first(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "MAX_RECORDS", 2)
    path = ledger_path(tmp_path, "cpu", "k")
    add_to_ledger(path, "k", "cpu", [rec(rows=r, count=r, last=f"2026-12-07T10:00:0{i}Z")
                                     for i, r in enumerate((1, 2, 3))])
    led = read_ledger(path)
    assert sorted(r.problem["rows"] for r in led.records) == [2, 3] and led.dropped == 1
    kept, dropped = merge([rec(rows=1)], [rec(rows=2, last="2026-12-07T11:00:00Z")], limit=1)
    assert [r.problem["rows"] for r in kept] == [2] and dropped == 1


@pytest.mark.parametrize(("text", "why"), [
    ("not json", "not valid JSON"),
    ('{"schema": 2}', "schema is 2"),
    ('{"schema": 1, "kernel": "k", "device_kind": "cpu", "records": {}}', "'records' is not a list"),
    ('{"schema": 1, "kernel": "k", "device_kind": "cpu", "records": [], "dropped": -1}', "dropped"),
    ("[" * 100 + "]" * 100, "nested too deeply"),
])
def test_an_unusable_ledger_is_named(tmp_path, text, why):
    path = tmp_path / "k.json"
    path.write_text(text)
    with pytest.raises(LedgerError, match=why) as e:
        read_ledger(path)
    assert str(path) in str(e.value)


def test_a_fifo_is_refused_without_a_wait(tmp_path):
    path = tmp_path / "k.json"
    os.mkfifo(path)
    with pytest.raises(LedgerError, match="FIFO"):
        read_ledger(path)


@pytest.mark.parametrize(("field", "value", "why"), [
    ("count", 0, "count"), ("count", True, "count"), ("served", "tuned-ish", "served"),
    ("problem", {}, "problem"), ("problem", {"rows": [1]}, "problem.rows"), ("problem", {"x": float("nan")}, "x"),
    ("kernel_hash", 1, "kernel_hash"), ("last_seen", "x" * 100, "last_seen"),
])
def test_a_bad_record_is_left_out_named_and_the_file_never_rewritten(tmp_path, field, value, why):
    path = ledger_path(tmp_path, "cpu", "k")
    add_to_ledger(path, "k", "cpu", [rec(rows=1), rec(rows=2)])
    data = json.loads(path.read_text())
    data["records"][0][field] = value
    path.write_text(text := json.dumps(data))
    led = read_ledger(path)
    assert len(led.records) == 1 and len(led.skipped) == 1 and why in led.skipped[0] and "record 0" in led.skipped[0]
    with pytest.raises(LedgerError, match="not rewritten"):
        add_to_ledger(path, "k", "cpu", [rec(rows=3)])
    assert path.read_text() == text


def test_a_ledger_that_is_a_link_is_never_written(tmp_path):
    path = ledger_path(tmp_path, "cpu", "k")
    path.parent.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text("{}")
    path.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(LedgerError, match="a link"):
        add_to_ledger(path, "k", "cpu", [rec()])
    assert (tmp_path / "elsewhere.json").read_text() == "{}"


def test_a_kernel_name_from_data_never_climbs_out(tmp_path, recorder, caplog):
    recording.note("../../etc", "h", "cpu", (), {"rows": 1}, Served.HEURISTIC)
    assert not (tmp_path / "etc").exists() and "plain name" in caplog.text


def test_read_ledgers_of_one_kernel_in_a_folder(tmp_path):
    add_to_ledger(ledger_path(tmp_path, "cpu", "k"), "k", "cpu", [rec()])
    add_to_ledger(ledger_path(tmp_path, "nvidia-h200", "k"), "k", "nvidia-h200", [rec()])
    add_to_ledger(ledger_path(tmp_path, "cpu", "other"), "other", "cpu", [rec()])
    assert sorted(led.device_kind for led in read_ledgers(tmp_path, "k")) == ["cpu", "nvidia-h200"]
    with pytest.raises(LedgerError, match="no ledger there"):
        read_ledgers(tmp_path / "nothing")


# Records ``calls`` lookups over ``problems`` problems (NumPy-free: the lookup alone), with recording turned on by
# the environment, as an app is.
APP = """import sys
from pathlib import Path
from kerneltune.tables.lookup import tuned_config
running = {"device": "cpu-model", "device_kind": "cpu", "matched": ["device"]}
problems, calls = int(sys.argv[1]), int(sys.argv[2])
for i in range(calls):
    tuned_config("k", {"rows": i % problems}, "h1", (), running, (Path(sys.argv[3]),))
"""


def test_two_processes_recording_at_once_lose_no_count(tmp_path):
    env = {**os.environ, "KERNELTUNE_RECORD": "1", "KERNELTUNE_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", APP, "40", "400", str(tmp_path / "tables")], env=env,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    led = read_ledger(tmp_path / "cache" / "ledger" / "cpu" / "k.json")
    assert not led.skipped and len(led.records) == 40
    assert {r.count for r in led.records} == {20} and sum(r.count for r in led.records) == 800
    assert not list((tmp_path / "cache" / "ledger" / "cpu").glob("*.tmp"))


def test_past_its_first_new_problems_a_process_writes_at_a_flush(tmp_path, recorder, monkeypatch):
    """A kernel given a new scalar at every call (a seed) would write at every call: past AT_ONCE new problems they
    wait for a flush, which MAX_PENDING waiting problems force."""
    monkeypatch.setattr(recording, "AT_ONCE", 2)
    monkeypatch.setattr(recording, "MAX_PENDING", 4)
    path = ledger_path(recorder, "cpu", "k")
    for rows in (1, 2, 3):
        lookup(tmp_path, rows)
    assert sorted(r.problem["rows"] for r in read_ledger(path).records) == [1, 2]
    lookup(tmp_path, 4)
    lookup(tmp_path, 5)
    assert len(read_ledger(path).records) == 2
    lookup(tmp_path, 6)  # four waiting: written
    assert sorted(r.problem["rows"] for r in read_ledger(path).records) == [1, 2, 3, 4, 5, 6]
