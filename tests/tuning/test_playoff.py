"""The playoff: a bucket's leaders timed again in interleaved rounds, the winner decided on paired ratios."""

import json

import numpy as np
import pytest

from kerneltune.files.records import Record
from kerneltune.seams.measure import MeasureSettings
from kerneltune.tuning.journal import Journal
from kerneltune.tuning.playoff import batch_for, decide, leaders, median_interval
from kerneltune.tuning.pruning import NoPruning
from kerneltune.tuning.sweep import SearchOptions, SweepOptions, WorkerOptions, run_sweep

from ..paths import REPO


def rec(key, median, spread=0.0, status="ok", noise=0.0):
    return Record.from_json({"bucket": "b", "key": key, "status": status,
                             "timing": {"median_us": median, "spread": spread, "noise": noise}})


def test_leaders_are_within_the_noise_or_three_percent_and_at_most_five():
    records = [rec("a", 100), rec("b", 102.9), rec("c", 103.1), rec("e", 90, 0.0, "correctness")]
    assert [r["key"] for r in leaders(records)] == ["a", "b"]
    assert [r["key"] for r in leaders([rec("a", 100, spread=0.10), rec("b", 109), rec("c", 111)])] == ["a", "b"]
    assert len(leaders([rec(str(i), 100 + i * 0.1) for i in range(9)])) == 5
    assert leaders([rec("a", 100), rec("b", 200)]) == []  # one leader: nothing to decide


def test_a_candidate_stopped_on_a_batch_whose_noise_reached_the_best_joins_the_leaders():
    """The busy host's case: the true winner stopped on a first batch of 4,107 µs at 100% noise (best so far
    1,990 µs) is a leader; one stopped at 3,000 µs with 5% noise is not (its interval's low end, 2,850 µs, is
    beyond the best's 3%); the fastest settled median stays first, the incumbent a playoff must unseat."""
    best, wide, narrow = rec("best", 1990.0, spread=0.02), rec("wide", 4107.0, 1.0, "pruned", noise=1.0), rec(
        "narrow", 3000.0, 0.05, "pruned", noise=0.05)
    assert [r["key"] for r in leaders([narrow, wide, best])] == ["best", "wide"]
    assert leaders([best, narrow]) == []
    # An old journal's stopped record (no noise written) is known to no better than itself: it joins.
    old = Record.from_json({"bucket": "b", "key": "old", "status": "pruned",
                            "timing": {"median_us": 3000.0, "spread": 0.0}})
    assert [r["key"] for r in leaders([best, old])] == ["best", "old"]
    # Five settled leaders do not crowd out a stopped one that may be faster than all of them.
    settled = [rec(f"s{i}", 1990.0 + i) for i in range(6)]
    assert "wide" in [r["key"] for r in leaders([*settled, wide])]


def test_a_turn_lasts_about_twenty_milliseconds():
    assert batch_for(700.0) == 10 and batch_for(5_000.0) == 4 and batch_for(40_000.0) == 1


def test_the_median_interval_is_the_distribution_free_one():
    assert median_interval(list(range(1, 11))) == (2, 9)  # n=10: the 2nd and 9th order statistics (97.9%)
    assert median_interval(list(range(1, 21))) == (6, 15)
    assert median_interval([3.0, 1.0]) == (1.0, 3.0)  # too few for 95%: the whole range


def test_decide_sees_through_a_drift_that_swapped_the_sequential_medians():
    drift = np.linspace(1.0, 2.0, 10)  # the clock slows by half over the playoff
    noise = 1 + 0.005 * np.random.default_rng(0).standard_normal((2, 10))
    p = decide({"dear": 1.2 * drift * noise[0], "cheap": 1.0 * drift * noise[1]}, batch=4)
    assert p.winner == "cheap" and p.rounds == 10 and p.batch == 4
    lo, med, hi = p.ratios["dear"]
    assert lo <= med <= hi and lo > 1.15 and hi < 1.25 and p.margin == pytest.approx(med - 1)
    assert p.ties == []
    tie = decide({"a": drift, "b": drift * (1 + 0.01 * np.sin(np.arange(10)))}, 1)
    assert tie.ties == [k for k in ("a", "b") if k != tie.winner]  # within noise: a tie, kept as a runner-up


