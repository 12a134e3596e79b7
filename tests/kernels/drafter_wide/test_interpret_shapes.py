"""The shapes users run (``shape_matrix.MATRIX``) through the CPU interpreter, each judged as ``verify --interpret``
judges (``error_model.judge_step``), and the branch and loop-trip coverage they reach together.

A step of the matrix takes one to five minutes on a 2-core machine (about 15 in all), more than ``make test``
can give: these run with ``KERNELTUNE_SHAPE_MATRIX=1`` (``.ci/interpret_coverage.py`` runs the same and prints
the coverage for the record). ``verify --interpret`` runs the default shape and ``interpreted.CHECK_EXTRA`` on
every call."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.shape_matrix import MATRIX

pytestmark = [
    pytest.mark.slow, pytest.mark.xdist_group("drafter-interpret"),
    pytest.mark.skipif(not os.environ.get("KERNELTUNE_SHAPE_MATRIX"),
                       reason="the shape matrix takes about 15 minutes: KERNELTUNE_SHAPE_MATRIX=1 runs it"),
]

# Sites no step of the matrix takes both ways, and why: a missed deadline (the launch's own tests plant one:
# tests/kernels/drafter_wide/interpreter/), never in a correct step.
DEADLINE_ONLY = {("device.py", 100), ("device.py", 116), ("device.py", 125)}


@pytest.fixture(scope="module")
def coverage():
    from kerneltune.kernels.drafter_wide.interpret_coverage import Coverage

    return Coverage()


@pytest.mark.parametrize("shape", MATRIX, ids=[s.name for s in MATRIX])
def test_the_shape_runs_within_every_bound(shape, coverage):
    from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation
    from kerneltune.kernels.drafter_wide.error_model import element_model, judge_step
    from kerneltune.kernels.drafter_wide.interpreted import capture_program, run_step, setup

    layout, dims, weights, inputs = setup(shape.as_check())
    program = capture_program(layout, shape.arch, Path(os.environ["KERNELTUNE_CACHE"]) / "interpret")
    got = run_step(coverage.instrument(program), layout, dims, weights, inputs, shape.arch)
    assert got.health == [[0, 0, 0, 0]] * 4
    emulated = Emulation(layout, dims, weights, inputs, numbers=shape.arch).run()
    judged = judge_step(got.h_out, got.caches, element_model(dims, weights, inputs),
                        (emulated.h_out, emulated.caches))
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]
    assert all(np.isfinite(h).all() for h in got.h_out)


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
