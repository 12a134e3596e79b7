import pytest

from kerneltune.files.records import Record, config_key
from kerneltune.tables.store import read_table, table_path
from kerneltune.tuning import table_writer
from tests.tuning.fake_kernel import PLUGIN

STAMPS = {"gpu": "NVIDIA H200", "sm_count": 132, "driver": "1", "cuda": "13.0", "jax": "0.11.2", "jaxlib": "0.11.2"}


def bucket_entry(records, *args, **kwargs):
    """The writer's entry of these records, written as their journal lines."""
    return table_writer.bucket_entry([Record.from_json(r) for r in records], *args, **kwargs)


def write_bucket_table(out, kernel, bucket, records, *args):
    return table_writer.write_bucket_table(out, kernel, bucket, [Record.from_json(r) for r in records], *args)


def record(mode, work, median_us, status="ok"):
    return {"status": status, "kernel_hash": PLUGIN.source_hash(), "bucket": "b", "problem": {"n": 8},
            "tiles": {"mode": mode, "work": work}, "key": f"{mode}{work}", "stamps": STAMPS,
            "timing": {"median_us": median_us, "spread": 0.001, "samples": 10}}


def test_entry_keeps_the_fastest_config_of_each_other_gated_setting_as_its_fallbacks():
    """The fake kernel gates ``mode``: a launch that refuses the winner's mode must find the fastest
    measured config of every other mode, and only measured, verified ones."""
    records = [record("good", 1, 10.0), record("good", 2, 30.0), record("slow", 2, 40.0), record("slow", 1, 20.0),
               record("garbage", 1, 5.0, status="correctness"), record("odd", 3, 50.0)]
    e = bucket_entry(records, PLUGIN, rel_noise=0.01)
    assert e["config"] == {"mode": "good", "work": 1}
    assert [(f["config"], f["median_us"]) for f in e["fallbacks"]] == [
        ({"mode": "slow", "work": 1}, 20.0), ({"mode": "odd", "work": 3}, 50.0)]


def test_entry_without_gated_alternatives_has_no_fallbacks():
    e = bucket_entry([record("good", 1, 10.0), record("good", 2, 30.0)], PLUGIN, rel_noise=0.01)
    assert e["fallbacks"] == []


def test_runner_ups_are_the_candidates_within_the_winners_noise():
    """Noise is the largest of the winner's spread, its median's noise and the sweep's threshold (1%):
    100.9 is within 1% of 100, 101.1 is not; failed and unverified candidates never are."""
    records = [record("good", 1, 100.0), record("good", 2, 100.9), record("slow", 1, 101.1),
               record("slow", 2, 100.5, status="correctness"), record("good", 3, 100.2)]
    e = bucket_entry(records, PLUGIN, rel_noise=0.01)
    assert [(r["config"]["work"], r["median_us"]) for r in e["runner_ups"]] == [(3, 100.2), (2, 100.9)]
    wide = bucket_entry(records, PLUGIN, rel_noise=0.02)
    assert len(wide["runner_ups"]) == 3


def test_every_entry_keeps_up_to_three_rivals_within_one_and_a_half_times_with_their_margins():
    """Without a playoff: the next best by separate medians, closest first, 150 µs the last within 1.5x of 100 µs,
    a stopped candidate and a wrong one never; the entry says the winner was decided on separate medians."""
    records = [record("good", 1, 100.0), record("good", 2, 150.0), record("slow", 1, 120.0),
               record("slow", 2, 150.1), record("good", 3, 90.0, status="correctness"),
               record("odd", 1, 110.0, status="pruned")]
    e = bucket_entry(records, PLUGIN, rel_noise=0.01)
    assert e["decided_by"] == "medians"
    assert [(r["config"], r["median_us"], r["by"]) for r in e["rivals"]] == [
        ({"mode": "slow", "work": 1}, 120.0, "medians"), ({"mode": "good", "work": 2}, 150.0, "medians")]
    assert [r["margin"] for r in e["rivals"]] == pytest.approx([0.2, 0.5])
    many = [record("good", 1, 100.0)] + [record("good", w, 100.0 + w) for w in range(2, 7)]
    assert [r["config"]["work"] for r in bucket_entry(many, PLUGIN, 0.01)["rivals"]] == [2, 3, 4]


