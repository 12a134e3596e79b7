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


RECIPE = {  # the guide's "adding a field to an entry" (docs/development.md): a declaration, and its use
    "files/records.py": ("    program_digest: str | None = None  # what ``rekey`` found the winner compiles to\n",
                         "    strategy: str | None = None  # the search that found the winner\n"),
    "tuning/table_writer.py": ("stamps=stamps, accuracy=win.accuracy or None)",
                               "stamps=stamps, accuracy=win.accuracy or None, strategy=win.strategy)"),
}
PROBE = """
import json, sys
from pathlib import Path
from kerneltune.files.records import Record, config_key
from kerneltune.tables.install import install_table
from kerneltune.tables.lookup import select_entry
from kerneltune.tables.store import read_table
from kerneltune.tuning.table_writer import write_bucket_table
from tests.tuning.fake_kernel import PLUGIN

out = Path(sys.argv[1])
config = {"mode": "good", "work": 1}
stamps = {"backend": "host", "device_kind": "cpu", "matched": ["backend"]}
record = Record.from_json({"bucket": "b", "key": config_key(config), "status": "ok", "kernel": "fake",
                           "tiles": config, "problem": {"n": 8}, "stamps": stamps, "kernel_hash": "fakehash",
                           "strategy": "tpe", "timing": {"median_us": 5.0, "spread": 0.01, "samples": 9}})
written = write_bucket_table(out, PLUGIN, "b", [record], 0.01)
[read] = read_table(written.table)["entries"].values()
dest, _ = install_table(written.table, out / "installed")
[installed] = read_table(dest)["entries"].values()
chosen, _ = select_entry(read_table(dest), {"n": 8}, {**stamps, "kernel_hash": "fakehash"}, "fakehash", ("n",))
on_disk = next(iter(json.loads(dest.read_text())["entries"].values()))["strategy"]
print(json.dumps([written.entry.strategy, read.strategy, installed.strategy, chosen.strategy, on_disk]))
"""


def test_a_field_added_to_entry_is_written_read_installed_and_looked_up_with_no_other_edit(tmp_path):
    """The recipe applied to a copy of the package: the field reaches the table the sweep writes, its reading, the
    installed table and the entry a lookup chooses, with no edit to the store, install or the lookup."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "src" / "kerneltune"
    shutil.copytree(REPO / "kerneltune", copy, ignore=shutil.ignore_patterns("__pycache__", "kernels"))
    (copy / "kernels").mkdir()
    (copy / "kernels" / "__init__.py").write_text("")
    for name, (anchor, added) in RECIPE.items():
        text = (copy / name).read_text()
        assert text.count(anchor) == 1, name
        (copy / name).write_text(text.replace(anchor, anchor + added if anchor.endswith("\n") else added))
    env = {"PYTHONPATH": f"{copy.parent}:{REPO}", "PATH": "/usr/bin:/bin", "KERNELTUNE_TABLES": str(tmp_path / "u")}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "out")], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == ["tpe"] * 5
