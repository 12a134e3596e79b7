"""kerneltune rekey: a table carried across a kernel change only where every measured program is unchanged."""

import json

import pytest
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.files.records import Entry
from kerneltune.tables.lookup import bucket_key, select_entry
from kerneltune.tables.store import update_table
from kerneltune.tuning.rekey import CARRIED, CHANGED, CURRENT, FOREIGN, INCONSISTENT, RECORDED, UNKNOWN, rekey_table

from .fake_kernel import DigestingKernel

KERNEL = "tests.tuning.fake_kernel:DIGESTING"


@pytest.fixture(autouse=True)
def kernel_at_hash_a(monkeypatch):
    monkeypatch.setattr(DigestingKernel, "PROGRAMS", {})
    monkeypatch.setattr(DigestingKernel, "SOURCE", ["hash-a"])


def numpy_version():
    import numpy as np

    return np.__version__


def entry(n, *, kernel_hash="hash-a", winner="good", runner_ups=(), fallbacks=(), numpy=None):
    return {"bucket": {"n": n}, "bucket_name": f"n{n}", "problem": {"n": n},
            "config": {"mode": winner, "work": 1}, "median_us": 10.0, "spread": 0.01,
            "stamps": {"kernel_hash": kernel_hash, "numpy": numpy or numpy_version()},
            "runner_ups": [{"config": {"mode": m, "work": 2}, "median_us": 10.1} for m in runner_ups],
            "fallbacks": [{"config": {"mode": m, "work": 1}, "median_us": 20.0} for m in fallbacks]}


def table(tmp_path, *entries):
    path = tmp_path / "fake.json"
    update_table(path, "fake", "cpu", lambda t: t["entries"].update({bucket_key(e["bucket"]): e for e in entries}))
    return path


def entries(path):
    return {e["bucket_name"]: e for e in json.loads(path.read_text())["entries"].values()}


def test_an_entry_under_the_current_hash_gets_each_configs_digest_recorded(tmp_path):
    path = table(tmp_path, entry(2, runner_ups=["slow"], fallbacks=["garbage"]))
    r = rekey_table(KERNEL, path)
    assert [(i.bucket, i.outcome) for i in r.items] == [("n2", RECORDED)] and not r.stale_buckets
    e = entries(path)["n2"]
    assert (e["program_digest"], e["runner_ups"][0]["program_digest"], e["fallbacks"][0]["program_digest"]) == \
        ("p0-n2-w1", "p0-n2-w2", "p0-n2-w1")
    assert e["stamps"] == {"kernel_hash": "hash-a", "numpy": numpy_version()}
    before = path.read_text()
    assert [i.outcome for i in rekey_table(KERNEL, path).items] == [CURRENT] and path.read_text() == before


def test_a_change_that_leaves_every_program_carries_the_entry_and_the_runtime_takes_it(tmp_path, monkeypatch):
    path = table(tmp_path, entry(2, runner_ups=["slow"], fallbacks=["garbage"]))
    rekey_table(KERNEL, path)
    monkeypatch.setattr(DigestingKernel, "SOURCE", ["hash-b"])
    running = {"matched": ["numpy"], "numpy": numpy_version()}
    stale = json.loads(path.read_text())
    assert select_entry(stale, {"n": 2}, running, "hash-b", ("n",))[0] is None
    r = rekey_table(KERNEL, path)
    assert [(i.outcome, i.detail) for i in r.items] == [(CARRIED, "3 programs as measured under hash-a")]
    e = entries(path)["n2"]
    assert e["stamps"]["kernel_hash"] == "hash-b" and e["stamps"]["rekeyed_from"] == ["hash-a"]
    carried = json.loads(path.read_text())
    assert select_entry(carried, {"n": 2}, running, "hash-b", ("n",))[0]["config"] == {"mode": "good", "work": 1}
    monkeypatch.setattr(DigestingKernel, "SOURCE", ["hash-c"])
    rekey_table(KERNEL, path)
    assert entries(path)["n2"]["stamps"]["rekeyed_from"] == ["hash-a", "hash-b"]