def test_a_playoffs_rivals_carry_its_paired_interval_and_a_stopped_leader_may_win_it():
    """The playoff's leaders are the closest rivals, each with the paired ratio's median and 95% interval as its
    margin; a candidate stopped early that beat the incumbent beyond doubt wins, timed by the playoff's rounds."""
    from kerneltune.tuning.playoff import decide

    records = [record("good", 1, 100.0), record("good", 2, 101.0), record("good", 3, 110.0),
               {**record("slow", 1, 300.0, status="pruned"), "key": "slow1"}]
    p = decide({"good1": [100.0] * 10, "good2": [103.0] * 10, "slow1": [80.0] * 10}, 4)
    e = bucket_entry(records, PLUGIN, 0.01, p)
    assert (e["config"], e["median_us"], e["settled"], e["decided_by"]) == (
        {"mode": "slow", "work": 1}, 80.0, False, "playoff")
    assert [(r["config"]["work"], r["by"]) for r in e["rivals"]] == [(1, "playoff"), (2, "playoff"), (3, "medians")]
    first = e["rivals"][0]
    assert (first["margin"], first["margin_low"], first["margin_high"]) == pytest.approx((0.25, 0.25, 0.25))
    assert e["rivals"][2]["margin"] == pytest.approx(110.0 / 80.0 - 1)
    assert e["playoff"]["leaders"] == 3


def test_a_stopped_leader_that_loses_the_playoff_is_named_in_its_ratios():
    """A stopped candidate among the leaders, slower than the winner: the entry names it like any leader (a sweep
    on a busy host once ended in a missing-field error here)."""
    from kerneltune.tuning.playoff import decide

    records = [record("good", 1, 100.0), record("good", 2, 101.0),
               {**record("slow", 1, 300.0, status="pruned"), "key": "slow1"}]
    p = decide({"good1": [100.0] * 10, "good2": [103.0] * 10, "slow1": [120.0] * 10}, 4)
    e = bucket_entry(records, PLUGIN, 0.01, p)
    assert e["config"] == {"mode": "good", "work": 1} and e["decided_by"] == "playoff"
    assert set(e["playoff"]["ratios"]) == {"mode=good work=2", "mode=slow work=1"}
    assert [(r["config"]["mode"], r["config"]["work"]) for r in e["rivals"]] == [("good", 2), ("slow", 1)]


def test_ties_on_the_median_break_by_the_config_text_so_the_table_is_reproducible():
    a, b = record("slow", 1, 10.0), record("good", 1, 10.0)
    assert bucket_entry([a, b], PLUGIN, 0.01)["config"] == bucket_entry([b, a], PLUGIN, 0.01)["config"]


def test_only_records_of_the_current_kernel_source_make_the_entry():
    stale = {**record("good", 1, 1.0), "kernel_hash": "old"}
    e = bucket_entry([stale, record("good", 2, 10.0)], PLUGIN, 0.01)
    assert e["config"]["work"] == 2 and e["stamps"]["kernel_hash"] == PLUGIN.source_hash()


def test_runner_ups_and_fallbacks_carry_their_spread_and_the_noise_rule_takes_the_largest():
    win = {**record("good", 1, 100.0), "timing": {"median_us": 100.0, "spread": 0.001, "samples": 10, "noise": 0.05}}
    records = [win, record("good", 2, 105.0), record("good", 3, 105.1), record("slow", 1, 120.0)]
    e = bucket_entry(records, PLUGIN, rel_noise=0.01)
    assert e["runner_ups"] == [{"config": {"mode": "good", "work": 2}, "median_us": 105.0, "spread": 0.001}]
    assert e["fallbacks"] == [{"config": {"mode": "slow", "work": 1}, "median_us": 120.0, "spread": 0.001}]
    wide_spread = {**win, "timing": {**win["timing"], "noise": 0.0, "spread": 0.06}}
    assert len(bucket_entry([wide_spread, *records[1:]], PLUGIN, rel_noise=0.01)["runner_ups"]) == 2


