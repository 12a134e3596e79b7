"""The measurement rules, directly: median and spread, the noise stop, min_samples, the time cap, pruning."""

import itertools

import numpy as np
import pytest

from kerneltune.measure import MeasureSettings, median_noise, sample_until_quiet, summarize


def test_summary_is_the_median_and_the_interquartile_spread():
    t = summarize([1.0, 1.0, 1.0, 2.0, 9.0], converged=True, clocks={})  # ms
    assert t.median_us == 1000.0 and t.min_us == 1000.0 and t.samples == 5
    assert t.spread == pytest.approx((2.0 - 1.0) / 1.0)  # (p75 - p25) / median


def test_noise_is_the_relative_ci_half_width_of_the_median():
    assert median_noise([5.0] * 20) == 0.0
    assert median_noise([1.0, 2.0]) == float("inf")  # too few samples to say
    wide, narrow = median_noise(list(np.linspace(90, 110, 50))), median_noise(list(np.linspace(99, 101, 50)))
    assert 0 < narrow < wide < 0.1


def batches(values):
    it = iter(values)
    calls = []

    def take(n):
        calls.append(n)
        return [next(it) for _ in range(n)]

    return take, calls


def test_a_quiet_kernel_stops_at_min_samples():
    take, calls = batches(itertools.repeat(1.0))
    t = sample_until_quiet(take, MeasureSettings(min_samples=6, batch=2, warmup=3, max_seconds=10))
    assert calls == [3, 2, 2, 2] and t.samples == 6 and t.converged  # warm-up, then three batches


def test_a_noisy_kernel_samples_until_the_time_cap_and_says_it_did_not_converge():
    rng = np.random.default_rng(0)
    take, calls = batches(rng.uniform(1.0, 100.0, 100_000))
    t = sample_until_quiet(take, MeasureSettings(rel_noise=0.001, min_samples=3, batch=5, max_seconds=0.05))
    assert not t.converged and t.samples == 5 * (len(calls) - 1) and len(calls) > 2


def test_noise_is_judged_on_all_samples_not_one_batch():
    """First batch quiet at 1 ms, then 10 ms: a rule that stopped after one quiet batch would report 1 ms."""
    values = [1.0] * 3 + [1.0] * 4 + [10.0] * 1000
    take, _ = batches(values)
    t = sample_until_quiet(take, MeasureSettings(min_samples=12, batch=4, warmup=3, max_seconds=10))
    assert t.samples >= 12 and t.median_us == 10_000.0


def test_a_clearly_slower_candidate_is_pruned_after_one_batch():
    take, calls = batches(itertools.repeat(5.0))
    t = sample_until_quiet(take, MeasureSettings(min_samples=10, batch=3, warmup=1), prune_above_us=2000.0)
    assert calls == [1, 3] and t.samples == 3 and not t.converged


@pytest.mark.parametrize("bad", [dict(rel_noise=0.0), dict(rel_noise=1.0), dict(max_seconds=0), dict(min_samples=2),
                                 dict(batch=0)])
def test_settings_are_validated(bad):
    with pytest.raises(ValueError):
        MeasureSettings(**bad)