def test_one_changed_program_among_the_fallbacks_keeps_the_entry_stale(tmp_path, monkeypatch):
    path = table(tmp_path, entry(2, fallbacks=["slow", "garbage"]), entry(3))
    rekey_table(KERNEL, path)
    recorded = path.read_text()
    monkeypatch.setattr(DigestingKernel, "SOURCE", ["hash-b"])
    monkeypatch.setattr(DigestingKernel, "PROGRAMS", {"garbage": "p1"})
    r = rekey_table(KERNEL, path)
    assert [(i.bucket, i.outcome) for i in r.items] == [("n2", CHANGED), ("n3", CARRIED)]
    assert r.items[0].detail == "fallback 2 of 3 changed since hash-a" and r.stale_buckets == ["n2"]
    assert entries(path)["n2"] == entries_of(recorded)["n2"]
    assert entries(path)["n3"]["stamps"]["kernel_hash"] == "hash-b"


def entries_of(text):
    return {e["bucket_name"]: e for e in json.loads(text)["entries"].values()}


def test_entries_it_cannot_judge_stay_stale_and_say_why(tmp_path, monkeypatch):
    undigested = entry(2, kernel_hash="hash-old")
    foreign = entry(3, kernel_hash="hash-old", numpy="0.0.1")
    foreign["program_digest"] = "p0-n3-w1"
    unlowerable = entry(4, fallbacks=["unlowerable"])
    drifted = entry(5)  # under the current hash, recorded with a digest this lowering does not give
    drifted["program_digest"] = "p9-n5-w1"
    alien = entry(6)
    alien["problem"] = {"m": 6}  # a field this source's problem does not have
    path = table(tmp_path, undigested, foreign, unlowerable, drifted, alien)
    before = path.read_text()
    r = rekey_table(KERNEL, path)
    assert [(i.bucket, i.outcome) for i in r.items] == [("n2", UNKNOWN), ("n3", FOREIGN), ("n4", UNKNOWN),
                                                          ("n5", INCONSISTENT), ("n6", UNKNOWN)]
    assert r.items[0].detail == "measured under hash-old before its programs were digested"
    assert r.items[1].detail.startswith("measured under numpy '0.0.1' (running ")
    assert "fallback 1 does not lower here: ValueError: this source cannot lower" in r.items[2].detail
    assert r.items[3].detail.startswith("under the current source, the program of winner differs from the one")
    assert r.items[4].detail.startswith("its problem is not one this source takes: TypeError")
    assert r.stale_buckets == ["n2", "n3", "n4", "n5", "n6"] and path.read_text() == before


def test_bad_input_names_the_culprit(tmp_path):
    with pytest.raises(ValueError, match="kernel fake cannot digest its programs; its tables are re-measured "
                                         r"after every change \(kerneltune sweep --contenders\)"):
        rekey_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, entry(2)))
    with pytest.raises(ValueError, match=r"rekey: .*missing.json: no such table"):
        rekey_table(KERNEL, tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match=r"rekey: .*bad.json: not valid JSON"):
        rekey_table(KERNEL, tmp_path / "bad.json")


def test_cli_exit_codes_and_the_sweep_that_re_measures_the_stale(tmp_path, monkeypatch):
    path = table(tmp_path, entry(2), entry(3, kernel_hash="hash-old"))
    r = CliRunner().invoke(app, ["rekey", KERNEL, "--table", str(path)])
    assert r.exit_code == 1, r.output
    assert "n2: recorded" in r.output and "n3: unknown measured under hash-old" in r.output
    assert f"--contenders {path} --bucket n3" in " ".join(r.output.split())  # wrapped between words
    assert CliRunner().invoke(app, ["rekey", KERNEL, "--table", str(table(tmp_path / "b", entry(2)))]).exit_code == 0
    r = CliRunner().invoke(app, ["rekey", "tests.tuning.fake_kernel:PLUGIN", "--table", str(path)])
    assert r.exit_code == 3 and "cannot digest its programs" in r.output


