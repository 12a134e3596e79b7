"""A candidate on the worker's side (``handle``: each reply's status, and what it asks of the process) and
on the parent's (``WorkerProcess``: a worker that asks for a restart is not sent the next candidate)."""

import json
import os
import re
import time

import pytest

from kerneltune.backends.cuda_jax import cuda_error_is_sticky
from kerneltune.backends.host import Host
from kerneltune.seams.protocols import Capability, CheckResult
from kerneltune.seams.registry import load_backend
from kerneltune.seams.wire import Request, Status
from kerneltune.tuning.worker import WorkerProcess, handle, worker_env

from ..paths import REPO
from .fake_kernel import FakeKernel

ERRORS = {"illegal": "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
          "launch_failure": "unspecified launch failure", "flaky": "a host-side error the next candidate won't see"}


class _StickyHost(Host):
    """The host backend judging errors as CUDA's would: which ones leave the device unusable."""

    def is_sticky(self, error):
        return cuda_error_is_sticky(error)


STICKY_HOST = _StickyHost()


class _Kernel(FakeKernel):
    """The fake kernel with a small-shape check, device errors by name, and a record of what it released."""

    backend = "tests.tuning.test_worker:STICKY_HOST"
    capabilities = frozenset({Capability.CHECK_SMALL})
    released: list[str] = []

    def check_small(self, problem, tiles):
        return CheckResult("3 elements beyond atol" if tiles["mode"] == "garbage" else None)

    def _run(self, built, x, out):
        if built["mode"] in ERRORS:
            raise RuntimeError(ERRORS[built["mode"]])
        super()._run(built, x, out)

    def release(self, built):
        self.released.append(built["mode"])


KERNEL = _Kernel()


def _req(mode, op="measure", kernel="tests.tuning.test_worker:KERNEL", **extra):
    return {"op": op, "kernel": kernel, "problem": {"n": 4}, "config": {"mode": mode, "work": 1}, "seed": 0,
            "settings": {"max_seconds": 0.05, "min_samples": 3, "batch": 3, "warmup": 1}, **extra}


@pytest.mark.parametrize(("mode", "restart"), [("illegal", True), ("launch_failure", True), ("flaky", False)])
def test_a_device_error_that_poisons_the_context_asks_for_a_fresh_worker(mode, restart):
    reply = handle(_req(mode))
    assert reply.status == "runtime" and reply.error.endswith(ERRORS[mode])
    assert reply.restart is restart


def test_every_built_candidate_is_released_whatever_its_fate():
    """A launch group's rank processes end with their candidate: after a pass, a wrong output and a crash."""
    KERNEL.released.clear()
    assert [handle(_req(m)).status for m in ("good", "garbage", "illegal")] == ["ok", "correctness", "runtime"]
    assert KERNEL.released == ["good", "garbage", "illegal"]


def test_a_candidate_slower_than_the_bound_is_pruned_not_timed_to_convergence():
    """The fake's call takes ~1 ms: over a 100 µs bound it is pruned, under a 1 s one it is timed."""
    assert handle(_req("good", prune_above_us=100.0)).status == "pruned"
    assert handle(_req("good", prune_above_us=1e6)).status == "ok"


def test_the_small_shape_check_reports_a_wrong_output():
    assert handle(_req("good", op="check_small")).to_json() == {"status": "ok"}
    assert handle(_req("garbage", op="check_small")).to_json() == {"status": "correctness",
                                                            "error": "3 elements beyond atol"}
    reply = handle(_req("good", op="check_small", kernel="tests.tuning.fake_kernel:PLUGIN"))
    assert reply.status == "unsupported"


