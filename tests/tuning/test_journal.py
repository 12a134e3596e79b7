import pytest

from kerneltune.tuning.journal import Journal, JournalError, config_key


def test_torn_last_line_is_ignored_and_repaired_and_the_repair_said(tmp_path, caplog):
    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "ok"})
    with j.path.open("ab") as f:
        f.write(b'{"bucket": "b", "key": "2", "sta')  # kill -9 mid-write
    assert [r["key"] for r in j.records()] == ["1"]
    with caplog.at_level("WARNING", logger="kerneltune.journal"):
        j.append({"bucket": "b", "key": "3", "status": "ok"})
    assert [r["key"] for r in j.records()] == ["1", "3"]
    assert "dropped a torn last line of 32 bytes" in caplog.text


def test_corrupt_middle_line_is_an_error(tmp_path):
    p = tmp_path / "j.jsonl"
    p.write_text('{"bucket": "b", "key": "1"}\nnot json\n{"bucket": "b", "key": "2"}\n')
    with pytest.raises(JournalError, match=r"j\.jsonl:2"):
        list(Journal(p).records())


def test_config_key_is_canonical():
    assert config_key({"b": 1, "a": True}) == config_key({"a": True, "b": 1}) == '{"a":true,"b":1}'


def test_a_folder_of_worker_journals_merges_earliest_first(tmp_path):
    from kerneltune.tuning.journal import merged_journals

    rec = {"bucket": "b", "key": "k", "status": "ok"}
    Journal(tmp_path / "a.jsonl").append({**rec, "time": "2026-11-30T02:00:00Z", "v": "late"})
    Journal(tmp_path / "b.jsonl").append({**rec, "time": "2026-11-30T01:00:00Z", "v": "early"})
    Journal(tmp_path / "b.jsonl").append({**rec, "key": "k2", "time": "2026-11-30T03:00:00Z", "v": "only"})
    merged = merged_journals(tmp_path)
    assert {k: r["v"] for k, r in merged.items()} == {("b", "k"): "early", ("b", "k2"): "only"}
    assert merged_journals(tmp_path / "a.jsonl")[("b", "k")]["v"] == "late"
