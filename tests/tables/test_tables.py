import json
import logging
import multiprocessing as mp
import re

import pytest

from kerneltune.files import logs
from kerneltune.tables.lookup import bucket_key, select_entry, tuned_config
from kerneltune.tables.store import TableError, read_table, table_path, update_table

MATCHED = ["gpu", "sm_count", "driver", "cuda", "jax", "jaxlib"]
RUNNING = {"gpu": "NVIDIA H200", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0", "jax": "0.11.2",
           "jaxlib": "0.11.2", "device_kind": "nvidia-h200", "matched": MATCHED}
BUCKET = {"head_dim": 128, "dtype": "bfloat16", "cap_method": "tanh", "group": 1, "seq_len": 4096,
          "batch_heads": 64}
HARD = ("head_dim", "dtype")


def entry(bucket=BUCKET, config=None, **stamps):
    return {"bucket": bucket, "config": config or {"block_q": 64}, "median_us": 1.0,
            "stamps": {**{k: RUNNING[k] for k in MATCHED}, "kernel_hash": "h1", **stamps}}


def write(path, *entries):
    update_table(path, "k", "nvidia-h200", lambda t: t["entries"].update({bucket_key(e["bucket"]): e for e in entries}))


@pytest.fixture
def on_h200():
    logs._said.clear()


def test_round_trip(tmp_path, on_h200):
    write(table_path(tmp_path, "nvidia-h200", "k"), entry(config={"block_q": 64, "block_kv": 128}))
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 64, "block_kv": 128}


@pytest.mark.parametrize(("stamp", "value"), [("gpu", "NVIDIA H100 80GB HBM3"), ("sm_count", 114), ("driver", "570.1"),
                                              ("cuda", "12.8"), ("jax", "0.10.0"), ("jaxlib", "0.10.0"),
                                              ("kernel_hash", "other")])
def test_foreign_entry_is_not_used_and_the_miss_is_logged_once(tmp_path, on_h200, caplog, stamp, value):
    write(table_path(tmp_path, "nvidia-h200", "k"), entry(**{stamp: value}))
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) is None
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) is None
    text = caplog.text
    assert f"{stamp}: table" in text and text.count(f"{stamp}: table") == 1


def test_nearest_valid_bucket_and_hard_fields():
    near = entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 1})
    far = entry(bucket={**BUCKET, "seq_len": 512}, config={"block_q": 2})
    other_d = entry(bucket={**BUCKET, "head_dim": 64, "seq_len": 4096}, config={"block_q": 3})
    table = {"entries": {bucket_key(e["bucket"]): e for e in (near, far, other_d)}}
    chosen, misses = select_entry(table, BUCKET, RUNNING, "h1", HARD)
    assert chosen["config"] == {"block_q": 1} and "nearest" in misses[0]
    only_d64 = {"entries": {"x": other_d}}
    assert select_entry(only_d64, BUCKET, RUNNING, "h1", HARD)[0] is None


def test_corrupt_table_names_the_file(tmp_path):
    p = tmp_path / "t.json"
    p.write_text("{not json")
    with pytest.raises(TableError, match=r"t\.json: not valid JSON"):
        read_table(p)
    p.write_text(json.dumps({"schema": 99, "entries": {}}))
    with pytest.raises(TableError, match="schema"):
        read_table(p)


