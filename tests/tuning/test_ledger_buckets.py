"""Buckets from the traffic: the recorded problems a sweep --from-ledger takes (the most called first, none its own
entry served, at most --top), problems given as --bucket key=value, and what each refuses in one line."""

from pathlib import Path

import pytest

from kerneltune.tables.ledger import LedgerRecord, Served, add_to_ledger, ledger_path
from kerneltune.tuning.ledger_buckets import parse_problem, recorded_buckets
from kerneltune.tuning.sweep import SweepOptions, check_options

from ..author.numpy_kernels import RowScale

KERNEL = RowScale()
SOURCE = str(Path(__file__).parents[1] / "author" / "numpy_kernels.py") + ":KERNEL"


def rec(rows, served=Served.NEIGHBOUR, count=1, last="2026-12-07T10:00:00Z", **fields):
    problem = {"rows": rows, "cols": 16, "dtype": "float32", **fields}
    return LedgerRecord("h", "t1", problem, served, count, "2026-12-07T09:00:00Z", last)


@pytest.fixture
def ledger(tmp_path):
    path = ledger_path(tmp_path, "cpu", KERNEL.name)
    add_to_ledger(path, KERNEL.name, "cpu", [
        rec(8, Served.TUNED, 50),  # served by its own entry: nothing to tune
        rec(16, count=5), rec(32, count=20), rec(32, Served.HEURISTIC, count=3, last="2026-12-07T09:30:00Z"),
        rec(48, count=1),
        rec(64, Served.NEIGHBOUR, 9, last="2026-12-07T09:00:00Z"), rec(64, Served.TUNED, 9),  # tuned since
        LedgerRecord("h", "t1", {"rows": 4, "width": 3}, Served.HEURISTIC, 99, "x", "y"),  # fields of another kernel
    ])
    return tmp_path


def test_the_most_called_untuned_problems_first(ledger):
    space = KERNEL._parsed_space
    buckets, note = recorded_buckets(KERNEL, ledger, space, None)
    assert [b.problem["rows"] for b in buckets] == [32, 16, 48]
    assert "rows=32" in buckets[0].name and "(23 calls)" in note
    assert "2 served by their own entry" in note and "1 whose fields row-scale no longer takes" in note
    top, _ = recorded_buckets(KERNEL, ledger, space, 1)
    assert [b.problem["rows"] for b in top] == [32]
    only, _ = recorded_buckets(KERNEL, ledger, space, None, [{"rows": 48}])
    assert [b.problem["rows"] for b in only] == [48]


def test_a_recorded_problem_a_space_names_keeps_the_space_bucket_name(tmp_path):
    add_to_ledger(ledger_path(tmp_path, "cpu", KERNEL.name), KERNEL.name, "cpu", [rec(64, count=2)])
    [bucket], _ = recorded_buckets(KERNEL, tmp_path, KERNEL._parsed_space, None)
    assert bucket.name == "r64"


def test_a_ledger_with_nothing_to_tune_says_so(tmp_path):
    add_to_ledger(ledger_path(tmp_path, "cpu", KERNEL.name), KERNEL.name, "cpu", [rec(8, Served.TUNED)])
    with pytest.raises(ValueError, match=r"no problem of row-scale to tune .*1 served by their own entry"):
        recorded_buckets(KERNEL, tmp_path, KERNEL._parsed_space, None)
    other = tmp_path / "cpu" / "other.json"
    other.write_text('{"schema": 1, "kernel": "other", "device_kind": "cpu", "records": []}')
    with pytest.raises(ValueError, match="holds no recorded call of row-scale"):
        recorded_buckets(KERNEL, other, KERNEL._parsed_space, None)


def test_parse_problem_reads_numbers_bools_and_words():
    assert parse_problem("rows=64,scale=0.5,on=true,dtype=float32") == {"rows": 64, "scale": 0.5, "on": True,
                                                                         "dtype": "float32"}
    assert parse_problem("x=nan") == {"x": "nan"}
    with pytest.raises(ValueError, match="'rows' is not key=value"):
        parse_problem("rows")


def test_the_sweep_options_take_the_ledger_and_a_given_problem(ledger, tmp_path):
    checked = check_options(SweepOptions(SOURCE, None, tmp_path / "out", from_ledger=True, ledger=ledger, top=2))
    assert [b.problem["rows"] for b in checked.buckets] == [32, 16] and "from the ledger" in checked.notes[0]
    given = check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("rows=24,cols=16,dtype=float32",)))
    assert [(b.name, b.problem) for b in given.buckets] == [
        ("rows=24,cols=16,dtype=float32", {"rows": 24, "cols": 16, "dtype": "float32"})]
    named = check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("r8", "rows=8,cols=16,dtype=float32")))
    assert [b.name for b in named.buckets] == ["r8", "rows=8,cols=16,dtype=float32"]


@pytest.mark.parametrize(("options", "why"), [
    ({"top": 3}, "add --from-ledger"),
    ({"top": 0, "from_ledger": True}, "at least 1"),
    ({"ledger": Path("x")}, "ledger-path: names the ledger"),
])
def test_options_that_make_no_sense_are_refused(tmp_path, options, why):
    with pytest.raises(ValueError, match=why):
        SweepOptions(SOURCE, None, tmp_path, **options)


def test_a_partial_problem_with_no_recorded_call_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"--bucket rows=24: not a whole problem of row-scale .*missing \['cols', "
                                         r"'dtype'\].*no ledger there"):
        check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("rows=24",),
                                   ledger=tmp_path / "no-ledger"))


def test_a_partial_problem_picks_the_recorded_calls_that_hold_it(ledger, tmp_path):
    """As --bucket n_cols=781 picks a Triton kernel's recorded calls of that key (their arguments only a call gives)."""
    checked = check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("rows=16",), ledger=ledger))
    assert [b.problem for b in checked.buckets] == [{"rows": 16, "cols": 16, "dtype": "float32"}]
    assert "1 bucket(s) from the ledger" in checked.notes[0]


@pytest.mark.parametrize("from_ledger", [False, True])
def test_a_recorded_key_asked_for_by_name_is_tuned_again_though_its_own_entry_serves_it(ledger, tmp_path,
                                                                                       from_ledger):
    """docs/traffic.md: `--bucket key=value` picks the recorded calls of one key. Once its entry served them, it was
    refused ("missing ['call', 'dtypes']", exit 3): a key asked for by name is re-tuned whether it is served or not,
    and its calls, all of them, are counted; without --bucket the served ones stay out."""
    checked = check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("rows=8",), ledger=ledger,
                                         from_ledger=from_ledger))
    assert [b.problem for b in checked.buckets] == [{"rows": 8, "cols": 16, "dtype": "float32"}]
    assert "(50 calls, served by its own entry now)" in checked.notes[0]
    again = check_options(SweepOptions(SOURCE, None, tmp_path / "out", buckets=("rows=64",), ledger=ledger))
    assert "(18 calls, served by its own entry now)" in again.notes[0]
    rest, _ = recorded_buckets(KERNEL, ledger, KERNEL._parsed_space, None)
    assert 8 not in [b.problem["rows"] for b in rest]
