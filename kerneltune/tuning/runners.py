"""Runners answer compile and measure requests: live worker pools, or a recorded journal."""

from __future__ import annotations

import concurrent.futures as cf
import json
import queue
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .journal import config_key, merged_journals
from .worker import WorkerDied, WorkerProcess, worker_env


class WorkerPool:
    """N worker processes, each request served by an idle one; a dead one is replaced."""

    def __init__(self, envs: Sequence[Mapping[str, str]], log_dir: Path, role: str):
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        self._workers = [WorkerProcess(env, log_dir / f"{role}-{i}.log") for i, env in enumerate(envs)]
        for worker in self._workers:
            self._idle.put(worker)
        self._pool = cf.ThreadPoolExecutor(max(len(envs), 1), thread_name_prefix=role)

    def send(self, req: Mapping[str, Any]) -> None:
        """A request that gets no answer, written at once even while the worker is busy (its
        reader thread takes it); for pools of one worker, as each GPU's is."""
        self._workers[0].send(req)

    def submit(self, req: Mapping[str, Any], timeout: float) -> cf.Future[dict[str, Any]]:
        return self._pool.submit(self._serve, dict(req), timeout)

    def _serve(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        worker = self._idle.get()
        try:
            return worker.request(req, timeout)
        except WorkerDied as e:
            return {"status": e.kind, "error": str(e)}
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        while not self._idle.empty():
            self._idle.get().kill()


class LiveRunner:
    """One timing worker per GPU; with ``compile_threads`` > 0 each compiles candidates ahead
    on its own threads (a JAX executable cannot leave the process that compiled it) while it
    verifies and times earlier ones; with 0 it compiles each candidate when it comes to it."""

    def __init__(self, gpus: Sequence[str], compile_threads: int, log_dir: Path, cache_dir: Path,
                 compile_timeout: float, run_timeout: float):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir
        self.compile_timeout = compile_timeout
        self.run_timeout = run_timeout
        self.compile_ahead = compile_threads > 0
        self.pools = [WorkerPool([worker_env(cache_dir, g, compile_threads)], log_dir, f"timing-gpu{g}")
                      for g in gpus]
        self._next = 0
        self._stamps: dict[str, Any] | None = None

    @property
    def parallel_measures(self) -> int:
        return len(self.pools)

    def stamps(self) -> dict[str, Any]:
        """The timing worker's system stamps; the measured ceilings are kept beside the logs and
        reused while GPU, SM count and driver are the same (measuring them takes ~20 s)."""
        if self._stamps is None:
            cache = self.log_dir / "ceilings.json"
            known = json.loads(cache.read_text()) if cache.exists() else None
            reply = self.pools[0].submit({"op": "stamps", "ceilings": known}, self.compile_timeout).result()
            if reply.get("status") != "ok":
                raise RuntimeError(f"a timing worker could not start: {reply.get('error')}")
            self._stamps = reply["stamps"]
            if "bf16_tflops_ceiling" in self._stamps:
                cache.write_text(json.dumps(self._stamps))
        return self._stamps

    def compile(self, req: Mapping[str, Any]) -> cf.Future[dict[str, Any]]:
        """Route the candidate to a GPU's worker (round robin) and start compiling it there."""
        route = self._next % len(self.pools)
        self._next += 1
        if self.compile_ahead and req.get("op", "measure") == "measure":
            self.pools[route].send({**req, "op": "prefetch"})
        done: cf.Future[dict[str, Any]] = cf.Future()
        done.set_result({"status": "ok", "route": route})
        return done

    def measure(self, req: Mapping[str, Any], route: int = 0) -> cf.Future[dict[str, Any]]:
        return self.pools[route].submit({"op": "measure", **req}, self.compile_timeout + self.run_timeout)

    def timing_request(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """Any other request to the first timing worker, answered synchronously."""
        return self.pools[0].submit(req, self.compile_timeout + self.run_timeout).result()

    def close(self) -> None:
        for pool in self.pools:
            pool.close()


class ReplayRunner:
    """Answers from a recorded journal: strategies compared and the tool shown without a GPU.

    ``journal_path`` is one journal, or a folder whose journals (one per worker of a shared
    study) are merged as the shared study's table is (``merged_journals``). A record that lacks a
    tunable of ``tile_defaults`` was measured before that tunable existed, at its default value.
    """

    def __init__(self, journal_path: Path, seconds_per_candidate: float = 0.0,
                 tile_defaults: Mapping[str, Any] | None = None):
        self.seconds_per_candidate = seconds_per_candidate
        if not journal_path.exists():
            raise FileNotFoundError(f"replay: no journal at {journal_path}")
        self.defaults = dict(tile_defaults or {})
        self.recorded = {}
        for (bucket, key), rec in sorted(merged_journals(journal_path).items(), key=lambda kv: kv[1].get("time", "")):
            self.recorded.setdefault((bucket, self._key(rec["tiles"]) if "tiles" in rec else key), rec)
        if not self.recorded:
            raise ValueError(f"replay: {journal_path} holds no records")
        self.path = journal_path
        self.parallel_measures = 1

    def _key(self, tiles: Mapping[str, Any]) -> str:
        return config_key({**self.defaults, **tiles})

    def stamps(self) -> dict[str, Any]:
        first = next(iter(self.recorded.values()))
        return {**first.get("stamps", {}), "replayed_from": str(self.path)}

    def compile(self, req: Mapping[str, Any]) -> cf.Future[dict[str, Any]]:
        done: cf.Future[dict[str, Any]] = cf.Future()
        done.set_result({"status": "ok", "compile_s": 0.0})
        return done

    def measure(self, req: Mapping[str, Any], route: int = 0) -> cf.Future[dict[str, Any]]:
        done: cf.Future[dict[str, Any]] = cf.Future()
        rec = self.recorded.get((req["bucket"], self._key(req["tiles"])))
        if rec is None:
            done.set_result({"status": "unsupported", "error": f"not in the replayed journal {self.path}"})
        else:
            keep = ("status", "error", "timing", "tflops", "flops", "rel_error", "compile_s", "pct_ceiling", "time")
            time.sleep(self.seconds_per_candidate)
            # The record's own stamps: a folder of per-worker journals holds several GPUs' ceilings.
            stamps = {**rec.get("stamps", {}), "replayed_from": str(self.path)}
            done.set_result({**{k: rec[k] for k in keep if k in rec}, "stamps": stamps})
        return done

    def close(self) -> None:
        pass
