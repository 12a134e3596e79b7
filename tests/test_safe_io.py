"""safe_io: a data file is opened only if it is a regular file, read only up to its bound, parsed only within
JSON's bounds; and each reader (journal, bench result, baseline) turns a refusal into its own one-line error.

Every call that could block or read forever runs under ``within``: a thread given a few seconds, so that a
regression fails the test instead of hanging the suite."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kerneltune.files import logs, safe_io
from kerneltune.files.safe_io import (
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    BadJson,
    UnsafeFile,
    brief,
    loads_bounded_json,
    open_regular,
    read_regular_bytes,
    size_text,
)
from kerneltune.report.bench_result import read_bench_result
from kerneltune.report.frame import load_baseline
from kerneltune.tuning.journal import Journal, JournalError

from .bounded import within


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero_link(tmp_path: Path) -> Path:
    path = tmp_path / "t.json"
    path.symlink_to("/dev/zero")
    return path


@pytest.fixture
def swapped_after_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    """The name said "regular file" when looked at, and something else is there when opened: only the check on the
    opened descriptor stands between the reader and a FIFO or a device."""
    monkeypatch.setattr(safe_io, "_mode_before_open", lambda path: stat.S_IFREG | 0o644)


# The helpers.

def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'{"a": 1}')
    (tmp_path / "link.json").symlink_to(path)
    assert read_regular_bytes(path, 100, "tuned table") == b'{"a": 1}'
    assert read_regular_bytes(tmp_path / "link.json", 100, "tuned table") == b'{"a": 1}'
    assert read_regular_bytes(path, 8, "tuned table") == b'{"a": 1}', "exactly the bound is within it"
    (tmp_path / "empty.json").write_bytes(b"")
    assert read_regular_bytes(tmp_path / "empty.json", 100, "tuned table") == b""


def test_nothing_there_is_file_not_found_the_readers_absent(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_regular_bytes(tmp_path / "none.json", 100, "tuned table")
    (tmp_path / "dangling.json").symlink_to(tmp_path / "none.json")
    with pytest.raises(FileNotFoundError):
        read_regular_bytes(tmp_path / "dangling.json", 100, "tuned table")


@pytest.mark.parametrize("swapped", [False, True], ids=["named", "swapped-in"])
def test_a_fifo_is_refused_without_blocking(request, fifo, swapped):
    if swapped:
        request.getfixturevalue("swapped_after_stat")
    with pytest.raises(UnsafeFile) as e:
        within(lambda: read_regular_bytes(fifo, 100, "tuned table"), unblock=fifo)
    assert str(e.value) == f"{fifo}: is a FIFO, not a regular file"


def test_a_link_to_a_fifo_is_refused_without_blocking(tmp_path, fifo):
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    with pytest.raises(UnsafeFile, match=r"link\.json: is a FIFO, not a regular file$"):
        within(lambda: read_regular_bytes(link, 100, "tuned table"), unblock=fifo)


@pytest.mark.parametrize("swapped", [False, True], ids=["named", "swapped-in"])
def test_a_link_to_dev_zero_is_refused_not_read_forever(request, zero_link, swapped):
    if swapped:
        request.getfixturevalue("swapped_after_stat")
    with pytest.raises(UnsafeFile) as e:
        within(lambda: read_regular_bytes(zero_link, 1 << 30, "journal"))
    assert str(e.value) == f"{zero_link}: is a character device, not a regular file"
    assert e.value.filename == str(zero_link) and "\n" not in str(e.value)


def test_a_device_is_never_opened(zero_link, monkeypatch):
    opened = []
    monkeypatch.setattr(safe_io.os, "open", lambda *a, **k: opened.append(a) or pytest.fail("opened"))
    with pytest.raises(UnsafeFile, match="character device"):
        read_regular_bytes(zero_link, 100, "tuned table")
    assert opened == []


def test_a_directory_is_refused_as_open_refuses_it(tmp_path):
    folder = tmp_path / "t.json"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as e:
        read_regular_bytes(folder, 100, "tuned table")
    assert e.value.filename == str(folder) and e.value.strerror == "Is a directory"


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(UnsafeFile, match=r"s\.json: is a socket, not a regular file$"):
            within(lambda: read_regular_bytes(path, 100, "tuned table"))


def test_a_file_over_the_bound_is_refused_without_being_read(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.truncate((64 << 20) + 1)  # sparse: no disk used
    reads = []
    real_read = os.read
    monkeypatch.setattr(safe_io.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(UnsafeFile) as e:
        read_regular_bytes(path, 64 << 20, "tuned table")
    assert str(e.value) == f"{path}: holds 67108865 bytes, over the 64 MiB a tuned table may hold; not read"
    assert reads == []


def test_a_file_that_says_it_is_small_is_still_read_only_to_the_bound(monkeypatch):
    """/proc's files say 0 bytes and hold more: the bound holds on what is read, not on what the file says."""
    proc = Path("/proc/self/status")
    if not proc.is_file():
        pytest.skip("no /proc here")
    reads = []
    real_read = os.read
    monkeypatch.setattr(safe_io.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(UnsafeFile, match=r"status: holds more, over the 100 bytes a tuned table may hold"):
        read_regular_bytes(proc, 100, "tuned table")
    assert sum(reads) <= 101


def test_open_regular_gives_a_blocking_binary_file(tmp_path):
    path = tmp_path / "j.jsonl"
    path.write_bytes(b"a\nb\n")
    with open_regular(path, 100, "journal") as f:
        assert os.get_blocking(f.fileno()) and f.readlines() == [b"a\n", b"b\n"]


def test_bounds_in_words():
    assert (size_text(64 << 20), size_text(1 << 30), size_text(100)) == ("64 MiB", "1 GiB", "100 bytes")
    assert len(brief("x" * 10**6)) < 100 and len(brief(list(range(10**5)))) < 100
    assert brief(float("nan")) == "nan" and brief("1.0") == "'1.0'"


# JSON's bounds.

@pytest.mark.parametrize("text", ["1" * 100_000, "-" + "9" * (MAX_INT_DIGITS + 1), '{"a": [1, ' + "7" * 5000 + "]}"])
def test_an_integer_of_too_many_digits_is_bad_json_not_a_bare_value_error(text):
    with pytest.raises(BadJson) as e:
        loads_bounded_json(text, "t.json")
    assert str(e.value) == f"t.json: holds an integer of more than {MAX_INT_DIGITS} digits" and not e.value.syntax


def test_the_digits_stay_bounded_where_the_environment_lifts_pythons_limit():
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # PYTHONINTMAXSTRDIGITS=0: a 10**6-digit integer would take minutes to parse
    try:
        with pytest.raises(BadJson, match=f"more than {MAX_INT_DIGITS} digits"):
            within(lambda: loads_bounded_json("[" + "1" * 1_000_000 + "]", "t.json"))
        assert loads_bounded_json("9" * MAX_INT_DIGITS, "t.json") == int("9" * MAX_INT_DIGITS)
    finally:
        sys.set_int_max_str_digits(before)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 100_000])
