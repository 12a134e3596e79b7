"""The lookup's rules, directly: distances, ranking, fallbacks, the overlay of table folders, the cache,
and the exact words of each miss (a user reads them to learn why a launch did not use a table)."""

import json
import logging
import math
import os

import pytest

from kerneltune.files import logs
from kerneltune.tables import lookup
from kerneltune.tables.lookup import bucket_distance, read_overlaid, select_entry, tuned_config
from kerneltune.tables.store import table_path

from .test_tables import BUCKET, HARD, RUNNING, entry, write

B = "head_dim=128,dtype=bfloat16,cap_method=tanh,group=1,seq_len=4096,batch_heads=64"


@pytest.fixture(autouse=True)
def fresh_log():
    logs._said.clear()


def table_of(*entries):
    return {"entries": {f"e{i}": e for i, e in enumerate(entries)}}


@pytest.mark.parametrize(("other", "distance"), [
    ({}, 0.0),
    ({"seq_len": 1024}, 2.0),  # |log2(4096 / 1024)|
    ({"seq_len": 16384, "batch_heads": 16}, 4.0),  # 2 + 2: every numeric field adds
    ({"cap_method": "clamp"}, 1.0),
    ({"cap_method": "clamp", "group": 8, "seq_len": 2048}, 1.0 + 3.0 + 1.0),
    ({"group": 4}, 2.0),  # from 1: the smaller side may be 1
    ({"seq_len": 0}, 1.0),  # a non-positive size cannot be compared by ratio: one step
    ({"seq_len": "4096"}, 1.0),  # a number against text: one step, never a crash
    ({"head_dim": 64}, math.inf),
])
def test_bucket_distance(other, distance):
    assert bucket_distance(BUCKET, {**BUCKET, **other}, HARD) == distance
    assert bucket_distance({**BUCKET, **other}, BUCKET, HARD) == distance


def test_every_differing_category_adds_one_step_wherever_it_stands():
    assert bucket_distance({"n": 4, "c": "a", "d": "x"}, {"n": 16, "c": "b", "d": "y"}, ()) == 4.0


def test_buckets_with_other_fields_are_infinitely_far():
    assert bucket_distance(BUCKET, {**BUCKET, "extra": 1}, HARD) == math.inf


def test_categorical_mismatches_count_each_differing_category():
    other = {**BUCKET, "cap_method": "clamp", "dtype": "float16", "seq_len": 1}
    assert lookup._categorical_mismatches(BUCKET, other) == 2  # numbers are the distance's business


def test_an_exact_bucket_is_used_without_a_word():
    chosen, misses = select_entry(table_of(entry(config={"block_q": 7})), BUCKET, RUNNING, "h1", HARD)
    assert chosen["config"] == {"block_q": 7} and misses == []


def test_a_foreign_entry_listed_first_does_not_hide_a_valid_one():
    foreign = entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 1}, gpu="NVIDIA H100", cuda="12.8")
    chosen, misses = select_entry(table_of(foreign, entry(config={"block_q": 2})), BUCKET, RUNNING, "h1", HARD)
    assert chosen["config"] == {"block_q": 2}
    [miss] = misses
    assert miss.startswith(f"entry {B.replace('4096', '8192')} not used for {B}: gpu: table ")
    assert "; cuda: table '12.8'" in miss


def test_an_entry_without_stamps_is_refused_not_a_crash():
    bare = {k: v for k, v in entry().items() if k != "stamps"}
    chosen, [miss] = select_entry(table_of(bare), BUCKET, RUNNING, "h1", HARD)
    assert chosen is None and miss.startswith(f"entry {B} not used for {B}: ")


def test_an_entrys_bucket_is_named_in_the_problems_field_order():
    sorted_bucket = dict(sorted({**BUCKET, "seq_len": 8192}.items()))  # tables store their fields sorted
    chosen, [miss] = select_entry(table_of(entry(bucket=sorted_bucket)), BUCKET, RUNNING, "h1", HARD)
    assert chosen["bucket"] == sorted_bucket
    assert miss == f"bucket {B} not tuned; using nearest {B.replace('4096', '8192')}"


