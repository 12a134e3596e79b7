from pathlib import Path

import pytest

from kerneltune.tuning.journal import Journal, JournalError, config_key


def test_torn_last_line_is_ignored_and_repaired_and_the_repair_said(tmp_path, caplog):
    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "ok", "timing": {"median_us": 1.0}})
    with j.path.open("ab") as f:
        f.write(b'{"bucket": "b", "key": "2", "sta')  # kill -9 mid-write
    assert [r["key"] for r in j.records()] == ["1"]
    with caplog.at_level("WARNING", logger="kerneltune.journal"):
        j.append({"bucket": "b", "key": "3", "status": "ok", "timing": {"median_us": 1.0}})
    assert [r["key"] for r in j.records()] == ["1", "3"]
    assert "dropped a torn last line of 32 bytes" in caplog.text


BAD_LINES = {
    "not json": "not a JSON line", "[1, 2]": "a JSON list, not an object", "[" * 100000: "nested too deeply",
    '{"key": "x"}': "field 'bucket' is missing", '{"bucket": "b", "key": "x", "timing": "fast"}': "field 'timing'",
    '{"bucket": "b", "key": "x", "tiles": "big"}': "field 'tiles' is not an object",
    '{"bucket": "b", "key": "x", "status": "ok", "timing": {"median_us": NaN}}': "median_us: nan",
    '{"bucket": "b", "key": "x", "status": "ok", "timing": {"median_us": -1.0}}': "median_us: -1.0",
    '{"bucket": "b", "key": "x", "status": "ok", "timing": {"median_us": Infinity}}': "median_us: inf",
    '{"bucket": "b", "key": "x", "status": "ok"}': "without a timing's median_us",
    '{"bucket": "b", "key": "x", "stamps": {"device_kind": "../up"}}': "device_kind '../up' is not a plain name",
    '{"bucket": "b", "key": "x", "status": 3}': "field 'status': 3 is not a string",
}


@pytest.mark.parametrize(("line", "why"), list(BAD_LINES.items()), ids=range(len(BAD_LINES)))
def test_a_bad_middle_line_is_one_warning_naming_it_and_the_rest_are_used(tmp_path, caplog, line, why):
    p = tmp_path / "j.jsonl"
    p.write_text('{"bucket": "b", "key": "1", "status": "compile"}\n' + line
                 + '\n{"bucket": "b", "key": "2", "status": "compile"}\n')
    with caplog.at_level("WARNING", logger="kerneltune.journal"):
        assert [r["key"] for r in Journal(p).records()] == ["1", "2"]
        assert [r["key"] for r in Journal(p).records()] == ["1", "2"]
    assert caplog.text.count(f"{p}:2: ") == 1 and why in caplog.text and "record skipped" in caplog.text