def test_deep_nesting_is_bad_json_whether_or_not_python_could_parse_it(depth):
    for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(BadJson) as e:
            loads_bounded_json(text, "t.json")
        assert str(e.value) == f"t.json: nested too deeply (more than {MAX_JSON_DEPTH} levels)"


def test_nesting_up_to_the_bound_and_brackets_in_strings_are_fine():
    assert loads_bounded_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "t.json") is not None
    assert loads_bounded_json(json.dumps({"a": "[{" * 1000}), "t.json") == {"a": "[{" * 1000}


def test_not_json_says_where_and_what():
    with pytest.raises(BadJson) as e:
        loads_bounded_json("{\n  x", "t.json")
    assert str(e.value) == "t.json: not valid JSON (line 2: Expecting property name enclosed in double quotes)"
    assert e.value.syntax
    with pytest.raises(BadJson, match=r"^j\.jsonl:3: not a text file \(it is not UTF-8\)$"):
        loads_bounded_json(b'{"a": "\xff"}', "j.jsonl:3")


def test_nan_and_the_infinities_are_read_as_python_writes_them():
    """A journal's rel_error of a broken output may be NaN: the readers that take a time check it themselves."""
    value = loads_bounded_json('{"a": NaN, "b": Infinity}', "t.json")
    assert value["a"] != value["a"] and value["b"] == float("inf")


