"""The live runner: one timing worker process per GPU (or per launch group of GPUs).

Each worker compiles candidates ahead (in compile workers of its own, ``compile_ahead.py``) while it
verifies and times earlier ones; the sweep routes a candidate's compile and its measurement to the same
worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from kerneltune.files.paths import make_folder, user_cache_dir
from kerneltune.files.safe_io import MAX_TABLE_BYTES, loads_bounded_json, read_regular_bytes, write_atomic
from kerneltune.seams.limits import COMPILE_QUEUE
from kerneltune.seams.protocols import Capability
from kerneltune.seams.registry import load_backend, load_kernel
from kerneltune.seams.wire import Op, Reply, Request, StampsReply, failed

from .worker_process import WorkerDied, WorkerProcess, worker_env

_KEPT_CEILINGS = 8  # systems whose ceilings the user's cache keeps, newest first


def _ceilings_path() -> Path:
    return user_cache_dir() / "ceilings.json"


def _read_list(path: Path) -> list[dict[str, Any]]:
    """Stamp sets from ``path`` (one object or a list of them); [] if it is missing or unusable."""
    try:  # a cache, not a record: anything but a small regular file of JSON is no cache
        data = loads_bounded_json(read_regular_bytes(path, MAX_TABLE_BYTES, "ceilings cache"), str(path))
    except (OSError, ValueError):
        return []
    items = data if isinstance(data, list) else [data]
    return [d for d in items if isinstance(d, dict)]


def known_ceilings() -> list[dict[str, Any]]:
    """The ceilings measured on this machine before, each with the stamps of the system they were measured on."""
    return _read_list(_ceilings_path())


def remember_ceilings(stamps: dict[str, Any]) -> None:
    """Keep ``stamps`` (with their ceilings) first in the user's cache; a cache that cannot be written only
    costs the next run its ~20 s of measuring."""
    matched = [k for k in stamps.get("matched", ()) if k != "kernel_hash"]
    others = [d for d in known_ceilings() if any(d.get(k) != stamps.get(k) for k in matched)]
    kept = [stamps, *others][:_KEPT_CEILINGS]
    path = _ceilings_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(kept))  # whole or not at all, never through a link or into another's folder
    except OSError:
        pass


class _TimingWorker:
    """One worker process and the one thread that waits for its answers."""

    def __init__(self, env: Mapping[str, str], log_path: Path):
        self.process = WorkerProcess(env, log_path)
        self._thread = cf.ThreadPoolExecutor(1, thread_name_prefix=log_path.stem)

    def submit(self, req: Request, timeout: float, run_timeout: float | None = None) -> cf.Future[Reply]:
        return self._thread.submit(self._serve, req, timeout, run_timeout)

    def _serve(self, req: Request, timeout: float, run_timeout: float | None) -> Reply:
        try:
            return self.process.request(req, timeout, run_timeout)
        except WorkerDied as e:
            return failed(req.op, e.kind, str(e))

    def close(self) -> None:
        """The worker first, so a request in flight (Ctrl-C during a measurement) does not hold the
        close until its timeout; the answer thread then ends at once."""
        self.process.close()
        self._thread.shutdown(wait=True, cancel_futures=True)


def device_groups(gpus: Sequence[str], devices: int) -> list[str]:
    """The GPUs as timing routes: one each, or consecutive groups of ``devices`` for a launch group."""
    if devices <= 1:
        return list(gpus)
    if len(gpus) < devices or len(gpus) % devices:
        raise ValueError(f"gpus: a launch spans {devices} GPUs; {len(gpus)} given ({','.join(gpus)}) "
                         f"do not make whole groups")
    return [",".join(gpus[i:i + devices]) for i in range(0, len(gpus), devices)]


class LiveRunner:
    def __init__(self, kernel: str, routes: Sequence[str], compile_workers: int, log_dir: Path, cache_dir: Path | None,
                 run_timeout: float, reference_dir: Path | None = None):
        make_folder(log_dir)
        self.kernel = kernel
        self.log_dir = log_dir
        self.run_timeout = run_timeout
        # A portable build compiles in as many processes as there are compile workers; any other on threads of
        # the timing worker, whose interpreter they share with the checks and timed calls: one ahead.
        plugin = load_kernel(kernel)
        backend = load_backend(plugin.backend)
        portable = Capability.PORTABLE_BUILD in plugin.capabilities
        self.compiles_ahead = compile_workers if portable else min(compile_workers, 1)
        self.queues_ahead = max(compile_workers, COMPILE_QUEUE) if portable and compile_workers else self.compiles_ahead
        self.workers = [_TimingWorker(worker_env(backend, cache_dir, g, compile_workers, reference_dir),
                                      log_dir / f"timing-gpu{g}.log") for g in routes]
        self._stamps: dict[str, Any] | None = None

    @property
    def parallel_measures(self) -> int:
        return len(self.workers)

    def stamps(self) -> dict[str, Any]:
        """The timing worker's system stamps and ceilings. Ceilings measured before on a system with the same
        matched stamps are reused (measuring them takes ~20 s): those in the user's cache
        (``known_ceilings``), and a table's, which ``verify`` leaves as ``ceilings.json`` beside the logs."""
        if self._stamps is None:
            seeded = self.log_dir / "ceilings.json"
            known = [*_read_list(seeded), *known_ceilings()]
            reply = self.request(Request(Op.STAMPS, self.kernel, ceilings=tuple(known)))
            if not reply.ok:
                raise RuntimeError(f"a timing worker could not start: {reply.error}")
            self._stamps = dict(cast(StampsReply, reply).stamps)
            if any(k.endswith("_ceiling") for k in self._stamps):
                remember_ceilings(self._stamps)
        return self._stamps

    def prefetch(self, req: Request, route: int) -> None:
        """Start compiling the candidate in the worker of ``route`` (no answer comes back)."""
        if self.compiles_ahead and req.op in (Op.MEASURE, Op.CHECK):
            self.workers[route].process.send(req.as_op(Op.PREFETCH))

    def _submit(self, req: Request, route: int) -> cf.Future[Reply]:
        """A candidate's measurement (or check) has the compile timeout until its worker says the build is in hand,
        then the run timeout for its check and timing (a hang in either is killed that long after its compile);
        any other request (a playoff, the stamps) has both together."""
        if req.op in (Op.MEASURE, Op.CHECK):
            return self.workers[route].submit(req, req.settings.compile_timeout, self.run_timeout)
        return self.workers[route].submit(req, req.settings.compile_timeout + self.run_timeout)

    def measure(self, req: Request, route: int = 0) -> cf.Future[Reply]:
        return self._submit(req, route)

    def request(self, req: Request) -> Reply:
        return self._submit(req, 0).result()

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
