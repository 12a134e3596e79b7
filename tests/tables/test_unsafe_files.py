"""A table file that is not what it claims to be, in the user's tables folder: a FIFO, a link to /dev/zero, a file
over the bound, a 100,000-digit integer. ``read_table`` refuses each as a TableError naming the file, and a launch's
lookup (``tuned_config``) does not hang, read forever or raise: it logs one warning naming the file and serves the
shipped table's answer, or the heuristic's where there is none."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kerneltune.files import logs
from kerneltune.files.safe_io import MAX_INT_DIGITS, MAX_JSON_DEPTH, MAX_TABLE_BYTES
from kerneltune.tables import lookup
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.store import TableError, read_table, table_path

from ..bounded import within
from .test_tables import BUCKET, HARD, RUNNING, entry, write


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "is a FIFO, not a regular file"


def _zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "is a character device, not a regular file"


def _too_big(path: Path) -> str:
    with path.open("wb") as f:
        f.truncate(MAX_TABLE_BYTES + 1)  # sparse: no disk used
    return f"holds {MAX_TABLE_BYTES + 1} bytes, over the 64 MiB a tuned table may hold; not read"


def _huge_int(path: Path) -> str:
    path.write_text('{"schema": 1, "entries": {}, "n": ' + "9" * 10**5 + "}")
    return f"holds an integer of more than {MAX_INT_DIGITS} digits"


def _deep(path: Path) -> str:
    path.write_text('{"schema": 1, "entries": {}, "n": ' + "[" * 500 + "]" * 500 + "}")
    return f"nested too deeply (more than {MAX_JSON_DEPTH} levels)"


DAMAGE = {"fifo": _fifo, "dev-zero": _zero, "too-big": _too_big, "huge-int": _huge_int, "deep": _deep}


@pytest.fixture(autouse=True)
def fresh():
    logs._said.clear()
    lookup._read_at.cache_clear()


@pytest.mark.parametrize("damage", DAMAGE)
def test_read_table_refuses_it_naming_the_file(tmp_path, damage):
    path = tmp_path / "t.json"
    why = DAMAGE[damage](path)
    with pytest.raises(TableError) as e:
        within(lambda: read_table(path), unblock=path if damage == "fifo" else None)
    assert str(e.value) == f"{path}: {why}"


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_lookup_serves_the_shipped_table_and_names_the_file_once(tmp_path, caplog, damage):
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    write(table_path(shipped, "nvidia-h200", "k"), entry(config={"block_q": 1}))
    bad = table_path(user, "nvidia-h200", "k")
    bad.parent.mkdir(parents=True)
    why = DAMAGE[damage](bad)
    unblock = bad if damage == "fifo" else None
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        for _ in range(3):  # a launch looks up at every trace: the file is named once
            assert within(lambda: tuned_config("k", BUCKET, "h1", HARD, RUNNING, (user, shipped)),
                          unblock) == {"block_q": 1}
    assert caplog.messages == [f"k: {bad}: {why}; left out"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_lookup_in_the_users_folder_falls_back_to_the_heuristic(tmp_path, monkeypatch, caplog, damage):
    """The default folders: ``$KERNELTUNE_TABLES`` over the shipped ones, which hold no table of this kernel."""
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path))
    bad = table_path(tmp_path, "nvidia-h200", "no_such_kernel")
    bad.parent.mkdir(parents=True)
    why = DAMAGE[damage](bad)
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert within(lambda: tuned_config("no_such_kernel", BUCKET, "h1", HARD, RUNNING),
                      bad if damage == "fifo" else None) is None
    named = [m for m in caplog.messages if str(bad) in m]
    assert named[0] == f"no_such_kernel: {bad}: {why}; left out"
    assert len([m for m in named if why in m]) == 1, caplog.text
    assert len(caplog.messages) == 1  # one line: the table left out (no second "no tuned table" line)
