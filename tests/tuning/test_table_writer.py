from kerneltune.tuning.table_writer import bucket_entry
from tests.tuning.fake_kernel import PLUGIN

STAMPS = {"gpu": "NVIDIA H200", "sm_count": 132, "driver": "1", "cuda": "13.0", "jax": "0.11.2", "jaxlib": "0.11.2"}


def record(mode, work, median_us, status="ok"):
    return {"status": status, "kernel_hash": PLUGIN.source_hash(), "bucket": "b", "problem": {"n": 8},
            "tiles": {"mode": mode, "work": work}, "key": f"{mode}{work}", "stamps": STAMPS,
            "timing": {"median_us": median_us, "spread": 0.001, "samples": 10}}


def test_entry_keeps_the_fastest_config_of_each_other_gated_setting_as_its_fallbacks():
    """The fake kernel gates ``mode``: a launch that refuses the winner's mode must find the fastest
    measured config of every other mode, and only measured, verified ones."""
    records = [record("good", 1, 10.0), record("good", 2, 30.0), record("slow", 2, 40.0), record("slow", 1, 20.0),
               record("garbage", 1, 5.0, status="wrong"), record("odd", 3, 50.0)]
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


def test_ties_on_the_median_break_by_the_config_text_so_the_table_is_reproducible():
    a, b = record("slow", 1, 10.0), record("good", 1, 10.0)
    assert bucket_entry([a, b], PLUGIN, 0.01)["config"] == bucket_entry([b, a], PLUGIN, 0.01)["config"]


def test_only_records_of_the_current_kernel_source_make_the_entry():
    stale = {**record("good", 1, 1.0), "kernel_hash": "old"}
    e = bucket_entry([stale, record("good", 2, 10.0)], PLUGIN, 0.01)
    assert e["config"]["work"] == 2 and e["stamps"]["kernel_hash"] == PLUGIN.source_hash()