@pytest.mark.parametrize(("broken", "match"), [
    ({"config": {"block_q": 64}}, "entry k1: field 'bucket' is missing"),
    ({**entry(), "config": "q64"}, "entry k1: field 'config' is missing, empty or not an object"),
    ({**entry(), "fallbacks": {"config": {}}}, "entry k1: field 'fallbacks' is not a list"),
    ({**entry(), "fallbacks": [{"config": {"block_q": 128}}]}, r"entry k1: fallbacks\[0\].median_us: None"),
    ({**entry(), "config": {"block_q": 64, "persistent": None}}, r"entry k1: config.persistent: None is not"),
    ({**entry(), "config": {"block_q": [64]}}, r"entry k1: config.block_q: \[64\] is not"),
    ({**entry(), "median_us": True}, "entry k1: median_us: True is not a positive finite time"),
    ({**entry(), "median_us": "1.0"}, "entry k1: median_us: '1.0' is not a positive finite time"),
    ({**entry(), "median_us": float("nan")}, "entry k1: median_us: nan is not a positive finite time"),
    ({**entry(), "median_us": -5.0}, "entry k1: median_us: -5.0 is not a positive finite time"),
    ({**entry(), "fallbacks": [{"config": {"block_q": 128}, "median_us": float("inf")}]},
     r"entry k1: fallbacks\[0\].median_us: inf is not a positive finite time"),
    ({**entry(), "runner_ups": [{"config": {"block_q": 64}, "median_us": None}]}, r"runner_ups\[0\].median_us"),
])
def test_a_malformed_entry_is_skipped_alone_and_named(tmp_path, on_h200, caplog, broken, match):
    """A hand-edited or truncated entry must not crash a launch with a KeyError, nor take the table's other
    entries with it: it is left out, named (file, entry, field) once in the log."""
    p = table_path(tmp_path, "nvidia-h200", "k")
    p.parent.mkdir(parents=True)
    good = entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 128})
    p.write_text(json.dumps({"schema": 1, "entries": {"k1": broken, "k2": good}}))
    table = read_table(p)
    assert list(table["entries"]) == ["k2"]
    [skipped] = table["skipped"]
    assert re.search(match, skipped) and str(p) in skipped
    with caplog.at_level("WARNING", logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 128}  # the nearest valid
    assert re.search(match, caplog.text)


def test_a_table_with_a_bad_entry_is_never_written(tmp_path):
    p = table_path(tmp_path, "nvidia-h200", "k")
    write(p, entry())
    with pytest.raises(TableError, match=r"refusing to write entry .*config\.block_q: None"):
        update_table(p, "k", "nvidia-h200", lambda t: t["entries"].update(bad={**entry(), "config": {"block_q": None}}))
    assert list(read_table(p)["entries"]) == [bucket_key(BUCKET)]
    assert oct(p.stat().st_mode & 0o777) == "0o644"


def _writer(path, n, who):
    for i in range(n):
        update_table(path, "k", "nvidia-h200",
                     lambda t, i=i: t["entries"].update({f"{who}-{i}": entry(config={"i": i})}))


def test_two_processes_writing_one_table_lose_nothing(tmp_path):
    path = table_path(tmp_path, "nvidia-h200", "k")
    procs = [mp.get_context("spawn").Process(target=_writer, args=(path, 25, w)) for w in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert len(read_table(path)["entries"]) == 50


def test_refused_config_falls_through_to_the_next_nearest_entry():
    near = entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 1, "fast_math": False})
    next_ = entry(bucket={**BUCKET, "seq_len": 1024}, config={"block_q": 2, "fast_math": True})
    table = {"entries": {bucket_key(e["bucket"]): e for e in (near, next_)}}

    def refuses(item):
        return None if item["config"]["fast_math"] else "fast_math: this cap needs it"

    chosen, misses = select_entry(table, BUCKET, RUNNING, "h1", HARD, refuses)
    assert chosen["config"]["block_q"] == 2
    assert "seq_len=8192" in misses[0] and "fast_math: this cap needs it" in misses[0] and "nearest" in misses[1]
    chosen, misses = select_entry({"entries": {"x": near}}, BUCKET, RUNNING, "h1", HARD, refuses)
    assert chosen is None and "accepts" in misses[-1]


