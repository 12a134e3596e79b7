"""Where a candidate's time goes: every journal record carries its phases, and the summary's figures are
the steady state's (each bucket's first candidate left out) over the wall."""

import json

import pytest

from kerneltune.tuning.journal import Journal
from kerneltune.tuning.phases import BucketPhases, Phases, summarize
from kerneltune.tuning.sweep import run_sweep

from .test_sweep import options


def _rec(bucket, wall, check=0.1, timing=0.2, compile_s=4.0, since=None, **more):
    phases = {"wall_s": wall, "check_s": check, "timing_s": timing, "compile_s": compile_s, **more}
    if since is not None:
        phases["since_start_s"] = since
    return BucketPhases(bucket, phases)


def test_the_summary_is_the_steady_state_of_each_bucket():
    """The first candidate of a bucket (worker start, references) is out of the medians and the rates."""
    records = [_rec("a", 30.0, since=31.0), _rec("a", 1.0), _rec("a", 1.0), _rec("b", 20.0), _rec("b", 1.0),
               BucketPhases("a", {})]
    s = summarize(records, compile_workers=8)
    assert (s.candidates, s.steady) == (5, 3)
    assert s.per_minute == pytest.approx(60.0)  # 3 steady candidates in 3 s of wall
    assert s.busy_share == pytest.approx(0.3)  # check 0.1 + timing 0.2 of each 1 s
    assert s.first_s == 31.0
    assert s.bound_s == pytest.approx(0.5)  # max(4.0 / 8, 0.1 + 0.2)
    assert s.wall_over_bound == pytest.approx(2.0)  # 1 s a candidate
    lines = s.lines()
    assert "60.0 a minute" in lines[0] and "31.0 s" in lines[0] and "busy 30%" in lines[1] and "2.00 x" in lines[1]


def test_the_totals_count_every_candidate_so_a_bucket_s_first_is_not_hidden():
    """A verify spends most of its wall on each bucket's first config (its references): the medians leave those
    out, the totals keep them."""
    records = [_rec("a", 30.0, reference_s=25.0), _rec("a", 1.0), _rec("b", 20.0, reference_s=15.0), _rec("b", 1.0)]
    s = summarize(records, compile_workers=8)
    assert s.totals["wall_s"] == pytest.approx(52.0) and s.totals["reference_s"] == pytest.approx(40.0)
    assert s.medians.get("reference_s", 0.0) == 0.0
    assert "wall 52.0" in s.lines()[3] and "reference 40.0" in s.lines()[3]


def test_the_wall_per_candidate_is_the_rate_not_the_median():
    """Compile workers finish candidates in bursts: a fast one, then a wait for the next compile. The median
    wall (0.1 s) would claim 5x the rate measured; the summary's wall per candidate is the mean."""
    records = [_rec("a", 9.0), *[_rec("a", w) for w in (0.1, 0.1, 0.1, 1.7)]]
    s = summarize(records, compile_workers=8)
    assert s.mean_wall_s == pytest.approx(0.5) and s.medians["wall_s"] == pytest.approx(0.1)
    assert s.wall_over_bound == pytest.approx(1.0)  # max(4.0 / 8, 0.3) = 0.5


def test_no_phases_no_summary():
    assert summarize([BucketPhases("a", {})], 4) is None


def test_a_check_s_references_are_booked_apart():
    p = Phases(check_s=2.0)
    p.split("check_s", "reference_s", 1.5)
    p.split("check_s", "reference_s", 9.0)  # never more than the check took
    assert p.to_dict() == {"check_s": 0.0, "reference_s": 2.0}


@pytest.mark.parametrize("compile_workers", [0, 2])
def test_every_record_of_a_live_sweep_carries_its_phases(tmp_path, compile_workers):
    opts = options(tmp_path, ["good", "slow"], compile_workers=compile_workers)
    [result] = run_sweep(opts)
    records = [r for r in Journal(opts.journal_path).records() if r["status"] != "constraint"]
    assert len(records) == result.measured == 4
    for r in records:
        assert {"compile_s", "compile_wait_s", "inputs_s", "check_s", "timing_s", "ask_s", "tell_s", "journal_s",
                "wall_s", "since_start_s"} <= set(r["phases"]), json.dumps(r["phases"])
        assert all(v >= 0 for v in r["phases"].values())
    # Walls add up to the sweep's time from its first proposal: nothing is booked twice or lost.
    since = [r["phases"]["since_start_s"] for r in records]
    assert since == sorted(since)
    assert sum(r["phases"]["wall_s"] for r in records) <= since[-1] + 1e-6
    assert summarize(result.phases, compile_workers).candidates == 4


def test_a_bound_too_small_to_show_is_no_divisor():
    """A sweep whose candidates hung or crashed before their check (or a kernel of microseconds) said "wall per
    candidate 0.25 s = inf x max(...) = 0.00 s"."""
    s = summarize([_rec("a", 1.0, check=0.0, timing=0.0, compile_s=0.0) for _ in range(3)], compile_workers=1)
    assert s.lines()[1].endswith("wall per candidate 1.00 s against max(compile / 1 workers, check + timing) under "
                                 "0.01 s")
    assert "inf" not in " ".join(s.lines())
