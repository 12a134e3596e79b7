"""Compile ahead: a portable build compiles in compile worker processes, others on threads; a compile that
fails, crashes or hangs is that candidate's verdict and the next one still compiles."""

import os

import pytest

from kerneltune.seams.settings import MeasureSettings
from kerneltune.seams.wire import candidate_request
from kerneltune.tuning.compile_ahead import BuildFailed, CompileAhead, default_compile_workers

from ..paths import REPO

PORTABLE = "tests.tuning.fake_kernel:PLUGIN"
THREADED = "tests.tuning.fake_kernel:THREADED"


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def req(mode, work=1, kernel=PORTABLE, compile_timeout=60.0):
    return candidate_request(kernel, "small", {"n": 2}, {"mode": mode, "work": work}, {}, 0,
                             MeasureSettings(compile_timeout=compile_timeout))


def built(ahead, r, timeout=60):
    future = ahead.take(r)
    assert future is not None
    return future.result(timeout=timeout)


def test_portable_builds_compile_in_other_processes_and_failures_are_their_verdicts():
    ahead = CompileAhead(2)
    for r in (req("good", 1), req("good", 2), req("compile_error"), req("compile_crash"), req("good", 3)):
        ahead.submit(r)
    ahead.submit(req("good", 1))  # the same candidate again: still one build
    (b1, s1), (b2, _) = built(ahead, req("good", 1)), built(ahead, req("good", 2))
    assert b1["mode"] == "good" and b1["work"] == 1 and b2["work"] == 2 and s1 >= 0
    assert os.getpid() not in (b1["built_by"], b2["built_by"])
    with pytest.raises(BuildFailed, match="fake compile error") as error:
        built(ahead, req("compile_error"))
    assert error.value.status == "compile"
    with pytest.raises(BuildFailed, match="died") as crash:
        built(ahead, req("compile_crash"))
    assert crash.value.status == "compile"
    assert built(ahead, req("good", 3))[0]["work"] == 3  # a crash costs only its own candidate
    assert ahead.take(req("good", 1)) is None  # taken once


def test_a_compile_that_hangs_is_a_timeout_and_frees_its_worker():
    ahead = CompileAhead(1)
    ahead.submit(req("compile_hang", compile_timeout=3))
    ahead.submit(req("good"))
    with pytest.raises(BuildFailed, match="no answer within 3 s") as hang:
        built(ahead, req("compile_hang", compile_timeout=3))
    assert hang.value.status == "timeout"
    assert built(ahead, req("good"))[0]["mode"] == "good"


def test_nothing_compiles_ahead_where_the_device_cannot_run_the_kernel():
    ahead = CompileAhead(1)
    ahead.submit(req("good", kernel="tests.tuning.fake_kernel:NEEDS_GPU"))
    assert ahead.take(req("good", kernel="tests.tuning.fake_kernel:NEEDS_GPU")) is None
    ahead.submit(req("good"))
    assert built(ahead, req("good"))[0]["mode"] == "good"


def test_a_build_that_cannot_leave_its_process_compiles_on_a_thread_here():
    ahead = CompileAhead(2)
    ahead.submit(req("good", kernel=THREADED))
    assert built(ahead, req("good", kernel=THREADED))[0]["built_by"] == os.getpid()


CHECKING = "tests.tuning.fake_kernel:CHECK_PROGRAMS"


@pytest.fixture
def marks(tmp_path, monkeypatch):
    """Where the fake check programs leave their marks, and a build cache to carry them over."""
    from kerneltune.files.build_cache import ENV

    monkeypatch.setenv("FAKE_CHECK_PROGRAMS", str(tmp_path / "marks"))
    monkeypatch.setenv(ENV, str(tmp_path / "builds"))
    (tmp_path / "marks").mkdir()
    return tmp_path / "marks"


def checked(n, work=1, kernel=CHECKING):
    return candidate_request(kernel, f"n{n}", {"n": n}, {"mode": "good", "work": work}, {}, 0, MeasureSettings())


def test_a_problems_check_programs_compile_once_in_a_compile_worker(marks):
    """Handed over with the problem's first candidate, compiled in another process (the build cache carries them
    to the check), once however many of its candidates follow; each problem its own."""
    ahead = CompileAhead(2)
    for r in (checked(2, 1), checked(2, 2), checked(3, 1), checked(2, 1)):
        ahead.submit(r)
    ahead.wait_check(checked(2, 2))
    ahead.wait_check(checked(3, 1))
    pids = {p.name: p.read_text().split() for p in marks.iterdir()}
    assert sorted(pids) == ["n2", "n3"] and all(len(v) == 1 and v[0] != str(os.getpid()) for v in pids.values())
    assert [built(ahead, checked(n, w))[0]["work"] for n, w in ((2, 1), (2, 2), (3, 1))] == [1, 2, 1]


def test_check_programs_that_fail_to_compile_are_a_warning_and_their_candidates_still_compile(marks, caplog):
    ahead = CompileAhead(1)
    ahead.submit(checked(13))
    with caplog.at_level("WARNING", logger="kerneltune.compile_ahead"):
        ahead.wait_check(checked(13))
    assert "n13" in caplog.text and "fake check compile error" in caplog.text
    assert built(ahead, checked(13))[0]["mode"] == "good"


def test_without_a_build_cache_no_compile_worker_compiles_check_programs(marks, monkeypatch):
    """Another process's programs would reach the check only through the build cache: with none, the check
    compiles its own and no compile worker spends a turn on them."""
    from kerneltune.files.build_cache import ENV

    monkeypatch.setenv(ENV, "")
    ahead = CompileAhead(1)
    ahead.submit(checked(2))
    assert built(ahead, checked(2))[0]["mode"] == "good"
    ahead.wait_check(checked(2))
    assert list(marks.iterdir()) == []


def test_default_compile_workers_leave_two_cores(monkeypatch):
    for cores, workers in ((1, 1), (2, 1), (4, 2), (16, 14), (17, 14), (64, 14)):
        monkeypatch.setattr(os, "cpu_count", lambda c=cores: c)
        assert default_compile_workers() == workers
