"""A journal line is a ``Record`` and a table entry an ``Entry``: read and written back, every journal and table the
project keeps (the fixtures, the record under results/, inside its GPU record's archives too, and the shipped
tables) comes back byte for byte."""

import io
import json
import tarfile
from pathlib import Path

import pytest

from kerneltune.files.records import Entry, Measured, Record, RecordError

from ..paths import REPO

ROOTS = [REPO / "tests" / "fixtures", REPO / "results", REPO / "kerneltune" / "tables" / "shipped"]


def _archived() -> list[tuple[str, bytes]]:
    """The journals and tables inside results/gpu-record/*/part*.tgz."""
    found = []
    for archive in sorted((REPO / "results" / "gpu-record").glob("*/part*.tgz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith((".jsonl", ".json")):
                    found.append((f"{archive}:{member.name}", tar.extractfile(member).read()))
    return found


def _files() -> list[tuple[str, bytes]]:
    files = [(str(p), p.read_bytes()) for root in ROOTS for p in sorted(root.rglob("*"))
             if p.suffix in (".jsonl", ".json") and p.is_file()]
    return files + _archived()


def _journals() -> list[tuple[str, bytes]]:
    return [(name, data) for name, data in _files() if name.endswith(".jsonl")]


def _tables() -> list[tuple[str, bytes]]:
    out = []
    for name, data in _files():
        if name.endswith(".json"):
            table = json.loads(data)
            if isinstance(table, dict) and "entries" in table:
                out.append((name, data))
    return out


def test_there_are_records_to_round_trip():
    assert len(_journals()) >= 20 and len(_tables()) >= 10


@pytest.mark.parametrize(("name", "data"), _journals(), ids=lambda x: Path(x).name if isinstance(x, str) else "")
def test_every_journal_line_comes_back_byte_for_byte(name, data):
    lines = data.decode().splitlines()
    assert lines
    for i, line in enumerate(lines):
        record = Record.from_json(json.loads(line))
        assert json.dumps(record.to_json(), sort_keys=True) == line, f"{name}:{i + 1}"


@pytest.mark.parametrize(("name", "data"), _tables(), ids=lambda x: Path(x).name if isinstance(x, str) else "")
def test_every_table_comes_back_byte_for_byte(name, data):
    table = json.loads(data)
    table["entries"] = {k: Entry.from_json(e).to_json() for k, e in table["entries"].items()}
    out = io.StringIO()
    json.dump(table, out, indent=1, sort_keys=True)
    assert out.getvalue() + "\n" == data.decode(), name


def test_a_field_of_another_version_is_kept_and_a_broken_one_named():
    line = {"bucket": "b", "key": "{}", "status": "ok", "tiles": {}, "timing": {"median_us": 2.0},
            "from_the_future": [1, {"x": 2}]}
    record = Record.from_json(line)
    assert record.extra == {"from_the_future": [1, {"x": 2}]} and record.to_json() == line
    assert record.config == {} and record.median_us == 2.0 and record.value == 2.0
    with pytest.raises(RecordError, match=r"timing\.median_us"):
        Record.from_json({**line, "timing": {"median_us": -1}})
    with pytest.raises(RecordError, match="status"):
        Record.from_json({**line, "status": "done"})
    entry = {"bucket": {"n": 1}, "config": {"a": 1}, "stamps": {}, "tflops": None, "pct_ceiling": None,
             "rivals": [{"config": {"a": 2}, "median_us": 3.0, "margin": 0.5, "by": "medians", "new": 1}]}
    read = Entry.from_json(entry)
    assert read.to_json() == entry and read.rivals == (Measured({"a": 2}, 3.0, margin=0.5, by="medians",
                                                                extra={"new": 1}),)
    with pytest.raises(RecordError, match=r"rivals\[0\].margin"):
        Entry.from_json({**entry, "rivals": [{"config": {"a": 2}, "median_us": 3.0, "margin": float("nan")}]})