def test_a_fallback_carries_its_own_time_and_spread():
    winner = {**entry(config={"block_q": 1, "static_max": True}), "median_us": 5.0, "spread": 0.5,
              "fallbacks": [{"config": {"block_q": 1, "static_max": False}, "median_us": 6.0, "spread": 0.02}]}
    chosen, [miss] = select_entry(table_of(winner), BUCKET, RUNNING, "h1", HARD,
                                  refuses=lambda item: "no static max" if item["config"]["static_max"] else None)
    assert (chosen["median_us"], chosen["spread"]) == (6.0, 0.02)
    assert miss == (f"entry {B}'s winner not used for {B}: no static max; using its fastest measured config with "
                    "static_max=False (6.0 µs against the winner's 5.0 µs)")
    del winner["median_us"]
    _, [miss] = select_entry(table_of(winner), BUCKET, RUNNING, "h1", HARD,
                             refuses=lambda item: "no static max" if item["config"]["static_max"] else None)
    assert miss.endswith("with static_max=False (6.0 µs)")


def test_no_entry_sharing_the_hard_fields_says_which_fields():
    d64 = entry(bucket={**BUCKET, "head_dim": 64})
    chosen, misses = select_entry(table_of(d64), BUCKET, RUNNING, "h1", HARD)
    assert chosen is None and misses == [f"no valid entry shares head_dim, dtype with {B}"]
    chosen, misses = select_entry(table_of(entry()), BUCKET, RUNNING, "h1", HARD, refuses=lambda c: "never")
    assert chosen is None
    assert misses == [f"entry {B} not used for {B}: never",
                      f"no valid entry shares head_dim, dtype with {B} and has a config this problem accepts"]


def test_the_user_table_overlays_the_shipped_one_by_bucket(tmp_path):
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    write(table_path(shipped, "nvidia-h200", "k"), entry(config={"block_q": 1}),
          entry(bucket={**BUCKET, "seq_len": 8192}, config={"block_q": 2}))
    write(table_path(user, "nvidia-h200", "k"), entry(config={"block_q": 3}))
    table, where = read_overlaid("k", "nvidia-h200", (user, shipped))
    assert sorted(e["config"]["block_q"] for e in table["entries"].values()) == [2, 3]
    assert where == f"{table_path(user, 'nvidia-h200', 'k')} over {table_path(shipped, 'nvidia-h200', 'k')}"


@pytest.mark.parametrize("shipped_state", ["missing", "corrupt"])
def test_a_user_table_serves_when_the_shipped_one_is_missing_or_corrupt(tmp_path, shipped_state):
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    write(table_path(user, "nvidia-h200", "k"), entry(config={"block_q": 3}))
    if shipped_state == "corrupt":
        path = table_path(shipped, "nvidia-h200", "k")
        path.parent.mkdir(parents=True)
        path.write_text("{")
    table, where = read_overlaid("k", "nvidia-h200", (user, shipped))
    assert [e["config"] for e in table["entries"].values()] == [{"block_q": 3}]
    assert where == str(table_path(user, "nvidia-h200", "k"))


def test_no_table_anywhere_is_none_and_names_every_place(tmp_path, caplog):
    roots = (tmp_path / "a", tmp_path / "b")
    assert read_overlaid("k", "nvidia-h200", roots) == (
        None, f"{table_path(roots[0], 'nvidia-h200', 'k')} or {table_path(roots[1], 'nvidia-h200', 'k')}")
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, roots) is None
    assert caplog.messages == [f"k: no tuned table at {table_path(roots[0], 'nvidia-h200', 'k')} or "
                               f"{table_path(roots[1], 'nvidia-h200', 'k')}; using the heuristic"]


