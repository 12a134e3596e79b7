"""The shapes users run (``shape_matrix.MATRIX``) through the CPU interpreter, each judged as ``verify --interpret``
judges (``error_model.judge_step``), and the branch and loop-trip coverage they reach together.

A step of the matrix takes one to five minutes on a 2-core machine (about 15 in all), more than ``make test``
can give: the whole matrix runs with ``KERNELTUNE_SHAPE_MATRIX=1`` (``make test-matrix``; ``.ci/interpret_coverage.py``
runs the same and prints the coverage for the record). ``make test`` runs one shape of it a run, its first layer
(``test_a_sampled_shape_of_the_matrix``), drawn from a seed it prints and names on failure
(``KERNELTUNE_SHAPE_SEED=N`` runs that one again). ``verify --interpret`` runs the default shape and
``interpreted.CHECK_EXTRA`` on every call."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.shape_matrix import MATRIX

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drafter-interpret")]
WHOLE = pytest.mark.skipif(not os.environ.get("KERNELTUNE_SHAPE_MATRIX"),
                           reason="the shape matrix takes about 15 minutes: make test-matrix "
                                  "(KERNELTUNE_SHAPE_MATRIX=1) runs it; make test runs one shape of it "
                                  "(test_a_sampled_shape_of_the_matrix)")
SEED_ENV = "KERNELTUNE_SHAPE_SEED"


def _judged_step(shape, coverage=None) -> None:
    from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation
    from kerneltune.kernels.drafter_wide.error_model import element_model, judge_step
    from kerneltune.kernels.drafter_wide.interpreted import capture_program, run_step, setup

    layout, dims, weights, inputs = setup(shape.as_check())
    program = capture_program(layout, shape.arch, Path(os.environ["KERNELTUNE_CACHE"]) / "interpret")
    got = run_step(coverage.instrument(program) if coverage else program, layout, dims, weights, inputs, shape.arch)
    assert got.health == [[0, 0, 0, 0]] * 4
    emulated = Emulation(layout, dims, weights, inputs, numbers=shape.arch).run()
    judged = judge_step(got.h_out, got.caches, element_model(dims, weights, inputs),
                        (emulated.h_out, emulated.caches))
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]
    assert all(np.isfinite(h).all() for h in got.h_out)


def sampled(seed: int):
    """The matrix's shape for ``seed``, its first layer only (a step of one layer: 15-70 s here)."""
    shape = MATRIX[random.Random(seed).randrange(len(MATRIX))]
    return dataclasses.replace(shape, layers=1)


def test_a_sampled_shape_of_the_matrix(testrun_uid, record_property):
    """One shape of the matrix a run (``make test``), drawn from a seed printed here and named on failure."""
    raw = os.environ.get(SEED_ENV, "").strip()
    seed = int(raw) if raw else int(testrun_uid[:8], 16)
    shape = sampled(seed)
    record_property("shape_seed", seed)
    print(f"the shape matrix's sample: {SEED_ENV}={seed} ({shape.name}, one layer)")
    try:
        _judged_step(shape)
    except AssertionError as e:
        raise AssertionError(f"{shape.name}, one layer ({SEED_ENV}={seed} runs it again): {e}") from e


def test_a_sample_is_drawn_from_its_seed_alone():
    assert sampled(5) == sampled(5) and len({sampled(s).name for s in range(64)}) == len(MATRIX)

# Sites no step of the matrix takes both ways, and why: a missed deadline (the launch's own tests plant one:
# tests/kernels/drafter_wide/interpreter/), never in a correct step.
DEADLINE_ONLY = {("device.py", 100), ("device.py", 116), ("device.py", 125)}


@pytest.fixture(scope="module")
def coverage():
    from kerneltune.kernels.drafter_wide.interpret_coverage import Coverage

    return Coverage()


@WHOLE
@pytest.mark.parametrize("shape", MATRIX, ids=[s.name for s in MATRIX])
def test_the_shape_runs_within_every_bound(shape, coverage):
    _judged_step(shape, coverage)


@WHOLE
def test_every_branch_both_ways_and_every_loop_at_its_first_middle_and_last_trip(coverage):
    """Over the whole matrix (run after it): every ``if`` and ``select`` of the role modules and indexing taken
    and not taken but the deadline's, every run-time loop at three or more trips in one execution, every poll
    both answered at once and after a wait."""
    if len(coverage.programs) < len(MATRIX):
        pytest.skip("the matrix's steps did not all run before this test")
    print(coverage.report())
    one_way = {(s.file, s.line) for s in coverage.sites.values() if s.kind in ("if", "select") and not s.both_ways}
    assert one_way <= DEADLINE_ONLY, sorted(one_way - DEADLINE_ONLY)
    short = sorted(str(s) for s in coverage.sites.values() if s.kind == "for" and not s.first_middle_last)
    assert not short, short
    polls = [s for s in coverage.sites.values() if s.kind == "while"]
    assert polls and all(1 in s.trips and s.first_middle_last for s in polls)
