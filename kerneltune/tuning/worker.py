"""The worker's side: compile, verify and time candidates away from the CLI's process.

``python -m kerneltune.tuning.worker`` reads one JSON request per line on stdin and answers one JSON line on
its real stdout (library prints go to stderr). The parent (``worker_process.WorkerProcess``) starts it in its
own process group, so a hang or a crash is ended with one ``killpg`` and a fresh worker takes its place; a
sticky device error ends the worker on purpose. A timing worker's compile workers (``compile_ahead.py``) are
workers too, answering ``export`` requests.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from kerneltune.files.build_cache import BuildCache, build_key
from kerneltune.seams.process import die_with_parent, parent_pid_from_env
from kerneltune.seams.protocols import (
    Backend,
    Capability,
    CheckPrograms,
    Kernel,
    PortableBuild,
    SmallCheck,
    StaticRanking,
)
from kerneltune.seams.wire import (
    BuildReply,
    CompiledReply,
    MeasureReply,
    Op,
    PlayoffReply,
    Progress,
    Reply,
    Request,
    StampsReply,
    Status,
    WireError,
    failed,
    progress_line,
)

from .compile_ahead import BuildFailed, CompileAhead
from .phases import Phases
from .worker_process import COMPILE_CACHE_ENV, COMPILE_WORKERS_ENV, WorkerDied, WorkerProcess, worker_env

__all__ = ["WorkerDied", "WorkerProcess", "handle", "main", "worker_env"]



# ----------------------------------------------------------------------------- worker side

_prepared: set[str] = set()


def _prepare(backend: Backend) -> None:
    """The backend's preparation of this worker (its compile cache), once, before its first build."""
    if backend.name not in _prepared:
        _prepared.add(backend.name)
        backend.prepare_worker(os.environ.get(COMPILE_CACHE_ENV))


def _stamps(kernel: Kernel, backend: Backend, known: Any) -> dict[str, Any]:
    """The backend's stamps and its ceilings: those of the first earlier measurement (``known``: one stamp set
    or a list of them) whose matched stamps but the kernel's are all the same, else measured now."""
    stamps = dict(backend.stamps())
    matched = [k for k in stamps.get("matched", ()) if k != "kernel_hash"]
    ceilings: dict[str, Any] = {}
    for earlier in known if isinstance(known, list) else [known or {}]:
        if isinstance(earlier, Mapping) and all(earlier.get(k) == stamps.get(k) for k in matched):
            ceilings = {k: v for k, v in earlier.items() if k.endswith("_ceiling") and isinstance(v, int | float)}
            if ceilings:
                break
    if not ceilings:
        try:
            ceilings = backend.ceilings()
        except RuntimeError as e:  # no ceiling is no reason to stop a sweep: % of ceiling stays empty
            stamps["ceiling_error"] = str(e)
            ceilings = {}
    return {**stamps, **ceilings}


def _export(kernel: Kernel, backend: Backend, problem: Any, req: Request) -> tuple[bytes, bool]:
    """The candidate's build as bytes, from the user's build cache when this system compiled it before
    (``build_cache``), and whether it came from there."""
    portable = cast(PortableBuild, kernel)

    def compile_() -> bytes:
        built = kernel.build(problem, req.config)
        try:
            return portable.export_build(built)
        finally:
            kernel.release(built)

    key = build_key(req.kernel, kernel.source_hash(), req.problem, req.config, backend.stamps(),
                    backend.matched_stamps)
    return BuildCache.from_env().build(key, compile_, portable.import_build)


@dataclass(frozen=True)
class _Job:
    """What every handler is given: the request, its kernel, backend and problem, and the compile-ahead pool."""

    req: Request
    kernel: Kernel
    backend: Backend
    problem: Any
    prefetcher: CompileAhead | None
    started: float
    progress: Callable[[Progress], None] = lambda event: None  # an interim line to the parent, before the reply


def handle(request: Request | Mapping[str, Any], prefetcher: CompileAhead | None = None,
           progress: Callable[[Progress], None] | None = None) -> Reply:
    """The answer to one request (checked first: ``Request.from_json``), by its op's handler (``HANDLERS``);
    ``progress`` writes a handler's interim lines (a measurement's ``compiled``) before its answer."""
    from kerneltune.seams.registry import load_backend, load_kernel

    req = request if isinstance(request, Request) else Request.from_json(request)
    kernel = load_kernel(req.kernel)
    backend = load_backend(kernel.backend)
    _prepare(backend)
    if req.op == Op.STAMPS:
        return StampsReply(Status.OK, stamps=_stamps(kernel, backend, list(req.ceilings)))
    job = _Job(req, kernel, backend, kernel.problem(req.problem), prefetcher, time.perf_counter(),
               progress or (lambda event: None))
    return HANDLERS[req.op](job)


