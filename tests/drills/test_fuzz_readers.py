"""Fuzzing the readers with Hypothesis: any bytes, any JSON value, and values shaped like a table or a journal
record with hostile leaves (NaN, infinities, 400-digit integers, wrong types, deep nesting), through
``read_table``, a launch's lookup and ``Journal.records``. Nothing escapes but the reader's own typed error
(TableError; JournalError), and nothing a check refuses gets through (an entry with a defect, a record that
``record_defect`` refuses). Derandomized: the same examples every run, a few thousand in all, in seconds."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerneltune.files import logs
from kerneltune.files.records import Record, entry_problem, record_defect
from kerneltune.tables import lookup
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.store import TableError, read_table, table_path
from kerneltune.tuning.journal import Journal, JournalError

from ..paths import FIXTURES, REPO
from ..tables.test_tables import BUCKET, HARD, MATCHED, RUNNING


def fuzz(n: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``n`` examples, the same every run; ``slow``: 5-7 s a test, `make test`'s, not the quick loop's."""
    return lambda test: pytest.mark.slow(_settings(n)(test))


def _settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


TABLE_TEXT = (REPO / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json").read_text()
JOURNAL_LINES = (FIXTURES / "ranker_attention/run-c-journals/ranker_attention-live-w0.jsonl").read_text().splitlines()
# Text put into a file as it is: what json.dumps never writes, but a file may hold.
RAW = ["9" * 5000, "-" + "1" * 100_000, "[" * 2000, "{" * 3000, "[" * 70 + "]" * 70, "NaN", "-Infinity", "1e999",
       '"\\ud800"', "\ufeff", "\x00", "\xff", '"' + "x" * 1000, "]", "}", ",", ":", "null"]

# JSON values: scalars that break arithmetic or types, nested a few levels.
big_ints = st.sampled_from([(1, 10, 400), (-1, 10, 400), (1, 2, 63), (1, 2, 1024), (1, 10, 4299)]).map(
    lambda sbe: sbe[0] * sbe[1] ** sbe[2])  # built, not listed: a strategy's repr would be 10 kB of digits
scalars = st.one_of(st.none(), st.booleans(), st.integers(), big_ints, st.floats(), st.text(max_size=8))
json_values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=12)
# A field's hostile value: any scalar, or a small list or object of them (cheaper to draw than ``json_values``).
hostile = scalars | st.lists(scalars, max_size=2) | st.dictionaries(st.text(max_size=3), scalars, max_size=2)
times = st.one_of(st.sampled_from([1.5, 0, 0.0, -1, math.nan, math.inf, -math.inf, True, "1.0", None]), big_ints,
                  st.floats(), st.integers(), hostile)
flat = st.dictionaries(st.sampled_from(list(BUCKET)), scalars, max_size=6) | hostile


def _stamps() -> st.SearchStrategy[Any]:
    running = {k: st.just(v) for k, v in {**{k: RUNNING[k] for k in MATCHED}, "kernel_hash": "h1"}.items()}
    return st.one_of(hostile, st.fixed_dictionaries(running, optional={
        "rekeyed_from": hostile, "replayed_from": hostile, "date": hostile}))


measured = st.lists(st.fixed_dictionaries({}, optional={"config": flat, "median_us": times, "spread": times}),
                    max_size=3) | hostile
entries = st.fixed_dictionaries({}, optional={
    "bucket": flat, "config": flat, "median_us": times, "spread": times, "stamps": _stamps(),
    "fallbacks": measured, "runner_ups": measured, "bucket_name": hostile}) | json_values
tables = st.fixed_dictionaries({"schema": st.just(1) | hostile,
                                "entries": st.dictionaries(st.text(max_size=8), entries, max_size=4) | hostile},
                               optional={"kernel": hostile, "device_kind": hostile})


def spliced(text: str) -> st.SearchStrategy[bytes]:
    """``text`` with a few raw fragments (``RAW``, or any text) put in or written over at any place, as bytes."""
    def apply(edits: list[tuple[float, str, bool]]) -> bytes:
        out = text
        for where, what, over in edits:
            i = int(where * len(out))
            out = out[:i] + what + out[i + len(what) if over else i:]
        return out.encode("utf-8", "surrogatepass")
    fragment = st.sampled_from(RAW) | st.text(max_size=6)
    return st.lists(st.tuples(st.floats(0, 1), fragment, st.booleans()), min_size=1, max_size=3).map(apply)