def test_a_rewritten_table_is_read_again(tmp_path):
    path = table_path(tmp_path, "nvidia-h200", "k")
    write(path, entry(config={"block_q": 1}))
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 1}
    data = json.loads(path.read_text())
    next(iter(data["entries"].values()))["config"] = {"block_q": 2}
    path.write_text(json.dumps(data))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 2}


def test_tuned_config_applies_the_kernels_refusal_and_kinship(tmp_path, caplog):
    clamp = entry(bucket={**BUCKET, "seq_len": 8192, "cap_method": "clamp"}, config={"block_q": 1})
    tanh = entry(bucket=BUCKET, config={"block_q": 2})
    write(table_path(tmp_path, "nvidia-h200", "k"), clamp, tanh)
    want = {**BUCKET, "seq_len": 8192}
    assert tuned_config("k", want, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 2}
    assert tuned_config("k", want, "h1", HARD, RUNNING, (tmp_path,),
                        kin=lambda b: b["cap_method"] != "clamp") == {"block_q": 1}
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", want, "h1", HARD, RUNNING, (tmp_path,), refuses=lambda c: "refused") is None
    assert caplog.messages[-1] == f"k: no valid tuned entry for {B.replace('4096', '8192')}; using the heuristic"


def test_a_fallback_is_judged_and_returned_with_its_own_measured_accuracy():
    """The refusal sees what was measured of each candidate; the chosen fallback must not carry the
    refused winner's figures (a later check of the budget would read the wrong ones)."""
    winner = {**entry(config={"block_q": 1}), "accuracy": {"err": 9.0},
              "fallbacks": [{"config": {"block_q": 2}, "median_us": 6.0, "spread": 0.02, "accuracy": {"err": 3.0}},
                            {"config": {"block_q": 3}, "median_us": 7.0, "spread": 0.02, "accuracy": {"err": 1.0}}]}
    seen = []

    def refuses(item):
        seen.append(item["accuracy"]["err"])
        return "too wrong" if item["accuracy"]["err"] > 2.0 else None

    chosen, _ = select_entry(table_of(winner), BUCKET, RUNNING, "h1", HARD, refuses=refuses)
    assert seen == [9.0, 3.0, 1.0]
    assert chosen["config"] == {"block_q": 3} and chosen["accuracy"] == {"err": 1.0}
    del winner["fallbacks"][1]["accuracy"]
    chosen, _ = select_entry(table_of({**winner, "fallbacks": [winner["fallbacks"][1]]}), BUCKET, RUNNING, "h1",
                             HARD, refuses=lambda item: "too wrong" if item.get("accuracy") else None)
    assert chosen["config"] == {"block_q": 3} and "accuracy" not in chosen


def test_an_entry_timed_in_an_interpreter_serves_and_says_so_once(tmp_path, caplog):
    write(table_path(tmp_path, "nvidia-h200", "k"), {**entry(config={"block_q": 1}), "void_timings": "k ran in X"})
    with caplog.at_level(logging.INFO, logger="kerneltune.tables"):
        for _ in range(2):
            assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 1}
    where = table_path(tmp_path, "nvidia-h200", "k")
    assert [(r.levelname, r.message) for r in caplog.records] == [
        ("WARNING", f"k: its tuned entries ({where}) were timed in an interpreter: k ran in X; they serve, chosen on "
                    f"those times")]


def test_an_entry_carried_by_rekey_is_used_and_says_so_once_at_info_level(tmp_path, caplog):
    carried = entry(config={"block_q": 1})
    carried["stamps"] = {**carried["stamps"], "rekeyed_from": ["h0"]}
    write(table_path(tmp_path, "nvidia-h200", "k"), carried)
    with caplog.at_level(logging.INFO, logger="kerneltune.tables"):
        for _ in range(2):
            assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 1}
    assert [(r.levelname, r.message) for r in caplog.records] == [
        ("INFO", f"k: {B}: entry measured under kernel h0, carried to h1 by kerneltune rekey (its programs unchanged)")]
