"""Schedule exploration: the fixed order, then PCT and random interleavings, each (kind, seed) run again the same."""

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.schedule import STEPS, Schedule, exploration

from .helpers import launch
from .kernels import narrow_window

BLOCKS = 8
DEFAULT = 8  # the interleavings a test of a small kernel explores


def _count(window: bool, schedule: Schedule) -> tuple[int, int]:
    counter = np.zeros(1, np.int32)
    run, _ = launch(narrow_window(window), {"counter": counter}, blocks=BLOCKS, schedule=schedule)
    return int(counter[0]), run.resumes


def test_a_race_with_a_narrow_window_hides_from_the_fixed_order_and_shows_within_the_default_interleavings():
    got, resumes = _count(True, Schedule())
    assert got == BLOCKS  # the round robin keeps every read-modify-write apart
    lost = [s.label for s in exploration(DEFAULT, steps=resumes)[1:] if _count(True, s)[0] < BLOCKS]
    assert lost, "no interleaving lost an update"
    assert any(label.startswith("pct") for label in lost), lost


def test_without_the_window_no_interleaving_loses_an_update():
    _, resumes = _count(False, Schedule())
    assert all(_count(False, s)[0] == BLOCKS for s in exploration(DEFAULT, steps=resumes))


@pytest.mark.parametrize("label", ["random seed 3", "pct seed 2 d=3", "pct seed 2 d=2 n=40"])
def test_a_schedule_is_replayed_from_its_label(label):
    schedule = Schedule.parse(label)
    assert schedule.label == label
    assert _count(True, schedule) == _count(True, Schedule.parse(label))


def test_exploration_starts_with_the_fixed_order_and_alternates_pct_and_random():
    assert [s.label for s in exploration(4)] == ["fixed", "pct seed 1 d=3", "random seed 2", "pct seed 3 d=3"]
    assert Schedule.parse("pct seed 2 d=3 n=40").steps == 40 and Schedule.parse("pct seed 2").steps == STEPS
    with pytest.raises(ValueError, match=r"'fixed', 'random seed N' or 'pct seed N d=D \[n=STEPS\]'"):
        Schedule.parse("sometimes")


def test_verify_runs_each_arch_in_its_own_schedules():
    from kerneltune.kernels.drafter_wide.interpreted import INTERLEAVINGS, check_runs

    runs = dict(check_runs(3))
    assert set(runs) == {"gfx942", "gfx950"}
    assert [s.kind for s in runs["gfx942"]] == ["fixed", "pct", "random"]
    assert {s.seed for s in runs["gfx942"][1:]}.isdisjoint({s.seed for s in runs["gfx950"][1:]})
    assert all(len(s) == INTERLEAVINGS for s in dict(check_runs()).values())
    with pytest.raises(ValueError, match="at least 1"):
        check_runs(0)