class _OnCudaJax(type(PLUGIN)):
    backend = "cuda-jax"


def test_an_entry_names_the_winners_matched_stamps_and_its_date():
    stamps = {**STAMPS, "matched": ["gpu", "cuda", "kernel_hash"], "bf16_tflops_ceiling": 800.0}
    win = {**record("good", 1, 10.0), "stamps": stamps, "time": "2026-12-01T00:00:00Z", "tflops": 200.0}
    e = bucket_entry([win], PLUGIN, 0.01)
    assert e["stamps"] == {"gpu": "NVIDIA H200", "cuda": "13.0", "kernel_hash": PLUGIN.source_hash(),
                           "date": "2026-12-01T00:00:00Z"}
    assert e["pct_ceiling"] == 25.0 and e["tflops"] == 200.0
    # No matched list (a journal from before stamps carried one): the kernel's backend's, here CUDA/JAX's.
    older = bucket_entry([record("good", 1, 10.0)], _OnCudaJax(), 0.01)
    assert set(older["stamps"]) == {*STAMPS, "kernel_hash", "date"}


def test_a_replay_of_an_older_kernel_writes_the_newest_recorded_source():
    def replayed(work, h, time):
        return {**record("good", work, 10.0 + work), "kernel_hash": h, "time": time,
                "stamps": {**STAMPS, "replayed_from": "old.jsonl"}}

    e = bucket_entry([replayed(1, "h-old", "2026-01-01"), replayed(2, "h-new", "2026-02-01")], PLUGIN, 0.01)
    assert e["stamps"]["kernel_hash"] == "h-new" and e["stamps"]["replayed_from"] == "old.jsonl"
    assert e["config"]["work"] == 2  # only the records of that source compete
    live_but_stale = {**record("good", 1, 10.0), "kernel_hash": "h-old"}  # measured live by an older source
    assert bucket_entry([live_but_stale], PLUGIN, 0.01) is None


@pytest.mark.parametrize(("tflops", "ceiling", "pct"), [(200.0, 800.0, 25.0), (0.0, 800.0, None),
                                                         (200.0, None, None), (None, 800.0, None)])
def test_percent_of_ceiling(tflops, ceiling, pct):
    stamps = {} if ceiling is None else {"bf16_tflops_ceiling": ceiling}
    assert Record("b", "k", "ok", tflops=tflops, stamps=stamps).pct_of_ceiling() == pct
    assert Record("b", "k", "ok", tflops=tflops).pct_of_ceiling() is None


def test_write_bucket_table_writes_the_buckets_entry_where_the_runtime_reads_it(tmp_path):
    mine = {**record("good", 1, 10.0), "kernel": "fake", "stamps": {**STAMPS, "device_kind": "gpu-x"},
            "key": config_key({"mode": "good", "work": 1})}
    other_bucket = {**record("good", 2, 1.0), "kernel": "fake", "bucket": "c"}
    other_kernel = {**record("good", 3, 1.0), "kernel": "wide"}
    e = write_bucket_table(tmp_path, PLUGIN, "b", [mine, other_bucket, other_kernel], 0.01)
    path = table_path(tmp_path / "tables", "gpu-x", "fake")
    assert e.table == path and e.entry.config == {"mode": "good", "work": 1}
    [written] = read_table(path)["entries"].values()
    assert written["config"] == {"mode": "good", "work": 1} and written["bucket_name"] == "b"
    no_kind = {**mine, "stamps": STAMPS}  # older journals: the kind from the GPU's name
    assert write_bucket_table(tmp_path, PLUGIN, "b", [no_kind], 0.01).table == table_path(
        tmp_path / "tables", "nvidia-h200", "fake")
    assert write_bucket_table(tmp_path, PLUGIN, "b", [{**mine, "status": "runtime"}], 0.01) is None