def test_decide_refuses_what_is_no_timing():
    with pytest.raises(ValueError, match="not all positive"):
        decide({"a": [1.0, 0.0], "b": [1.0, 1.0]}, 1)
    with pytest.raises(ValueError):
        decide({"a": [1.0]}, 1)


def test_a_sweep_on_a_drifting_clock_writes_the_playoffs_winner_and_its_margin(tmp_path):
    """Timed one after the other, the dearer config (cost 1.2, measured first) reads faster than the cheaper
    one (1.0, measured while the clock had slowed further); the playoff's interleaved rounds pick the cheaper,
    and the entry keeps the margin (about 20%) and the rounds."""
    opts = SweepOptions(kernel=str(REPO / "tests/tuning/drifting.py:KERNEL"), space_path=None, out=tmp_path,
                        search=SearchOptions(pruner=NoPruning(), warm_start=False),
                        workers=WorkerOptions(compile_workers=0, run_timeout=60),
                        settings=MeasureSettings(rel_noise=0.5, min_samples=3, batch=3, warmup=0))
    [result] = run_sweep(opts)
    medians = {r["tiles"]["cost"]: r["timing"]["median_us"] for r in Journal(opts.journal_path).records()}
    assert medians[1.0] > medians[1.2]  # the drift swapped them
    assert result.playoff is not None and result.playoff_s > 0
    entry = json.loads((tmp_path / "tables/cpu/two-costs.json").read_text())["entries"]["n=1"]
    assert entry["config"] == {"cost": 1.0}
    playoff = entry["playoff"]
    assert playoff["rounds"] == 10 and playoff["leaders"] == 2 and playoff["ties"] == []
    assert 0.1 < playoff["margin"] < 0.3 and playoff["ratios"]["cost=1.2"]["low"] > 1.0
    assert entry["runner_ups"] == []  # the dearer one's interval excludes parity


def test_no_playoff_leaves_the_sequential_winner(tmp_path):
    opts = SweepOptions(kernel=str(REPO / "tests/tuning/drifting.py:KERNEL"), space_path=None, out=tmp_path,
                        search=SearchOptions(pruner=NoPruning(), warm_start=False, playoff=False),
                        workers=WorkerOptions(compile_workers=0, run_timeout=60),
                        settings=MeasureSettings(rel_noise=0.5, min_samples=3, batch=3, warmup=0))
    [result] = run_sweep(opts)
    entry = json.loads((tmp_path / "tables/cpu/two-costs.json").read_text())["entries"]["n=1"]
    assert result.playoff is None and entry["config"] == {"cost": 1.2} and "playoff" not in entry


def test_a_winner_from_within_the_noise_does_not_unseat_the_sequential_one():
    """The incumbent (fastest sequential median) stays unless another leader beats it beyond doubt: a playoff
    that cannot tell them apart would otherwise flip the entry from one run to the next."""
    rng = np.random.default_rng(3)
    noisy = {"seq": 1.0 + 0.3 * rng.standard_normal(10) ** 2, "other": 1.0 + 0.3 * rng.standard_normal(10) ** 2}
    p = decide(noisy, 1)
    kept = p.kept_for("seq")
    assert kept.winner == "seq" and kept.ties == ["other"]
    lo, _, hi = kept.ratios["other"]
    assert lo <= 1 <= hi
    clear = decide({"seq": np.full(10, 1.2), "other": np.full(10, 1.0)}, 1)
    assert clear.beats("seq") and clear.kept_for("seq").winner == "other"  # beaten beyond doubt: unseated


def test_a_leader_is_undecided_while_its_interval_holds_parity_and_is_wider_than_twice_the_noise():
    from kerneltune.tuning.playoff import undecided

    wide = decide({"a": [1.0] * 10, "b": [0.6, 1.5] * 5}, 1)
    assert undecided(wide, 0.02)
    tie = decide({"a": [1.0] * 10, "b": [0.995, 1.005] * 5}, 1)  # a tie, known to within 1%: decided
    assert not undecided(tie, 0.02) and tie.ties
    clear = decide({"a": [1.0] * 10, "b": [1.2] * 10}, 1)
    assert not undecided(clear, 0.02) and not clear.ties
