"""verify --interpret's assembly of its steps' verdicts (the steps themselves: test_interpreted.py), and the
processes they run in."""

from __future__ import annotations

import os
from concurrent.futures import Future

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide import interpret_check as ic
from kerneltune.kernels.drafter_wide.error_model import Judgement
from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule


def _stepped(value: float, error: str | None = None) -> ic.Stepped:
    return ic.Stepped([np.full((2, 3), value)] * 4, [[np.zeros(5)]] * 4, 10, error)


@pytest.fixture
def fake(monkeypatch):
    """Every job answered here, from ``answers``: (arch, schedule label) -> Stepped; captures that fail by arch."""
    answers: dict = {}
    broken: dict = {}
    monkeypatch.setenv(ic.WORKERS_ENV, "1")
    monkeypatch.setattr(ic, "capture", lambda cache, shape, arch: broken.get(arch))
    monkeypatch.setattr(ic, "step", lambda cache, shape, arch, plan: answers[(arch, plan.label, shape["layers"])])
    monkeypatch.setattr(ic, "element_model", lambda cache, shape: "model")
    monkeypatch.setattr(ic, "emulated", lambda cache, shape, arch: ("emulated", arch))
    import kerneltune.kernels.drafter_wide.error_model as em

    monkeypatch.setattr(em, "judge_step", lambda h, c, model, e: [Judgement(f"against {model} and {e[0]}",
                                                                             float(h[0][0, 0]), 1.0)])
    return answers, broken


def test_verdicts_come_back_in_the_runs_order_each_schedule_against_its_fixed_order(fake, tmp_path):
    answers, _ = fake
    pct = Schedule("pct", 1)
    runs = (("gfx942", (Schedule(), pct)), ("gfx950", (Schedule(), pct)))
    answers |= {("gfx942", "fixed", 2): _stepped(0.5), ("gfx942", pct.label, 2): _stepped(0.5),
                ("gfx950", "fixed", 2): _stepped(0.25), ("gfx950", pct.label, 2): _stepped(0.75),
                ("gfx950", "fixed", 3): _stepped(0.1, "Race: wave 1's read at ...")}
    checks = ic.check_interpreted(tmp_path, runs, extra=(("gfx950", {"layers": 3, "threads": 512}),))
    got = [(c.numbers, c.schedule, c.ok, c.error or c.shape.rsplit(", ", 1)[-1]) for c in checks]
    assert got == [
        ("gfx942 8-bit", "fixed", True, "against model and emulated"),
        ("gfx942 8-bit", pct.label, True, "the same bits as the fixed order"),
        ("gfx950 8-bit", "fixed", True, "against model and emulated"),
        ("gfx950 8-bit", pct.label, False, "the same bits as the fixed order"),  # 0.75 against 0.25
        ("gfx950 8-bit", "fixed", False, "Race: wave 1's read at ..."),
    ]
    assert checks[3].worst_error == 0.5 and "512" in checks[4].layout


def test_a_program_that_cannot_be_captured_is_one_failed_check_for_its_arch(fake, tmp_path):
    answers, broken = fake
    broken["gfx950"] = "CaptureFailed: ranker for gfx950: FlyDSL dumped no structured stage (rc 1)"
    answers |= {("gfx942", "fixed", 2): _stepped(0.5), ("gfx950", "fixed", 2): _stepped(0.5)}
    checks = ic.check_interpreted(tmp_path, (("gfx942", (Schedule(),)), ("gfx950", (Schedule(),))), extra=())
    assert [(c.numbers, c.ok) for c in checks] == [("gfx942 8-bit", True), ("gfx950 8-bit", False)]
    assert checks[1].error.startswith("CaptureFailed")


def test_one_process_a_core_and_at_most_what_the_environment_says(monkeypatch):
    monkeypatch.delenv(ic.WORKERS_ENV, raising=False)
    cores = len(os.sched_getaffinity(0))
    assert ic.workers(100) == cores and ic.workers(1) == 1
    monkeypatch.setenv(ic.WORKERS_ENV, "3")
    assert ic.workers(100) == 3 and ic.workers(2) == 2
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(ic.WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=ic.WORKERS_ENV):
            ic.workers(5)


def test_a_worker_that_dies_is_a_failed_check_naming_the_way_out(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pool = ic._executor(2)
    try:
        pids = {pool.submit(os.getpid).result() for _ in range(4)}
        assert os.getpid() not in pids  # the jobs ran in other processes
        assert pool.submit(os.getenv, "OMP_NUM_THREADS").result() == "1"  # each worker one thread
        for name, value in ic.KEEP_FREED.items():  # and glibc's malloc keeping what a step frees
            assert pool.submit(os.getenv, name).result() == os.environ.get(name, value)
        assert "OMP_NUM_THREADS" not in os.environ  # the caller's environment as it was
        value, lost = ic._result(pool.submit(os._exit, 9))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert value is None and "died" in lost and ic.WORKERS_ENV in lost


def test_one_worker_runs_each_job_where_it_is_asked():
    f = ic._executor(1).submit(os.getpid)
    assert isinstance(f, Future) and f.result() == os.getpid()
    failing = ic._executor(1).submit(int, "x")
    with pytest.raises(ValueError):
        failing.result()


def test_an_op_the_interpreter_lacks_is_the_steps_error_not_a_crash(monkeypatch, tmp_path):
    """The capture job checks only the module's text; the step, which reads the program, reports the op."""
    from kerneltune.kernels.drafter_wide.interpreter.ir import UnknownOp

    def unknown(*a):
        raise UnknownOp("the interpreter has no meaning for llvm.frobnicate at kernel.py:1")

    monkeypatch.setattr(ic, "_setup", lambda key: (None, None, None, None))
    monkeypatch.setattr(ic, "_program", unknown)
    got = ic.step(tmp_path, dict(ic.CHECK_SHAPE), "gfx942", Schedule())
    assert got.error.startswith("UnknownOp: the interpreter has no meaning for llvm.frobnicate")