def often(valid: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` half the time, else a draw of ``strategy`` (``|`` would weigh ``valid`` as one branch of many)."""
    return st.booleans().flatmap(lambda keep: st.just(valid) if keep else strategy)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-readers")


@pytest.fixture(autouse=True)
def quiet():
    """Every bad file and line is logged (once); the drill counts outcomes, not words."""
    logging.getLogger("kerneltune").setLevel(logging.CRITICAL)
    yield
    logging.getLogger("kerneltune").setLevel(logging.NOTSET)
    logs._said.clear()


def _read_table_holds(path: Path, data: bytes) -> None:
    """The property of a table: read, or refused as a TableError naming the file; what is read is only entries
    without a defect."""
    path.write_bytes(data)
    try:
        table = read_table(path)
    except TableError as e:
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e)
        return
    assert table is not None and isinstance(table["entries"], dict)
    for key, entry in table["entries"].items():
        assert entry_problem(entry) is None, key


@fuzz(1500)
@given(data=st.binary(max_size=200) | spliced(TABLE_TEXT))
def test_read_table_over_any_bytes(folder, data):
    _read_table_holds(folder / "bytes.json", data)


@fuzz(1000)
@given(value=json_values | tables)
def test_read_table_over_any_json_value(folder, value):
    _read_table_holds(folder / "value.json", _dumps(value))


@fuzz(600)
@given(bucket=often(BUCKET, st.fixed_dictionaries({k: often(v, scalars) for k, v in BUCKET.items()})),
       config=often({"block_q": 64}, flat), median=often(1.0, times),
       stamps=st.fixed_dictionaries({}, optional={"rekeyed_from": hostile, "replayed_from": hostile}),
       extra=st.fixed_dictionaries({}, optional={"spread": times, "fallbacks": measured, "runner_ups": measured}),
       whole=st.none() | entries, text=spliced('{"schema": 1, "entries": {"e": @}}') | st.none())
def test_a_launchs_lookup_over_hostile_tables(folder, bucket, config, median, stamps, extra, whole, text):
    """The table as a launch sees it: the entry's stamps match (so its bucket, config and times are weighed), its
    values hostile, or any entry at all; ``tuned_config`` answers a config or None, and raises nothing. Each
    field is often the valid one, so that an entry with one hostile value is often the one the lookup uses."""
    entry = whole if whole is not None else {
        "bucket": bucket, "config": config, "median_us": median,
        "stamps": {**{k: RUNNING[k] for k in MATCHED}, "kernel_hash": "h1", **stamps}, **extra}
    path = table_path(folder / "lookup", "nvidia-h200", "k")
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        path.write_bytes(_dumps({"schema": 1, "entries": {"e": entry}}))
    else:
        path.write_bytes(text.replace(b"@", _dumps(entry), 1))
    lookup._read_at.cache_clear()  # a rewrite within the clock's tick keeps its mtime
    got = tuned_config("k", BUCKET, "h1", HARD, RUNNING, (folder / "lookup",),
                       refuses=lambda e: None if e["config"].get("block_q") == 64 else "not 64")
    assert got is None or isinstance(got, dict)


def _records_hold(path: Path, data: bytes) -> None:
    """The property of a journal: only records without a defect come out; nothing is raised but a JournalError
    (and for a regular file within the bound, not even that)."""
    path.write_bytes(data)
    try:
        for rec in Journal(path).records():
            assert isinstance(rec, Record) and record_defect(rec.to_json()) is None
    except JournalError as e:  # pragma: no cover - a regular file within the bound is never refused
        pytest.fail(f"a regular journal refused: {e}")


record_like = st.fixed_dictionaries({"bucket": st.text(max_size=4) | hostile, "key": st.text(max_size=4)},
                                    optional={
    "status": st.sampled_from(["ok", "pruned", "runtime"]) | hostile,
    "timing": st.fixed_dictionaries({}, optional={"median_us": times, "spread": times, "samples": times}) | hostile,
    "tiles": flat, "stamps": _stamps() | st.fixed_dictionaries({}, optional={"device_kind": hostile,
                                                                             "bf16_tflops_ceiling": times}),
    "tflops": times, "seed": times, "score": times, "kernel": hostile, "time": hostile, "error": hostile})


@fuzz(800)
@given(lines=st.lists(st.binary(max_size=60) | spliced(JOURNAL_LINES[0]), max_size=5), torn=st.booleans())
def test_journal_records_over_any_bytes(folder, lines, torn):
    _records_hold(folder / "bytes.jsonl", b"\n".join(lines) + (b"" if torn else b"\n"))


@fuzz(800)
@given(values=st.lists(json_values | record_like, max_size=4))
def test_journal_records_over_any_json_values(folder, values):
    _records_hold(folder / "values.jsonl", b"".join(_dumps(v) + b"\n" for v in values))