# The readers.

@pytest.fixture
def fresh_log():
    logs._said.clear()


def test_a_journal_that_is_a_fifo_or_a_device_is_a_journal_error_naming_it(tmp_path, fresh_log):
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(JournalError, match=r"f\.jsonl: is a FIFO, not a regular file$"):
        within(lambda: list(Journal(fifo).records()), unblock=fifo)
    zero = tmp_path / "z.jsonl"
    zero.symlink_to("/dev/zero")
    with pytest.raises(JournalError, match=r"z\.jsonl: is a character device, not a regular file$"):
        within(lambda: list(Journal(zero).records()))
    folder = tmp_path / "d.jsonl"
    folder.mkdir()
    with pytest.raises(JournalError, match=r"d\.jsonl: cannot be read \(Is a directory\)$"):
        list(Journal(folder).records())


def test_a_journal_over_its_bound_is_refused_before_any_record(tmp_path, monkeypatch):
    path = tmp_path / "j.jsonl"
    path.write_text('{"bucket": "b", "key": "1"}\n')
    with path.open("r+b") as f:
        f.truncate((1 << 30) + 1)  # sparse
    with pytest.raises(JournalError) as e:
        within(lambda: next(Journal(path).records()))
    assert str(e.value) == f"{path}: holds 1073741825 bytes, over the 1 GiB a journal may hold; not read"


def test_a_journal_that_grows_past_its_bound_while_read_stops_there(tmp_path, monkeypatch):
    from kerneltune.tuning import journal

    path = tmp_path / "j.jsonl"
    path.write_text('{"bucket": "b", "key": "1", "status": "compile"}\n' * 10)
    monkeypatch.setattr(journal, "MAX_JOURNAL_BYTES", 150)
    real_fstat = os.fstat  # says 0 bytes, as a file still being written may have said a moment before

    def says_empty(fd: int) -> os.stat_result:
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 0, *st[7:10]))

    monkeypatch.setattr(safe_io.os, "fstat", says_empty)
    records = Journal(path).records()
    assert [r["key"] for r in (next(records), next(records), next(records))] == ["1", "1", "1"]
    with pytest.raises(JournalError, match=r"j\.jsonl: holds more than 150 bytes, the most a journal may hold"):
        next(records)


def test_a_journal_line_past_jsons_bounds_is_skipped_with_a_warning_naming_it(tmp_path, caplog, fresh_log):
    path = tmp_path / "j.jsonl"
    path.write_text('{"bucket": "b", "key": "1", "status": "ok", "score": 1}\n'
                    '{"bucket": "b", "key": "2", "seed": ' + "1" * 100_000 + "}\n"
                    '{"bucket": "b", "key": "3", "seed": ' + "1" * 400 + "}\n"
                    '{"bucket": "b", "key": "4", "timing": {"median_us": ' + "1" * 400 + "}}\n"
                    + "[" * 500 + "]" * 500 + "\n"
                    '{"bucket": "b", "key": "6", "status": "ok", "score": 1}\n')
    with caplog.at_level(logging.WARNING, logger="kerneltune.journal"):
        assert [r["key"] for r in Journal(path).records()] == ["1", "6"]
    assert caplog.messages == [
        f"{path}:2: holds an integer of more than {MAX_INT_DIGITS} digits; record skipped",
        f"{path}:3: field 'seed': an integer of 400 digits, past a float's range; record skipped",
        f"{path}:4: field 'timing.median_us': an integer of 400 digits, past a float's range; record skipped",
        f"{path}: 1 more lines that are not records skipped"]  # line 5, nested 500 deep: counted, not named


def test_a_torn_last_line_past_the_bounds_is_still_a_torn_line(tmp_path, caplog, fresh_log):
    path = tmp_path / "j.jsonl"
    path.write_text('{"bucket": "b", "key": "1", "status": "compile"}\n'
                    '{"bucket": "b", "key": "2", "seed": ' + "1" * 5000)
    with caplog.at_level(logging.WARNING, logger="kerneltune.journal"):
        assert [r["key"] for r in Journal(path).records()] == ["1"]
    assert caplog.messages == []