def test_a_worker_that_asks_for_a_restart_is_replaced_before_the_next_candidate(tmp_path):
    env = {**worker_env(load_backend("host"), None, None),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        assert worker.request(Request.from_json(_req("good")), timeout=120).status == "ok"
        first = worker.proc.pid
        assert worker.request(Request.from_json(_req("illegal")), timeout=120).restart is True
        assert worker.proc is None  # killed with its process group, not left to exit on its own
        assert worker.request(Request.from_json(_req("good")), timeout=120).status == "ok"
        assert worker.proc.pid != first
    finally:
        worker.close()


class _StaticKernel(FakeKernel):
    """Ranked by an offline compile, as the drafter is: more than one unit of work is not co-resident."""

    capabilities = frozenset({Capability.STATIC_RANK})

    def static_rank(self, problem, tiles):
        if tiles["work"] > 1:
            return {"status": "constraint", "error": "not co-resident: BLOCKS 304 > 256 CUs", "static": {"vgpr": 9}}
        return {"status": "ok", "static": {"vgpr": 9}, "score": 1.0}


STATIC = _StaticKernel()


def test_a_layout_the_static_ranking_refuses_comes_back_as_a_constraint(tmp_path):
    """Not as a worker that broke the protocol (a compile-only sweep once journaled 20 such layouts as
    runtime failures)."""
    env = {**worker_env(load_backend("host"), None, None),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        for work, status in ((2, "constraint"), (1, "ok")):
            req = Request.from_json({**_req("good", op="static", kernel="tests.tuning.test_worker:STATIC"),
                                     "config": {"mode": "good", "work": work}})
            reply = worker.request(req, timeout=120)
            assert reply.status == status and reply.static == {"vgpr": 9}, reply
    finally:
        worker.close()


def test_measured_ceilings_are_kept_per_system_in_the_users_cache(tmp_path, monkeypatch):
    """A second run on the same system reuses them (measuring takes ~20 s); another driver's are kept beside."""
    from kerneltune.tuning.runners import known_ceilings, remember_ceilings

    monkeypatch.setenv("KERNELTUNE_CACHE", str(tmp_path))
    a = {"matched": ["gpu", "driver", "kernel_hash"], "gpu": "H200", "driver": "1", "kernel_hash": "x",
         "bf16_tflops_ceiling": 700.0}
    remember_ceilings(a)
    remember_ceilings({**a, "driver": "2", "bf16_tflops_ceiling": 710.0})
    remember_ceilings({**a, "kernel_hash": "y", "bf16_tflops_ceiling": 720.0})  # same system: replaces a
    assert [(d["driver"], d["bf16_tflops_ceiling"]) for d in known_ceilings()] == [("1", 720.0), ("2", 710.0)]
    (tmp_path / "ceilings.json").write_text("not json")
    assert known_ceilings() == []


def test_an_export_answers_the_build_as_bytes_the_timing_worker_loads():
    import base64

    from .fake_kernel import PLUGIN

    reply = handle(_req("good", op="export", kernel="tests.tuning.fake_kernel:PLUGIN"))
    assert reply.status == "ok" and reply.compile_s >= 0
    assert PLUGIN.import_build(base64.b64decode(reply.build))["mode"] == "good"
    failed = handle(_req("compile_error", op="export", kernel="tests.tuning.fake_kernel:PLUGIN"))
    assert failed.status == "compile" and "fake compile error" in failed.error


def test_an_export_compiled_before_on_this_system_comes_from_the_build_cache(tmp_path, monkeypatch):
    """The second export of a candidate loads the first one's build; a failed compile is never kept; the
    timing worker's environment names the user's cache unless the caller named another folder."""
    import base64

    from kerneltune.files.build_cache import ENV
    from kerneltune.files.paths import user_cache_dir

    from .fake_kernel import PLUGIN

    monkeypatch.setenv(ENV, str(tmp_path / "builds"))
    first, again = (handle(_req("good", op="export", kernel="tests.tuning.fake_kernel:PLUGIN")) for _ in range(2))
    assert (first.cached, again.cached) == (False, True) and again.build == first.build
    assert PLUGIN.import_build(base64.b64decode(again.build))["built_by"] == os.getpid()
    for _ in range(2):
        handle(_req("compile_error", op="export", kernel="tests.tuning.fake_kernel:PLUGIN"))
    assert len(list((tmp_path / "builds").glob("*.npz"))) == 1
    assert worker_env(Host(), None, None)[ENV] == str(tmp_path / "builds")
    monkeypatch.delenv(ENV)
    assert worker_env(Host(), None, None)[ENV] == str(user_cache_dir() / "builds")


def test_a_check_waits_for_its_problems_programs_compiled_ahead_and_books_the_wait_as_references(tmp_path,
                                                                                                  monkeypatch):
    """The candidate's build is ready at once, its problem's check programs a second later: the check runs on them,
    and the second is its reference phase, not its check's."""
    from kerneltune.tuning.compile_ahead import CompileAhead

    monkeypatch.setenv("FAKE_CHECK_PROGRAMS", str(tmp_path))
    monkeypatch.setenv("FAKE_CHECK_PROGRAMS_S", "1.0")
    req = Request.from_json(_req("good", kernel="tests.tuning.fake_kernel:THREADED_CHECK_PROGRAMS"))
    prefetcher = CompileAhead(2)
    prefetcher.submit(req)
    reply = handle(req, prefetcher)
    assert reply.status == "ok" and reply.accuracy["programs_ready"] == 1.0
    assert reply.phases["reference_s"] >= 0.5 > reply.phases["check_s"]


def test_a_compile_workers_check_programs_job_answers_ok_or_the_compile_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CHECK_PROGRAMS", str(tmp_path))
    kernel = "tests.tuning.fake_kernel:CHECK_PROGRAMS"
    reply = handle(_req("good", op="compile_check", kernel=kernel))
    assert reply.status == "ok" and reply.compile_s >= 0 and (tmp_path / "n4").exists()
    failed = handle({**_req("good", op="compile_check", kernel=kernel), "problem": {"n": 13}})
    assert failed.status == "compile" and "fake check compile error" in failed.error
    unsupported = handle(_req("good", op="compile_check", kernel="tests.tuning.fake_kernel:PLUGIN"))
    assert unsupported.status == "unsupported"


def test_a_request_that_breaks_the_protocol_is_refused_naming_the_field():
    from kerneltune.seams.wire import WireError

    for bad, says in (({"op": "dance", "kernel": "k"}, "op 'dance' is not one of"),
                      ({"kernel": "k", "config": [1]}, r"config: \[1\] is not an object"),
                      ({"kernel": 3}, "kernel must be a string"), ([1], "a request is a JSON object")):
        with pytest.raises(WireError, match=says):
            Request.from_json(bad)
    req = Request.from_json(_req("good", prune_above_us=5))
    assert Request.from_json(req.to_json()) == req and req.prune_above_us == 5.0


def test_a_reply_outside_the_protocol_is_refused_naming_the_field():
    from kerneltune.seams.wire import REPLIES, MeasureReply, Op, PlayoffReply, WireError

    assert MeasureReply.from_json({"status": "pruned"}).status == Status.PRUNED
    for bad, says in (({"status": "fine"}, "status 'fine' is not one of"), ([1], "a reply is a JSON object"),
                      ({"status": "ok", "timing": 3}, "timing 3 is not an object"),
                      ({"status": "ok", "compile_s": "fast"}, "compile_s 'fast' is not of type float"),
                      ({"status": "ok", "colour": "red"}, "a MeasureReply has no colour"),
                      ({"status": "ok", "restart": 1}, "restart 1 is not of type bool")):
        with pytest.raises(WireError, match=says):
            MeasureReply.from_json(bad)
    with pytest.raises(WireError, match="times"):
        PlayoffReply.from_json({"status": "ok", "times": [1.0]})
    for op, reply_type in REPLIES.items():  # every reply survives the pipe as itself
        sent = reply_type(Status.RUNTIME, "why", True)
        assert reply_type.from_json(json.loads(json.dumps(sent.to_json()))) == sent, op
    measured = MeasureReply(Status.OK, timing={"median_us": 2.0}, compile_s=0.5)
    assert MeasureReply.from_json(measured.to_json()) == measured and measured.median_us == 2.0
    assert REPLIES[Op.PLAYOFF] is PlayoffReply


def test_the_settings_cross_the_pipe_typed_with_the_compile_timeout():
    from kerneltune.seams.settings import MeasureSettings
    from kerneltune.seams.wire import WireError

    req = Request.from_json({**_req("good"), "settings": {"batch": 4, "compile_timeout": 7.5}})
    assert req.settings == MeasureSettings(batch=4, compile_timeout=7.5)
    assert Request.from_json(json.loads(json.dumps(req.to_json()))) == req
    for settings, says in (({"batch": "4"}, "batch '4' is not of type int"),
                           ({"colour": 1}, "a MeasureSettings has no colour"),
                           ({"compile_timeout": -1}, "compile_timeout: must be a positive"),
                           ({"cold_l2": 1}, "cold_l2 1 is not of type bool")):
        with pytest.raises(WireError, match=says):
            Request.from_json({**_req("good"), "settings": settings})


def test_a_playoff_times_every_leader_in_each_of_its_rounds(tmp_path, monkeypatch):
    """A portable kernel's leaders come from the user's build cache; every leader gets one time per round."""
    monkeypatch.setenv("KERNELTUNE_BUILD_CACHE", str(tmp_path / "builds"))
    leaders = [{"mode": "good", "work": 1}, {"mode": "good", "work": 2}]
    reply = handle(_req("good", op="playoff", kernel="tests.tuning.fake_kernel:PLUGIN", rivals=leaders))
    assert reply.status == "ok" and reply.rounds == 10 and reply.batch == 3
    assert [len(t) for t in reply.times] == [10, 10] and all(x > 0 for t in reply.times for x in t)
    assert any((tmp_path / "builds").rglob("*")), "the leaders' builds went through the build cache"

    def lost_device(self, built, inputs):
        raise RuntimeError(ERRORS["illegal"])

    monkeypatch.setattr(type(load_backend("host")), "is_sticky", lambda self, e: cuda_error_is_sticky(e))
    monkeypatch.setattr(FakeKernel, "timed_call", lost_device)
    broken = handle(_req("good", op="playoff", kernel="tests.tuning.fake_kernel:PLUGIN", rivals=leaders))
    # A leader that fails now: no playoff, why, and a fresh worker where the device is lost.
    assert broken.status == "runtime" and broken.error.endswith(ERRORS["illegal"]) and broken.restart


def test_a_measurement_says_compiled_before_its_check_and_a_failed_build_does_not():
    """The interim line the parent starts the run timeout's clock on: written once the build is in hand."""
    from kerneltune.seams.wire import Progress, WireError, progress_line, progress_of

    said = []
    assert handle(_req("good"), progress=said.append).status == "ok" and said == [Progress.COMPILED]
    said.clear()
    assert handle(_req("compile_error"), progress=said.append).status == "compile" and said == []
    assert progress_of(json.loads(json.dumps(progress_line(Progress.COMPILED)))) == Progress.COMPILED
    assert progress_of({"status": "ok"}) is None
    with pytest.raises(WireError, match="progress 'dance' is not one of"):
        progress_of({"progress": "dance"})


@pytest.mark.parametrize(("mode", "compile_s", "run_s", "says"), [
    ("hang", 60, 1, "check or timing: no answer within 1 s of its compile (the run timeout)"),
    ("compile_hang", 2, 60, "compile: no answer within 2 s (the compile timeout)")])
def test_a_hang_is_killed_by_the_timeout_of_the_phase_it_hangs_in(tmp_path, mode, compile_s, run_s, says):
    """--run-timeout bounds a candidate's check and timing from its compile's end, not compile plus run (a sweep
    with --run-timeout 5 once sat 605 s on a call that slept for ever); a hang in the build has the compile's."""
    from kerneltune.tuning.worker_process import WorkerDied

    env = {**worker_env(load_backend("host"), None, None),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = WorkerProcess(env, tmp_path / "worker.log")
    t0 = time.monotonic()
    try:
        with pytest.raises(WorkerDied, match=re.escape(says)) as died:
            worker.request(Request.from_json(_req(mode)), timeout=compile_s, run_timeout=run_s)
        assert died.value.kind == Status.TIMEOUT and worker.proc is None
    finally:
        worker.close()
    assert time.monotonic() - t0 < 30


def test_a_worker_that_dies_silently_says_which_signal_and_that_it_wrote_nothing(tmp_path):
    """Not ``worker died (signal 6):`` with nothing after the colon."""
    from kerneltune.tuning.worker_process import WorkerDied

    env = {**worker_env(load_backend("host"), None, None),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    worker = WorkerProcess(env, tmp_path / "worker.log")
    try:
        with pytest.raises(WorkerDied, match=r"^worker died \(signal 6, SIGABRT\); it wrote nothing on stderr$"):
            worker.request(Request.from_json(_req("crash")), timeout=60, run_timeout=60)
    finally:
        worker.close()