def test_a_record_that_could_not_be_read_back_is_never_written(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    with pytest.raises(JournalError, match="median_us: nan"):
        j.append({"bucket": "b", "key": "1", "status": "ok", "timing": {"median_us": float("nan")}})
    assert not j.path.exists() or j.path.read_bytes() == b""


def test_a_timing_that_is_no_time_becomes_a_runtime_failure():
    from kerneltune.tuning.journal import make_record

    for median in (float("nan"), float("inf"), 0.0, -3.0):
        rec = make_record({"bucket": "x"}, {"a": 1}, {"status": "ok", "timing": {"median_us": median}})
        assert rec["status"] == "runtime" and "not a positive finite time" in rec["error"] and "timing" not in rec


def test_config_key_is_canonical():
    assert config_key({"b": 1, "a": True}) == config_key({"a": True, "b": 1}) == '{"a":true,"b":1}'


def test_a_folder_of_worker_journals_merges_earliest_first(tmp_path):
    from kerneltune.tuning.journal import merged_journals

    rec = {"bucket": "b", "key": "k", "status": "ok", "timing": {"median_us": 1.0}}
    Journal(tmp_path / "a.jsonl").append({**rec, "time": "2026-11-30T02:00:00Z", "v": "late"})
    Journal(tmp_path / "b.jsonl").append({**rec, "time": "2026-11-30T01:00:00Z", "v": "early"})
    Journal(tmp_path / "b.jsonl").append({**rec, "key": "k2", "time": "2026-11-30T03:00:00Z", "v": "only"})
    merged = merged_journals(tmp_path)
    assert {k: r["v"] for k, r in merged.items()} == {("b", "k"): "early", ("b", "k2"): "only"}
    assert merged_journals(tmp_path / "a.jsonl")[("b", "k")]["v"] == "late"


def test_a_record_holds_the_bucket_the_config_the_reply_and_its_time():
    from kerneltune.tuning.journal import make_record

    reply = {"status": "ok", "restart": True, "tflops": 200.0, "stamps": {"bf16_tflops_ceiling": 800.0},
             "time": "2026-12-01T00:00:00Z"}
    tiles = {"b": 2, "a": 1}
    rec = make_record({"bucket": "x", "kernel": "k"}, tiles, reply, worker="w1")
    assert rec == {"bucket": "x", "kernel": "k", "key": '{"a":1,"b":2}', "tiles": {"b": 2, "a": 1}, "status": "ok",
                   "tflops": 200.0, "stamps": {"bf16_tflops_ceiling": 800.0}, "time": "2026-12-01T00:00:00Z",
                   "worker": "w1", "pct_ceiling": 25.0}
    tiles["a"] = 9
    assert rec["tiles"] == {"b": 2, "a": 1}  # a copy
    fresh = make_record({"bucket": "x"}, {"a": 1}, {"status": "runtime"})
    assert fresh["time"].startswith("20") and "pct_ceiling" not in fresh and "restart" not in fresh


def test_the_last_record_of_a_config_is_the_one_done(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "correctness"})
    j.append({"bucket": "c", "key": "1", "status": "ok", "timing": {"median_us": 1.0}})
    j.append({"bucket": "b", "key": "1", "status": "ok", "timing": {"median_us": 1.0}})
    assert {k: r["status"] for k, r in j.done().items()} == {("b", "1"): "ok", ("c", "1"): "ok"}


def test_appends_are_whole_sorted_lines_and_a_clean_tail_is_left_alone(tmp_path, caplog):
    j = Journal(tmp_path / "deep/j.jsonl")
    with caplog.at_level("WARNING", logger="kerneltune.journal"):
        j.append({"key": "1", "bucket": "b", "status": "compile"})
        j.append({"key": "2", "bucket": "b", "status": "compile"})
    assert j.path.read_bytes() == (b'{"bucket": "b", "key": "1", "status": "compile"}\n'
                                   b'{"bucket": "b", "key": "2", "status": "compile"}\n')
    assert caplog.text == ""
    j.path.write_bytes(b"")
    j.append({"key": "3", "bucket": "b", "status": "compile"})
    assert j.path.read_bytes() == b'{"bucket": "b", "key": "3", "status": "compile"}\n'