def _static(job: _Job) -> Reply:
    """Compile-only: the kernel's own static ranking (no device here)."""
    if Capability.STATIC_RANK not in job.kernel.capabilities:
        return MeasureReply(Status.UNSUPPORTED, f"{job.kernel.name} has no static ranking")
    try:
        ranked = cast(StaticRanking, job.kernel).static_rank(job.problem, job.req.config)
    except Exception as e:  # an offline compile that fails is this candidate's compile error
        return MeasureReply(Status.COMPILE, _error_text(e))
    return MeasureReply.from_json(ranked)


def _check_small(job: _Job) -> Reply:
    if Capability.CHECK_SMALL not in job.kernel.capabilities:
        return Reply(Status.UNSUPPORTED, f"{job.kernel.name} has no small-shape check")
    try:
        result = cast(SmallCheck, job.kernel).check_small(job.problem, job.req.config)
    except Exception as e:  # a small-shape check that cannot even run is a failure of the entry
        return Reply(Status.RUNTIME, _error_text(e))
    return Reply(Status.OK) if result.error is None else Reply(Status.CORRECTNESS, result.error)


def _export_job(job: _Job) -> Reply:
    """A compile worker's job: the build as bytes, for the timing worker that asked."""
    try:
        data, cached = _export(job.kernel, job.backend, job.problem, job.req)
    except Exception as e:  # any failure to build is this candidate's compile error
        return BuildReply(Status.COMPILE, _error_text(e))
    return BuildReply(Status.OK, build=base64.b64encode(data).decode(), compile_s=time.perf_counter() - job.started,
                      cached=cached)


def _compile_check(job: _Job) -> Reply:
    """A compile worker's job: what the problem's check compiles, into the build cache."""
    if Capability.CHECK_PROGRAMS not in job.kernel.capabilities:
        return CompiledReply(Status.UNSUPPORTED, f"{job.kernel.name} compiles no programs for its check")
    try:
        cast(CheckPrograms, job.kernel).compile_check(job.problem)
    except Exception as e:  # the check itself compiles them again and gives the verdict
        return CompiledReply(Status.COMPILE, _error_text(e))
    return CompiledReply(Status.OK, compile_s=time.perf_counter() - job.started)


def _measure(job: _Job) -> Reply:
    """Build (or take the compiled-ahead build), check on fresh inputs, time (not for ``Op.CHECK``)."""
    kernel, backend, problem, req, prefetcher, t0 = (job.kernel, job.backend, job.problem, job.req, job.prefetcher,
                                                     job.started)
    ahead = prefetcher.take(req) if prefetcher is not None else None
    try:
        if ahead is not None:
            built, compile_s = ahead.result()
        else:
            built = kernel.build(problem, req.config)
            compile_s = time.perf_counter() - t0
    except BuildFailed as e:  # a compile worker's verdict, in its own words
        return MeasureReply(e.status, str(e), compile_s=time.perf_counter() - t0)
    except Exception as e:  # any failure to build is this candidate's compile error
        return MeasureReply(Status.COMPILE, _error_text(e), compile_s=time.perf_counter() - t0)
    # compile_s: the compile itself; compile_wait_s: what the timer waited for it (less when compiled ahead).
    wait_s = time.perf_counter() - t0
    job.progress(Progress.COMPILED)  # the parent's run timeout counts from here: a hang now is the check's or timing's
    phases = Phases(compile_s=compile_s, compile_wait_s=wait_s)

    from kerneltune.seams.measure import time_with

    def reply(status: Status, error: str | None = None, **measured: Any) -> MeasureReply:
        return MeasureReply(status, error, compile_s=compile_s, compile_wait_s=wait_s, phases=phases.to_dict(),
                            **measured)

    try:
        with phases.timed("inputs_s"):
            inputs = kernel.make_inputs(problem, req.inputs, req.seed)
        if prefetcher is not None:
            with phases.timed("reference_s"):  # the check's programs, compiled ahead in a compile worker
                prefetcher.wait_check(req)
        with phases.timed("check_s"):
            check = kernel.check(built, problem, inputs)
        phases.split("check_s", "reference_s", check.reference_s)
        if check.error is not None:
            return reply(Status.CORRECTNESS, check.error, rel_error=check.rel_error)
        if req.op == Op.CHECK:
            return reply(Status.OK, rel_error=check.rel_error,
                         accuracy=dict(check.accuracy) if check.accuracy else None)
        with phases.timed("timing_s"):
            fn, args = kernel.timed_call(built, inputs)
            timing = time_with(backend, fn, args, req.settings, req.prune_above_us)
        flops = kernel.flops(problem, inputs)
    except Exception as e:  # a launch or device failure of this candidate
        return reply(Status.RUNTIME, _error_text(e), restart=backend.is_sticky(e))
    finally:
        kernel.release(built)  # a launch group's rank processes end with their candidate
    return reply(Status.PRUNED if timing.stopped_early else Status.OK, timing=timing.to_dict(),
                 tflops=flops / (timing.median_us * 1e-6) / 1e12 if timing.median_us > 0 else None, flops=flops,
                 rel_error=check.rel_error, accuracy=dict(check.accuracy) if check.accuracy else None)