def test_a_bench_result_that_is_no_regular_file_or_past_the_bounds_is_one_error_naming_it(tmp_path, fifo):
    zero = tmp_path / "z.json"
    zero.symlink_to("/dev/zero")
    deep = tmp_path / "deep.json"
    deep.write_text('{"rows": ' + "[" * 100 + "]" * 100 + "}")
    huge = tmp_path / "huge.json"
    huge.write_text('{"rows": [], "n": ' + "1" * 100_000 + "}")
    rowless = tmp_path / "rows.json"
    rowless.write_text('{"rows": [3]}')
    for path, why in [(fifo, "is a FIFO, not a regular file"), (zero, "is a character device, not a regular file"),
                      (deep, f"nested too deeply (more than {MAX_JSON_DEPTH} levels)"),
                      (huge, f"holds an integer of more than {MAX_INT_DIGITS} digits"),
                      (rowless, "a row or a target is not an object")]:
        with pytest.raises(ValueError) as e:
            within(lambda path=path: read_bench_result(path), unblock=fifo)
        assert str(e.value) == f"{path}: not a readable `kerneltune bench` result ({why})"


FRAME = pd.DataFrame({"kernel": ["k"], "device_kind": ["nvidia-h200"]})


def _baseline(path: Path, **entry: Any) -> Path:
    path.write_text(json.dumps({"schema": 1, "kernel": "k", "device_kind": "nvidia-h200", "entries": {
        "e1": {"bucket": {"n": 1}, "bucket_name": "n1", "median_us": 5.0, "spread": 0.01, **entry}}}))
    return path


def test_a_baseline_is_read_as_before(tmp_path):
    assert load_baseline(_baseline(tmp_path / "b.json"), FRAME)["n1"]["median_us"] == 5.0


@pytest.mark.parametrize(("value", "text"), [
    ("NaN", "nan"), ("0", "0"), ("-1.5", "-1.5"), ("Infinity", "inf"), ('"5"', "'5'"), ("null", "None"),
    ("1" + "0" * 400, None)])
def test_a_baseline_entry_whose_time_is_no_positive_finite_number_is_refused(tmp_path, value, text):
    path = _baseline(tmp_path / "b.json")
    path.write_text(path.read_text().replace('"median_us": 5.0', f'"median_us": {value}'))
    with pytest.raises(ValueError) as e:
        load_baseline(path, FRAME)
    said = text if text is not None else brief(int(value))
    assert str(e.value) == f"--baseline {path}: entry 'e1': median_us {said} is not a positive finite time"


def test_a_baseline_entry_with_a_bad_spread_or_no_bucket_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"entry 'e1': spread 'x' is not a finite number at or above 0$"):
        load_baseline(_baseline(tmp_path / "b.json", spread="x"), FRAME)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"schema": 1, "kernel": "k", "device_kind": "nvidia-h200", "entries": {"e1": 3}}))
    with pytest.raises(ValueError, match=r"c\.json: entry 'e1': not an entry"):
        load_baseline(path, FRAME)


def test_a_baseline_that_is_no_regular_file_or_past_the_bounds_is_one_error_naming_it(tmp_path):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "a.json").symlink_to("/dev/zero")
    with pytest.raises(ValueError) as e:
        within(lambda: load_baseline(folder, FRAME))
    assert str(e.value) == f"--baseline {folder / 'a.json'}: is a character device, not a regular file"
    (folder / "a.json").unlink()
    (folder / "a.json").write_text('{"entries": {}, "kernel": ' + "[" * 200 + "]" * 200 + "}")
    with pytest.raises(ValueError, match=r"a\.json: not a tuned table \(nested too deeply"):
        load_baseline(folder, FRAME)
    (folder / "a.json").write_text('{"entries": {}, "kernel": ["k"]}')
    with pytest.raises(ValueError, match=r"a\.json: a table of kernel \['k'\], the journals are of k$"):
        load_baseline(folder, FRAME)
