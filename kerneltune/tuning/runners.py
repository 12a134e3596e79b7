"""The live runner: one timing worker process per GPU (or per launch group of GPUs).

Each worker compiles candidates ahead on its own threads (a JAX executable cannot leave the process
that compiled it) while it verifies and times earlier ones; the sweep routes a candidate's compile
and its measurement to the same worker.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .worker import WorkerDied, WorkerProcess, worker_env


class _TimingWorker:
    """One worker process and the one thread that waits for its answers."""

    def __init__(self, env: Mapping[str, str], log_path: Path):
        self.process = WorkerProcess(env, log_path)
        self._thread = cf.ThreadPoolExecutor(1, thread_name_prefix=log_path.stem)

    def submit(self, req: Mapping[str, Any], timeout: float) -> cf.Future[dict[str, Any]]:
        return self._thread.submit(self._serve, dict(req), timeout)

    def _serve(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            return self.process.request(req, timeout)
        except WorkerDied as e:
            return {"status": e.kind, "error": str(e)}

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
    def __init__(self, kernel: str, routes: Sequence[str], compile_threads: int, log_dir: Path, cache_dir: Path,
                 compile_timeout: float, run_timeout: float):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.kernel = kernel
        self.log_dir = log_dir
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        self.compiles_ahead = compile_threads > 0
        self.workers = [_TimingWorker(worker_env(cache_dir, g, compile_threads), log_dir / f"timing-gpu{g}.log")
                        for g in routes]
        self._stamps: dict[str, Any] | None = None

    @property
    def parallel_measures(self) -> int:
        return len(self.workers)

    def stamps(self) -> dict[str, Any]:
        """The timing worker's system stamps; the measured ceilings are kept beside the logs and
        reused while the matched stamps are the same (measuring them takes ~20 s)."""
        if self._stamps is None:
            cache = self.log_dir / "ceilings.json"
            known = json.loads(cache.read_text()) if cache.exists() else None
            reply = self.request({"op": "stamps", "kernel": self.kernel, "ceilings": known})
            if reply.get("status") != "ok":
                raise RuntimeError(f"a timing worker could not start: {reply.get('error')}")
            self._stamps = reply["stamps"]
            if any(k.endswith("_ceiling") for k in self._stamps):
                cache.write_text(json.dumps(self._stamps))
        return self._stamps

    def prefetch(self, req: Mapping[str, Any], route: int) -> None:
        """Start compiling the candidate in the worker of ``route`` (no answer comes back)."""
        if self.compiles_ahead and req.get("op", "measure") == "measure":
            self.workers[route].process.send({**req, "op": "prefetch"})

    def measure(self, req: Mapping[str, Any], route: int = 0) -> cf.Future[dict[str, Any]]:
        return self.workers[route].submit({"op": "measure", **req}, self.compile_timeout + self.run_timeout)

    def request(self, req: Mapping[str, Any]) -> dict[str, Any]:
        return self.workers[0].submit(req, self.compile_timeout + self.run_timeout).result()

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