def _playoff(job: _Job) -> Reply:
    """The leaders (``req.rivals``) built, then timed in interleaved rounds on one set of inputs
    (``measure.take_turns``): each leader's median time per round, in µs."""
    from kerneltune.seams.measure import take_turns

    from .playoff import ROUNDS

    kernel, backend, problem, req = job.kernel, job.backend, job.problem, job.req
    settings = req.settings
    built: list[Any] = []
    portable = Capability.PORTABLE_BUILD in kernel.capabilities
    try:
        for config in req.rivals:  # a portable build from the user's build cache: the sweep compiled it there
            if portable:
                data, _ = _export(kernel, backend, problem, dataclasses.replace(req, config=config))
                built.append(cast(PortableBuild, kernel).import_build(data))
            else:
                built.append(kernel.build(problem, config))
        inputs = kernel.make_inputs(problem, req.inputs, req.seed)
        samplers = {}
        for i, b in enumerate(built):
            fn, args = kernel.timed_call(b, inputs)
            samplers[str(i)] = backend.sampler(fn, args, settings.cold_l2)
        turns = take_turns(samplers, ROUNDS, settings.batch, warmup=settings.warmup)
    except Exception as e:  # a leader that built and ran in the sweep fails now: no playoff, said why
        return PlayoffReply(Status.RUNTIME, _error_text(e), backend.is_sticky(e))
    finally:
        for b in built:
            kernel.release(b)
    times: dict[str, list[float]] = {str(i): [] for i in range(len(req.rivals))}
    for turn in turns:
        times[turn.name].append(turn.median_us)
    return PlayoffReply(Status.OK, rounds=ROUNDS, batch=settings.batch,
                        times=tuple(tuple(times[str(i)]) for i in range(len(times))))


HANDLERS: dict[Op, Callable[[_Job], Reply]] = {
    Op.MEASURE: _measure, Op.CHECK: _measure, Op.STATIC: _static, Op.CHECK_SMALL: _check_small, Op.EXPORT: _export_job,
    Op.COMPILE_CHECK: _compile_check, Op.PLAYOFF: _playoff,
}


def _error_text(e: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[-4000:]


def main() -> None:
    die_with_parent(parent_pid_from_env())
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log
    prefetcher = CompileAhead(int(os.environ.get(COMPILE_WORKERS_ENV, "0") or 0))
    work: queue.Queue[Request | str | None] = queue.Queue()  # a str: why a line was no request

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                try:
                    req = Request.from_json(json.loads(line))
                except ValueError as e:  # not JSON, or a request that breaks the protocol: answered as such
                    work.put(f"not a request ({e})")
                    continue
                if req.op == Op.PREFETCH:  # no answer: compile in the background
                    prefetcher.submit(req)
                else:
                    work.put(req)
        work.put(None)

    def progress(event: Progress) -> None:
        out.write(json.dumps(progress_line(event)) + "\n")
        out.flush()

    threading.Thread(target=read, daemon=True).start()
    while (req := work.get()) is not None:
        try:
            if isinstance(req, str):
                raise WireError(req)
            reply = handle(req, prefetcher, progress)
        except Exception as e:
            reply = failed(req.op if isinstance(req, Request) else Op.MEASURE, Status.RUNTIME, _error_text(e), True)
        out.write(json.dumps(reply.to_json()) + "\n")
        out.flush()
        if reply.restart:
            os._exit(0)
    os._exit(0)


if __name__ == "__main__":
    main()