def test_an_entry_holds_every_field_the_runtime_and_the_report_read():
    win = {**record("good", 1, 10.0), "inputs": {"history": [1, 2]}, "time": "2026-12-01T00:00:00Z"}
    e = bucket_entry([win, record("good", 2, 30.0)], PLUGIN, 0.01)
    assert {k: v for k, v in e.items() if k not in ("bucket", "stamps")} == {
        "bucket_name": "b", "problem": {"n": 8}, "inputs": {"history": [1, 2]}, "config": {"mode": "good", "work": 1},
        "median_us": 10.0, "spread": 0.001, "samples": 10, "tflops": None, "pct_ceiling": None, "runner_ups": [],
        "rivals": [], "decided_by": "medians", "fallbacks": [], "candidates_ok": 2, "settled": True}
    assert e["bucket"] == PLUGIN.bucket(PLUGIN.problem({"n": 8}))
    undated = bucket_entry([record("good", 1, 10.0)], PLUGIN, 0.01)
    assert undated["inputs"] == {} and undated["stamps"]["date"].startswith("20")


def test_replayed_records_without_a_time_or_stamps_do_not_break_the_source_choice():
    stamped = {**record("good", 1, 10.0), "kernel_hash": "h-old", "stamps": {**STAMPS, "replayed_from": "j"}}
    untimed = {k: v for k, v in stamped.items() if k != "time"} | {"kernel_hash": "h-older"}
    timed = {**stamped, "time": "2026-01-01"}
    assert bucket_entry([untimed, timed], PLUGIN, 0.01)["stamps"]["kernel_hash"] == "h-old"
    unstamped = {k: v for k, v in record("good", 2, 5.0).items() if k != "stamps"} | {"kernel_hash": "x"}
    assert bucket_entry([unstamped, timed], PLUGIN, 0.01)["stamps"]["kernel_hash"] == "h-old"


def test_the_written_table_names_its_kernel_and_device_kind(tmp_path):
    mine = {**record("good", 1, 10.0), "kernel": "fake", "stamps": {**STAMPS, "device_kind": "gpu-x"},
            "key": config_key({"mode": "good", "work": 1})}
    write_bucket_table(tmp_path, PLUGIN, "b", [mine], 0.01)
    table = read_table(table_path(tmp_path / "tables", "gpu-x", "fake"))
    assert (table["kernel"], table["device_kind"]) == ("fake", "gpu-x")


def test_a_record_an_entry_cannot_keep_is_passed_over_not_allowed_to_stop_the_table():
    """A record without a spread, samples or a device (or a NaN spread, which the journal refuses) loses; the
    bucket's other records still make its entry."""
    from kerneltune.files.records import record_defect

    good = record("good", 1, 20.0)
    no_spread = record("good", 2, 10.0)
    no_spread["timing"] = {k: v for k, v in no_spread["timing"].items() if k != "spread"}
    no_device = {**record("good", 3, 5.0), "stamps": {}}
    entry = bucket_entry([good, no_spread, no_device], PLUGIN, 0.01)
    assert entry["config"] == good["tiles"]
    assert record_defect({**good, "timing": {**good["timing"], "spread": float("nan")}}).startswith("timing.spread")
    assert record_defect({**good, "timing": {**good["timing"], "samples": 0}}).startswith("timing.samples")


def test_an_entry_timed_where_its_times_mean_nothing_says_so_and_one_timed_natively_does_not():
    """A sweep in an interpreter measures as any other, but its entries carry why their times say nothing of speed,
    for verify and the runtime's lookup to repeat."""
    from tests.tuning.fake_kernel import INTERPRETED

    cpu = {**STAMPS, "device_kind": "cpu"}
    records = [{**record("good", 1, 10.0), "stamps": cpu}, {**record("good", 2, 30.0), "stamps": cpu}]
    marked = bucket_entry(records, INTERPRETED, rel_noise=0.01)
    assert marked.void_timings == "fake runs in its interpreter on this CPU"
    assert marked.to_json()["void_timings"] == marked.void_timings
    assert bucket_entry(records, PLUGIN, rel_noise=0.01).void_timings is None
    on_gpu = [{**r, "stamps": {**STAMPS, "device_kind": "nvidia-h200"}} for r in records]
    assert bucket_entry(on_gpu, INTERPRETED, rel_noise=0.01).void_timings is None
