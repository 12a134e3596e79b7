"""Compile ahead of the timing: the candidates a sweep or a verify measures next are built while the
timing worker checks and times the one before.

A kernel whose build can leave its process (``PortableBuild``) compiles in compile workers: processes of
their own, each a worker (``worker.py``) that answers with the build as bytes. The ranker's lowering is
Python that holds its interpreter, so threads of the timing worker do not add up: on one H200, 8 threads
compiled it 2.3x as fast as one, 8 processes 6.3x (their start included); the executable loaded in the
timing worker gives bit-identical outputs (results/engine/2026-12-04-compile-workers/).
Other kernels compile on threads of the timing worker.

A kernel whose check compiles programs of its own (``CheckPrograms``: the ranker's float32 references and
its no-cap twin) has them compiled ahead too, once a problem, before the problem's first candidate: the check
then loads them from the user's build cache. Compiled in the timing worker, they held the GPU idle for 10-17 s
at a sweep's bucket and took 83 of the 127 s a cold verify spent on the table's six D=128 buckets
(results/engine/2026-12-05-one-entry/).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

from kerneltune.files.build_cache import BuildCache
from kerneltune.seams.protocols import Capability, CheckPrograms, PortableBuild
from kerneltune.seams.wire import BuildReply, CompiledReply, Op, Request, Status

from .worker_process import COMPILE_WORKERS_ENV, WorkerDied, WorkerProcess

Built = tuple[Any, float]  # a build (None for a check's programs) and the seconds it took
log = logging.getLogger("kerneltune.compile_ahead")


def default_compile_workers() -> int:
    """Compile workers per timing worker: the cores less two (the timing worker and the sweep), up to 14. On
    the H200's 16 cores an exhaustive sweep of two unseen ranker buckets made 204 candidates a minute with 14
    and 125 with 8 (results/engine/2026-12-05-one-entry/); more than 14 is unmeasured."""
    return max(1, min(14, (os.cpu_count() or 1) - 2))


class BuildFailed(Exception):
    """A compile worker's verdict on a candidate: its status (``compile`` or ``timeout``) and why."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class CompileAhead:
    """Candidates compiling ahead, each taken once by the measurement that needs it."""

    def __init__(self, workers: int):
        self.workers = max(workers, 1)
        self._threads: ThreadPoolExecutor | None = None
        self._processes: _CompileWorkers | None = None
        self._futures: dict[str, Future[Built]] = {}
        self._checks: dict[str, Future[Built]] = {}  # each problem's check programs, kept: every candidate waits
        self._lock = threading.Lock()

    @staticmethod
    def key(req: Request) -> str:
        return json.dumps([req.kernel, dict(req.problem), dict(req.config)], sort_keys=True)

    @staticmethod
    def _problem_key(req: Request) -> str:
        return json.dumps([req.kernel, dict(req.problem)], sort_keys=True)

    def submit(self, req: Request) -> None:
        """Start compiling the candidate, after its problem's check programs if it is the problem's first; nothing
        where this worker's device cannot run the kernel (the engine hands compiles over before it knows)."""
        from kerneltune.seams.registry import load_kernel

        kernel = load_kernel(req.kernel)
        if not runs_here(req.kernel):
            return
        portable = Capability.PORTABLE_BUILD in kernel.capabilities
        with self._lock:
            if self.key(req) in self._futures:
                return
            if (Capability.CHECK_PROGRAMS in kernel.capabilities and self._problem_key(req) not in self._checks
                    and (not portable or BuildCache.from_env().folder is not None)):  # the cache carries them over
                self._checks[self._problem_key(req)] = self._start(req.as_op(Op.COMPILE_CHECK), portable)
            self._futures[self.key(req)] = self._start(req.as_op(Op.EXPORT), portable)

    def _start(self, req: Request, portable: bool) -> Future[Built]:
        if portable:
            if self._processes is None:
                self._processes = _CompileWorkers(self.workers)
            return self._processes.submit(req)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="compile")
        return self._threads.submit(_build_here, req)

    def take(self, req: Request) -> Future[Built] | None:
        with self._lock:
            return self._futures.pop(self.key(req), None)

    def wait_check(self, req: Request) -> None:
        """Return once the check programs of the candidate's problem are compiled, if they were started here; a
        failure is a warning only, since the check compiles what it lacks itself and reports its own errors."""
        with self._lock:
            future = self._checks.get(self._problem_key(req))
        if future is None:
            return
        try:
            future.result()
        except Exception as e:  # its own compile in the check gives the verdict, if there is one to give
            log.warning("compiling the check's programs of %s ahead failed (%s); the check compiles them",
                        req.bucket or dict(req.problem), str(e).splitlines()[0] if str(e) else type(e).__name__)


@functools.cache
def runs_here(kernel_name: str) -> bool:
    """Whether this process's device can run the kernel (``Kernel.supported_on`` its backend's stamps), asked once."""
    from kerneltune.seams.registry import load_backend, load_kernel

    kernel = load_kernel(kernel_name)
    return kernel.supported_on(load_backend(kernel.backend).stamps()) is None


def _build_here(req: Request) -> Built:
    from kerneltune.seams.registry import load_kernel

    kernel = load_kernel(req.kernel)
    t0 = time.perf_counter()
    if req.op == Op.COMPILE_CHECK:
        cast(CheckPrograms, kernel).compile_check(kernel.problem(req.problem))
        return None, time.perf_counter() - t0
    return kernel.build(kernel.problem(req.problem), req.config), time.perf_counter() - t0


class _CompileWorkers:
    """``n`` compile worker processes fed in submission order (the order the candidates will be measured).
    Each is started, restarted after a crash or a hang, and waited on by one thread of its own: a process
    ends with the thread that started it (``die_with_parent``), so that thread outlives every job. A job is
    killed past its request's ``settings.compile_timeout``."""

    def __init__(self, n: int):
        self._jobs: queue.Queue[tuple[Request, Future[Built]]] = queue.Queue()
        env = {**os.environ, COMPILE_WORKERS_ENV: "0"}  # a compile worker compiles only its own job
        for i in range(n):
            threading.Thread(target=self._serve, args=(WorkerProcess(env),), name=f"compile-worker-{i}",
                             daemon=True).start()

    def submit(self, req: Request) -> Future[Built]:
        future: Future[Built] = Future()
        self._jobs.put((req, future))
        return future

    def _serve(self, process: WorkerProcess) -> None:
        while True:
            req, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._build(process, req))
            except BaseException as e:  # the measurement that takes this future reports it
                future.set_exception(e)

    def _build(self, process: WorkerProcess, req: Request) -> Built:
        from kerneltune.seams.registry import load_kernel

        try:
            reply = process.request(req, req.settings.compile_timeout)
        except WorkerDied as e:
            if e.kind == Status.TIMEOUT:
                raise BuildFailed(Status.TIMEOUT, f"compile: {e}") from None
            raise BuildFailed(Status.COMPILE, f"the compile worker died compiling it: {e}") from None
        if not reply.ok:
            raise BuildFailed(reply.status, reply.error or "")
        if isinstance(reply, CompiledReply):  # the check's programs, kept in the build cache where it finds them
            return None, reply.compile_s
        t0 = time.perf_counter()
        kernel = cast(PortableBuild, load_kernel(req.kernel))
        built = kernel.import_build(base64.b64decode(cast(BuildReply, reply).build))
        return built, cast(BuildReply, reply).compile_s + time.perf_counter() - t0
