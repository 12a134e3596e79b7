"""Compile ahead of the timing: the candidates a sweep or a verify measures next are built while the
timing worker checks and times the one before.

A kernel whose build can leave its process (``PortableBuild``) compiles in compile workers: processes of
their own, each a worker (``worker.py``) that answers with the build as bytes. The ranker's lowering is
Python that holds its interpreter, so threads of the timing worker do not add up: on one H200, 8 threads
compiled it 2.3x as fast as one, 8 processes 6.3x (their start included); the executable loaded in the
timing worker gives bit-identical outputs (results/engine/2026-12-04-compile-workers/).
Other kernels compile on threads of the timing worker.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

from kerneltune.protocols import Capability, PortableBuild
from kerneltune.wire import Op, Request, Status

from .worker import WorkerDied, WorkerProcess

Built = tuple[Any, float]  # a build and the seconds it took


def default_compile_workers() -> int:
    """Compile workers per timing worker: the cores less two (the timing worker and the sweep), up to 14. On
    the H200's 16 cores an exhaustive sweep of two unseen ranker buckets made 204 candidates a minute with 14
    and 125 with 8 (results/engine/2026-12-05-one-entry/); more than 14 is unmeasured."""
    return max(1, min(14, (os.cpu_count() or 1) - 2))


class BuildFailed(Exception):
    """A compile worker's verdict on a candidate: its status (``compile`` or ``timeout``) and why."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


class CompileAhead:
    """Candidates compiling ahead, each taken once by the measurement that needs it."""

    def __init__(self, workers: int, timeout: float):
        self.workers = max(workers, 1)
        self.timeout = timeout
        self._threads: ThreadPoolExecutor | None = None
        self._processes: _CompileWorkers | None = None
        self._futures: dict[str, Future[Built]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(req: Request) -> str:
        return json.dumps([req.kernel, dict(req.problem), dict(req.tiles)], sort_keys=True)

    def submit(self, req: Request) -> None:
        from kerneltune.registry import load_kernel

        kernel = load_kernel(req.kernel)
        with self._lock:
            if self.key(req) in self._futures:
                return
            if Capability.PORTABLE_BUILD in kernel.capabilities:
                if self._processes is None:
                    self._processes = _CompileWorkers(self.workers, self.timeout)
                future = self._processes.submit(req)
            else:
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="compile")
                future = self._threads.submit(_build_here, req)
            self._futures[self.key(req)] = future

    def take(self, req: Request) -> Future[Built] | None:
        with self._lock:
            return self._futures.pop(self.key(req), None)


def _build_here(req: Request) -> Built:
    from kerneltune.registry import load_kernel

    kernel = load_kernel(req.kernel)
    t0 = time.perf_counter()
    return kernel.build(kernel.problem(req.problem), req.tiles), time.perf_counter() - t0


class _CompileWorkers:
    """``n`` compile worker processes fed in submission order (the order the candidates will be measured).
    Each is started, restarted after a crash or a hang, and waited on by one thread of its own: a process
    ends with the thread that started it (``die_with_parent``), so that thread outlives every job."""

    def __init__(self, n: int, timeout: float):
        self.timeout = timeout
        self._jobs: queue.Queue[tuple[Request, Future[Built]]] = queue.Queue()
        env = {**os.environ, "KERNELTUNE_COMPILE_WORKERS": "0"}  # a compile worker compiles only its own job
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
        from kerneltune.registry import load_kernel

        try:
            reply = process.request(req.as_op(Op.EXPORT), self.timeout)
        except WorkerDied as e:
            if e.kind == "timeout":
                raise BuildFailed("timeout", f"compile: {e}") from None
            raise BuildFailed("compile", f"the compile worker died compiling it: {e}") from None
        if reply.get("status") != Status.OK:
            raise BuildFailed(str(reply.get("status", "compile")), str(reply.get("error", "")))
        t0 = time.perf_counter()
        kernel = cast(PortableBuild, load_kernel(req.kernel))
        built = kernel.import_build(base64.b64decode(reply["build"]))
        return built, float(reply["compile_s"]) + time.perf_counter() - t0