def test_an_entry_another_writer_changed_while_it_was_judged_is_left_as_that_writer_left_it(tmp_path):
    """A sweep installing a re-measured entry while rekey judges the old one: the sweep's entry stays, and
    the report says so; the entries nobody touched are still written."""
    path = table(tmp_path, entry(2), entry(3))
    remeasured = {**entry(2), "median_us": 8.0}

    def sweep_meanwhile(item):
        if item.bucket == "n2":
            update_table(path, "fake", "cpu", lambda t: t["entries"].update({bucket_key({"n": 2}): remeasured}))

    r = rekey_table(KERNEL, path, on_item=sweep_meanwhile)
    after = entries(path)
    assert after["n2"] == remeasured and "program_digest" in after["n3"]
    assert r.notes == [f"entry {bucket_key({'n': 2})} changed while it was judged; left as that writer left it"]


def test_without_table_the_cli_finds_a_kernel_s_tables_by_its_own_name(tmp_path, monkeypatch):
    """A kernel given by import path writes and reads fake.json, not a file named after the path."""
    from kerneltune.tables import locations

    user = tmp_path / "user"
    table(tmp_path, entry(2)).rename(tmp_path / "moved.json")
    (user / "cpu").mkdir(parents=True)
    (tmp_path / "moved.json").rename(user / "cpu/fake.json")
    monkeypatch.setattr(locations, "table_roots", lambda: (user, tmp_path / "shipped"))
    r = CliRunner().invoke(app, ["rekey", KERNEL])
    assert r.exit_code == 0 and "n2: recorded" in r.output, r.output


def test_items_come_in_bucket_name_order_and_an_unnamed_or_unstamped_entry_is_judged_not_crashed(tmp_path):
    named = {**entry(2), "bucket_name": "zeta"}
    unnamed = {k: v for k, v in entry(3).items() if k not in ("bucket_name", "runner_ups", "fallbacks")}
    unstamped = {**{k: v for k, v in entry(4).items() if k != "stamps"}, "bucket_name": "alpha"}
    r = rekey_table(KERNEL, table(tmp_path, named, unnamed, unstamped))
    assert [(i.bucket, i.key, i.outcome) for i in r.items] == [
        ("alpha", "n=4", FOREIGN), ("n=3", "n=3", RECORDED), ("zeta", "n=2", RECORDED)]
    assert r.items[0].detail == (f"measured under numpy None (running {numpy_version()!r}): "
                                 "its digests do not compare here")


def test_an_unstamped_entry_of_a_kernel_without_digest_stamps_is_carried_and_stamped(tmp_path, monkeypatch):
    """No stamps at all, its program as recorded: carried, and given the stamps it lacked."""
    monkeypatch.setattr(DigestingKernel, "digest_stamps", ())
    unstamped = {k: v for k, v in entry(4).items() if k != "stamps"}
    path = table(tmp_path, {**unstamped, "program_digest": "p0-n4-w1"})
    [item] = rekey_table(KERNEL, path).items
    assert item.outcome == CARRIED
    assert entries(path)["n4"]["stamps"] == {"kernel_hash": "hash-a", "rekeyed_from": [None]}


def test_a_table_with_an_entry_that_breaks_the_schema_names_it_and_is_not_rewritten(tmp_path):
    path = table(tmp_path, entry(2), entry(3))
    rekey_table(KERNEL, path)  # n2's digests recorded: nothing left to write for it
    raw = json.loads(path.read_text())
    raw["entries"]["n=9"] = {"bucket": {"n": 9}, "config": "not an object"}
    path.write_text(json.dumps(raw))
    r = rekey_table(KERNEL, path)
    assert [i.outcome for i in r.items] == [CURRENT, CURRENT]
    assert r.notes == [f"{path}: entry n=9: field 'config' is missing, empty or not an object; entry skipped"]
    raw["entries"]["n=3"]["stamps"]["kernel_hash"] = "hash-old"  # now one to carry: the write is refused
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"not rewritten, it holds entries that break the schema"):
        rekey_table(KERNEL, path)
    assert json.loads(path.read_text()) == raw