def test_a_torn_only_line_is_dropped_whole(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    j.path.write_bytes(b'{"bucket": "b", "ke')
    assert list(j.records()) == []
    j.append({"bucket": "b", "key": "1", "status": "compile"})
    assert j.path.read_bytes() == b'{"bucket": "b", "key": "1", "status": "compile"}\n'


def test_blank_lines_are_skipped(tmp_path):
    p = tmp_path / "j.jsonl"
    p.write_text('{"bucket": "b", "key": "1", "status": "compile"}\n\n  \n'
                 '{"bucket": "b", "key": "2", "status": "compile"}\n')
    assert [r["key"] for r in Journal(p).records()] == ["1", "2"]


def test_a_torn_tail_after_many_lines_keeps_every_whole_line_and_says_exactly_what_it_dropped(tmp_path, caplog):
    j = Journal(tmp_path / "a/b/j.jsonl")
    for key in "123":
        j.append({"bucket": "b", "key": key, "status": "compile"})
    assert Path(f"{j.path}.lock").exists()  # appends are serialised on the journal's own lock file
    with j.path.open("ab") as f:
        f.write(b'{"bucket": "b", "ke')
    with caplog.at_level("WARNING", logger="kerneltune.journal"):
        j.append({"bucket": "b", "key": "4", "status": "compile"})
    assert [r["key"] for r in j.records()] == ["1", "2", "3", "4"]
    assert caplog.messages == [f"{j.path}: dropped a torn last line of 19 bytes (a write cut by a kill); the "
                               "candidate it held is measured again"]


def test_merging_untimed_and_tied_records(tmp_path):
    from kerneltune.tuning.journal import merged_journals

    rec = {"bucket": "b", "key": "k", "status": "compile"}
    Journal(tmp_path / "a.jsonl").append({**rec, "time": "2026-11-30T01:00:00Z", "v": "a"})
    Journal(tmp_path / "b.jsonl").append({**rec, "time": "2026-11-30T01:00:00Z", "v": "b"})
    Journal(tmp_path / "c.jsonl").append({**rec, "key": "u", "v": "timed"} | {"time": "2026-11-30T01:00:00Z"})
    Journal(tmp_path / "d.jsonl").append({**rec, "key": "u", "v": "untimed (an older journal)"})
    merged = merged_journals(tmp_path)
    assert merged[("b", "k")]["v"] == "a"  # a tie goes to the first journal by name
    assert merged[("b", "u")]["v"] == "untimed (an older journal)"  # no time counts as the earliest


def test_the_same_config_twice_at_the_same_time_in_one_journal_keeps_the_first(tmp_path):
    from kerneltune.tuning.journal import merged_journals

    j = Journal(tmp_path / "a.jsonl")
    for v in ("first", "second"):
        j.append({"bucket": "b", "key": "k", "time": "2026-11-30T01:00:00Z", "v": v, "status": "compile"})
    assert merged_journals(tmp_path)[("b", "k")]["v"] == "first"


def test_each_append_reaches_the_disk_before_it_returns(tmp_path, monkeypatch):
    """A finished candidate survives a power cut or kill -9 only if its line is fsynced when appended."""
    import os

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "compile"})
    j.append({"bucket": "b", "key": "2", "status": "compile"})
    assert len(synced) == 2


def test_a_journal_named_through_a_link_is_refused_and_a_hard_link_is_locked_as_the_file_itself(tmp_path):
    """Two sweeps, one given the journal and one a link to it, would both write it (10-12 duplicate records); a
    sweep given a link cut its target's last line and appended to it: a link is refused, a hard link is one file."""
    import os

    from filelock import Timeout

    real = Journal(tmp_path / "real.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with real.writer_lock(), pytest.raises(JournalError, match=r"link\.jsonl: a link to .*real\.jsonl; a journal "
                                                               r"is written only as a file of its own"):
        Journal(tmp_path / "link.jsonl").writer_lock().acquire()
    os.link(tmp_path / "real.jsonl", tmp_path / "hard.jsonl")
    with real.writer_lock(), pytest.raises(Timeout):
        Journal(tmp_path / "hard.jsonl").writer_lock().acquire()
    with Journal(tmp_path / "hard.jsonl").writer_lock():  # released: the next one takes it
        pass


def test_a_full_disk_names_the_journal_and_keeps_what_it_holds(tmp_path, monkeypatch):
    import errno
    import os

    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "compile"})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(JournalError, match=r"j\.jsonl: cannot append a record \(No space left on device\); every "
                                           r"record before it is kept"):
        j.append({"bucket": "b", "key": "2", "status": "compile"})
    monkeypatch.undo()
    assert next(r["key"] for r in j.records()) == "1"
