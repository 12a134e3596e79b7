"""The parent's side of a worker process: start it in its own process group, send it requests, read its
answers, kill it (``killpg``) on a hang, a crash or a broken protocol. The worker's side is ``worker.py``; a
timing worker's compile workers (``compile_ahead.py``) are started the same way."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from kerneltune.files.build_cache import ENV as BUILD_CACHE_ENV
from kerneltune.files.paths import user_cache_dir
from kerneltune.files.reference_cache import ENV as REFERENCE_CACHE_ENV
from kerneltune.seams.limits import FROZEN_WORKER_S
from kerneltune.seams.process import child_env
from kerneltune.seams.protocols import Backend
from kerneltune.seams.wire import REPLIES, Progress, Reply, Request, Status, WireError, progress_of

COMPILE_CACHE_ENV = "KERNELTUNE_COMPILE_CACHE"  # the folder a backend keeps compiled programs in (``prepare_worker``)
COMPILE_WORKERS_ENV = "KERNELTUNE_COMPILE_WORKERS"  # a timing worker's compile processes (0: it compiles itself)


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (its state ``T`` or ``t`` in ``/proc``)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


def _exit_text(code: int) -> str:
    """A process's end in words: ``signal 6, SIGABRT`` or ``exit code 3``."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {-code}, {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


class WorkerDied(RuntimeError):
    """The worker crashed, hung past its timeout or broke the protocol."""

    def __init__(self, kind: Status, message: str):
        super().__init__(message)
        self.kind = kind  # Status.TIMEOUT or Status.RUNTIME


def worker_env(backend: Backend, cache_dir: Path | None, devices: str | None, compile_workers: int = 0,
               reference_dir: Path | None = None) -> dict[str, str]:
    """A timing worker's environment: the backend's for ``devices`` (``Backend.worker_env``), and the process's
    own resources (compile cache, compile workers, the references' folder, the user's build cache unless
    ``KERNELTUNE_BUILD_CACHE`` names another folder, or none when empty). How a candidate is measured travels
    with its request (``wire.Request.settings``)."""
    env = {**os.environ, **backend.worker_env(devices)}
    env.setdefault(BUILD_CACHE_ENV, str(user_cache_dir() / "builds"))
    if reference_dir is not None:  # the checks' references, kept for the next worker (``reference_cache``)
        env[REFERENCE_CACHE_ENV] = str(reference_dir)
    env["PYTHONUNBUFFERED"] = "1"
    if cache_dir is not None:
        env[COMPILE_CACHE_ENV] = str(cache_dir)
    env[COMPILE_WORKERS_ENV] = str(compile_workers)
    return env


class WorkerProcess:
    """One worker subprocess and the request/response exchange with it."""

    def __init__(self, env: Mapping[str, str], log_path: Path | None = None):
        self.env = dict(env)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._write_lock = threading.RLock()
        self._closed = False
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        stderr = self.log_path.open("ab") if self.log_path else None  # None: this process's own stderr
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kerneltune.tuning.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=child_env(self.env), start_new_session=True,
            )
        finally:
            if stderr is not None:
                stderr.close()  # the worker holds its own copy; ours leaked one descriptor a worker
        self._lines = queue.Queue()
        self._reader = threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True)
        self._reader.start()

    @staticmethod
    def _pump(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes | None]) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(ValueError, OSError), proc.stdout:  # closed at the worker's end, by this thread
            for line in proc.stdout:
                lines.put(line)
        lines.put(None)

    def _next_line(self, proc: subprocess.Popen[bytes], deadline: float, late: str, phase: str) -> bytes | None:
        """The worker's next line before ``deadline``, else WorkerDied saying ``late``; a worker stopped (SIGSTOP,
        Ctrl-Z of its group, a frozen container) for ``FROZEN_WORKER_S`` is killed then rather than at the deadline
        (the compile's, or the run's), with ``phase`` opening the message."""
        stopped_since: float | None = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerDied(Status.TIMEOUT, late)
            try:
                return self._lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                pass
            if not _stopped(proc.pid):
                stopped_since = None
            elif stopped_since is None:
                stopped_since = time.monotonic()
            elif time.monotonic() - stopped_since >= FROZEN_WORKER_S:
                self.kill()
                raise WorkerDied(Status.TIMEOUT, f"{phase}the worker (process {proc.pid}) was stopped for "
                                                 f"{FROZEN_WORKER_S:.0f} s (SIGSTOP or a frozen group); killed")

    def _stderr_tail(self) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return self.log_path.read_bytes()[-1500:].decode(errors="replace")

    def send(self, req: Request) -> bool:
        """Write one request line (starting the worker if needed); False if the worker is gone.
        Alone, it is a request that gets no answer (compile-ahead)."""
        with self._write_lock:  # the sweep's thread and a pool thread may both write
            if self._closed:
                return False
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            assert self.proc is not None and self.proc.stdin is not None
            try:
                self.proc.stdin.write((json.dumps(req.to_json()) + "\n").encode())
                self.proc.stdin.flush()
                return True
            except BrokenPipeError:
                self.kill()
                return False

    def request(self, req: Request, timeout: float, run_timeout: float | None = None) -> Reply:
        """The worker's reply to ``req`` within ``timeout``. With ``run_timeout``, ``timeout`` bounds the compile
        only: once the worker says the build is in hand (``Progress.COMPILED``), its check and timing have
        ``run_timeout`` from then, and a timeout's message opens with the phase that hung."""
        if not self.send(req):
            raise WorkerDied(Status.RUNTIME, "worker exited before taking the request: " + self._stderr_tail())
        proc = self.proc  # close() may kill it from another thread meanwhile
        if proc is None:
            raise WorkerDied(Status.RUNTIME, "the worker was closed before it answered")
        deadline = time.monotonic() + timeout
        phase = "" if run_timeout is None else "compile: "
        late = (f"no answer within {timeout:.0f} s; worker killed" if run_timeout is None else
                f"{phase}no answer within {timeout:g} s (the compile timeout); worker killed")
        while True:
            line = self._next_line(proc, deadline, late, phase)
            if line is None:
                code = proc.wait()
                self.kill()
                tail = self._stderr_tail().strip()
                raise WorkerDied(Status.RUNTIME, f"worker died ({_exit_text(code)})"
                                                 + (f": {tail}" if tail else "; it wrote nothing on stderr"))
            try:
                obj = json.loads(line)
                event = progress_of(obj)
                if event is None:
                    reply = REPLIES[req.op].from_json(obj)
                    break
            except (ValueError, WireError) as e:  # not JSON, not an object, a field or status outside the protocol
                self.kill()
                raise WorkerDied(Status.RUNTIME, f"the worker broke the protocol ({e}): {line[:200]!r}") from None
            if event == Progress.COMPILED and run_timeout is not None:  # the run's clock starts now
                deadline = time.monotonic() + run_timeout
                phase = "check or timing: "
                late = f"{phase}no answer within {run_timeout:g} s of its compile (the run timeout); worker killed"
        if reply.restart:
            self.kill()
        return reply

    def kill(self) -> None:
        proc, self.proc = self.proc, None  # taken once: the waiting thread and close() may both kill
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=5)  # it closes the worker's stdout at the end it now meets

    def close(self) -> None:
        """Kill the worker for good: a request in flight ends at once (as a dead worker) and no later
        request starts another."""
        with self._write_lock:
            self._closed = True
        self.kill()
