"""Replay: a recorded journal as the device. It answers each candidate with its recorded
measurement and the record's own stamps (kernel hash included), so that a table written from a
replay is stamped as what it is: a measurement made then, by that kernel source.

``journal_path`` is one journal, or a folder whose journals (one per worker of a shared study) are
merged as the shared study's table is. A record that lacks a tunable of ``config_defaults`` was
measured before that tunable existed, at its default value.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kerneltune.files.records import Record, config_key
from kerneltune.files.trust import warn_if_not_yours
from kerneltune.seams.wire import MeasureReply, Reply, Request, Status, failed

from .journal import merged_journals


class ReplayRunner:
    parallel_measures = 1
    # Nothing to compile: a strategy learns from every answer before it proposes again.
    compiles_ahead = queues_ahead = 0

    def __init__(self, journal_path: Path, seconds_per_candidate: float = 0.0,
                 config_defaults: Mapping[str, Any] | None = None, kernel: str | None = None):
        self.seconds_per_candidate = seconds_per_candidate
        if not journal_path.exists():
            raise FileNotFoundError(f"replay: no journal at {journal_path}")
        self.defaults = dict(config_defaults or {})
        for path in [journal_path, *sorted(journal_path.glob("*.jsonl"))] if journal_path.is_dir() else [journal_path]:
            warn_if_not_yours(path, "replay: the journal")
        self.recorded: dict[tuple[str, str], Record] = {}
        for (bucket, key), rec in sorted(merged_journals(journal_path).items(), key=lambda kv: kv[1].time or ""):
            self.recorded.setdefault((bucket, self._key(rec.config) if rec.config else key), rec)
        if not self.recorded:
            raise ValueError(f"replay: {journal_path} holds no records")
        others = sorted({str(r.kernel) for r in self.recorded.values()} - {kernel}) if kernel else []
        if others:  # another kernel's measurements would answer for configs of the same name
            raise ValueError(f"replay: {journal_path} holds records of kernel {', '.join(others)}, not of {kernel}")
        self.path = journal_path

    def _key(self, config: Mapping[str, Any]) -> str:
        return config_key({**self.defaults, **config})

    def stamps(self) -> dict[str, Any]:
        first = next(iter(self.recorded.values()))
        return {**first.stamped, "replayed_from": str(self.path)}

    def prefetch(self, req: Request, route: int) -> None:
        pass

    def measure(self, req: Request, route: int = 0) -> cf.Future[Reply]:
        done: cf.Future[Reply] = cf.Future()
        rec = self.recorded.get((req.bucket, self._key(req.config)))
        if rec is None:
            done.set_result(MeasureReply(Status.UNSUPPORTED, f"not in the replayed journal {self.path}"))
            return done
        time.sleep(self.seconds_per_candidate)
        # The record's own stamps: a folder of per-worker journals holds several GPUs' ceilings.
        stamps = {**rec.stamped, "replayed_from": str(self.path)}
        done.set_result(MeasureReply(rec.status, rec.error, timing=rec.timing, tflops=rec.tflops, flops=rec.flops,
                                     rel_error=rec.rel_error, accuracy=rec.accuracy, compile_s=rec.compile_s,
                                     pct_ceiling=rec.pct_ceiling, time=rec.time, kernel_hash=rec.kernel_hash,
                                     stamps=stamps))
        return done

    def request(self, req: Request) -> Reply:
        return failed(req.op, Status.UNSUPPORTED, f"a replay answers measurements only, not {str(req.op)!r}")

    def close(self) -> None:
        pass