def test_refused_winner_gives_way_to_its_fastest_accepted_fallback_and_says_so():
    near = {**entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 1, "static_max": True}),
            "fallbacks": [{"config": {"block_q": 3, "static_max": False}, "median_us": 1.1, "spread": 0.01}]}
    next_ = entry(bucket={**BUCKET, "seq_len": 1024}, config={"block_q": 2, "static_max": False})
    table = {"entries": {bucket_key(e["bucket"]): e for e in (near, next_)}}

    def refuses(item):
        return "static_max: needs a bounding cap" if item["config"]["static_max"] else None

    chosen, misses = select_entry(table, BUCKET, RUNNING, "h1", HARD, refuses)
    assert chosen["config"] == {"block_q": 3, "static_max": False} and chosen["bucket"] == near["bucket"]
    assert "winner not used" in misses[0] and "static_max: needs" in misses[0]
    assert "with block_q=3 static_max=False (1.1 µs against the winner's 1.0 µs)" in misses[0]
    assert near["config"]["static_max"], "the table's own entry must stay as tuned"
    del near["fallbacks"]
    chosen, _ = select_entry(table, BUCKET, RUNNING, "h1", HARD, refuses)
    assert chosen["config"]["block_q"] == 2, "no fallback: the next entry, as before"


def test_equally_near_entries_prefer_the_same_categories():
    # A tanh bucket at T=8k: clamp at 8k and tanh at 4k are both one step away; the cap decides.
    want = {**BUCKET, "seq_len": 8192}
    clamp = entry(bucket={**BUCKET, "seq_len": 8192, "cap_method": "clamp"}, config={"block_q": 1})
    tanh = entry(bucket=BUCKET, config={"block_q": 2})
    for order in ((clamp, tanh), (tanh, clamp)):
        table = {"entries": {bucket_key(e["bucket"]): e for e in order}}
        assert select_entry(table, want, RUNNING, "h1", HARD)[0]["config"] == {"block_q": 2}
        kin_of_clamp = select_entry(table, want, RUNNING, "h1", HARD, kin=lambda b: b["cap_method"] != "clamp")
        assert kin_of_clamp[0]["config"] == {"block_q": 1}, "the kernel's kinship comes before shared categories"


def test_a_temp_file_left_by_a_killed_writer_is_cleaned_on_the_next_write(tmp_path):
    p = table_path(tmp_path, "nvidia-h200", "k")
    write(p, entry())
    stale = p.parent / f".{p.name}.abc123.tmp"
    stale.write_text("")  # a writer killed between creating its temp file and renaming it
    write(p, entry(bucket={**BUCKET, "seq_len": 8192}))
    assert not stale.exists() and len(read_table(p)["entries"]) == 2


def test_a_writer_that_dies_mid_write_leaves_the_old_table_readable(tmp_path, monkeypatch):
    """The table is written to a temp file and renamed: a crash in the middle of the JSON leaves the old
    file whole (a write straight to the final path would leave half a table)."""
    import kerneltune.tables.store as store

    p = table_path(tmp_path, "nvidia-h200", "k")
    write(p, entry())
    before = p.read_text()

    def dies_mid_write(obj, f, **kw):
        f.write('{"schema": 1, "entr')
        f.flush()
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(store.json, "dump", dies_mid_write)
    with pytest.raises(KeyboardInterrupt):
        write(p, entry(bucket={**BUCKET, "seq_len": 8192}))
    assert p.read_text() == before and len(read_table(p)["entries"]) == 1
    assert not list(p.parent.glob("*.tmp"))


def test_a_nearer_entry_tuned_elsewhere_is_logged_when_it_is_passed_over(tmp_path, on_h200, caplog):
    """No entry for the bucket itself; the nearest one was tuned on an H100, a farther one here: the
    farther one serves and the log names the nearer one and why it was skipped."""
    near = entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 1}, gpu="NVIDIA H100 80GB HBM3")
    far = entry(bucket={**BUCKET, "seq_len": 512}, config={"block_q": 2})
    write(table_path(tmp_path, "nvidia-h200", "k"), near, far)
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 2}
    assert "seq_len=8192" in caplog.text and "gpu: table 'NVIDIA H100 80GB HBM3'" in caplog.text