def test_each_outcome_s_detail_names_every_program_it_is_about(tmp_path, monkeypatch):
    """Two programs changed or drifted: both named; a current entry says nothing more; an entry without a
    problem says so; runner-ups are numbered from 1."""
    two = entry(2, runner_ups=["slow"], fallbacks=["garbage"])
    path = table(tmp_path, two, entry(3))
    rekey_table(KERNEL, path)
    assert [(i.outcome, i.detail) for i in rekey_table(KERNEL, path).items] == [(CURRENT, ""), (CURRENT, "")]
    monkeypatch.setattr(DigestingKernel, "PROGRAMS", {"slow": "p1", "garbage": "p2"})
    r = rekey_table(KERNEL, path)
    assert r.items[0].detail.startswith("under the current source, the program of runner-up 1, fallback 1 differs")
    assert (r.table, r.kernel_hash) == (path, "hash-a")
    monkeypatch.setattr(DigestingKernel, "SOURCE", ["hash-b"])
    assert rekey_table(KERNEL, path).items[0].detail == "runner-up 1, fallback 1 of 3 changed since hash-a"
    no_problem = {k: v for k, v in entry(4).items() if k != "problem"}
    [item] = rekey_table(KERNEL, table(tmp_path / "p", no_problem)).items
    assert (item.outcome, item.detail) == (UNKNOWN, "the entry records no problem to lower")


def test_every_foreign_stamp_is_named_and_the_digest_is_taken_under_the_entry_s_stamps(monkeypatch):
    """A digest depends on what the entry was measured under (the ranker's: the JAX that lowers it), so it is
    computed with the entry's stamps; an entry measured under other digest stamps names each of them."""
    from kerneltune.tuning.rekey import _judge

    kernel = DigestingKernel()
    monkeypatch.setattr(DigestingKernel, "digest_stamps", ("numpy", "jax"))
    e = entry(2, numpy="0.1")
    e["stamps"]["jax"] = "0.2"
    outcome, detail, _ = _judge(kernel, Entry.from_json(e), "hash-a", {"numpy": "1.0", "jax": "2.0"})
    assert (outcome, detail) == (FOREIGN, "measured under numpy '0.1' (running '1.0'), jax '0.2' (running '2.0'): "
                                          "its digests do not compare here")
    seen = []
    monkeypatch.setattr(DigestingKernel, "program_digest", lambda self, p, tiles, stamps: seen.append(stamps) or "d")
    assert _judge(kernel, Entry.from_json(e), "hash-a", dict(e["stamps"]))[0] == RECORDED
    assert seen == [e["stamps"]]


def test_a_long_reason_is_cut_to_500_characters(monkeypatch):
    from kerneltune.tuning.rekey import _judge

    alien = entry(2)
    alien["problem"] = {"m" * 1000: 2}
    outcome, detail, _ = _judge(DigestingKernel(), Entry.from_json(alien), "hash-a", dict(alien["stamps"]))
    assert outcome == UNKNOWN and len(detail) == 500 and detail.startswith("its problem is not one this source")
    lowering = entry(3, winner="unlowerable")
    def unlowerable(*_):
        raise ValueError("x" * 1000)

    monkeypatch.setattr(DigestingKernel, "program_digest", unlowerable)
    outcome, detail, _ = _judge(DigestingKernel(), Entry.from_json(lowering), "hash-a", dict(lowering["stamps"]))
    assert outcome == UNKNOWN and len(detail) == 500 and detail.startswith("its winner does not lower here")
