"""The append-only journal of finished candidates: one JSON line each, flushed and fsynced.

A ``kill -9`` at any moment loses at most the candidate in flight; a torn last
line (the kill landed mid-write) is ignored on reading and the file is
repaired before the next append.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from kerneltune.tables.stamps import now_stamp

log = logging.getLogger("kerneltune.journal")


def pct_of_ceiling(record: Mapping[str, Any]) -> float | None:
    """Useful TFLOP/s as % of the bf16 matmul ceiling measured on the same GPU (in the stamps)."""
    ceiling = (record.get("stamps") or {}).get("bf16_tflops_ceiling")
    tflops = record.get("tflops")
    return 100.0 * tflops / ceiling if tflops and ceiling else None


def make_record(base: Mapping[str, Any], tiles: Mapping[str, Any], reply: Mapping[str, Any],
                **extra: Any) -> dict[str, Any]:
    """One finished candidate as journaled: the bucket's fields, the config, the worker's reply
    (less its worker-restart marker), its time, and % of the measured ceiling."""
    rec = {**base, "key": config_key(tiles), "tiles": dict(tiles), **reply, **extra}
    rec["time"] = reply.get("time") or now_stamp()
    rec.pop("restart", None)
    if (pct := pct_of_ceiling(rec)) is not None:
        rec["pct_ceiling"] = pct
    return rec


def merged_journals(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(bucket, config key) -> record over one journal or a folder of them (one per worker of a
    shared study): the earliest measurement of a config wins, then the journal's name."""
    paths = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    best: dict[tuple[str, str], tuple[tuple[str, str], dict[str, Any]]] = {}
    for p in paths:
        for r in Journal(p).records():
            rank = (r.get("time", ""), str(p))
            key = (r["bucket"], r["key"])
            if key not in best or rank < best[key][0]:
                best[key] = (rank, r)
    return {k: r for k, (_, r) in best.items()}


def config_key(tiles: Mapping[str, Any]) -> str:
    """Canonical text of a config: sorted JSON, the identity of a candidate in a bucket."""
    return json.dumps(dict(tiles), sort_keys=True, separators=(",", ":"))


class JournalError(ValueError):
    pass


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.path) + ".lock")

    def records(self) -> Iterator[dict[str, Any]]:
        """Every complete record; a torn final line is skipped, any other bad line is an error."""
        if not self.path.exists():
            return
        lines = self.path.read_bytes().split(b"\n")
        for n, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError:
                if n == len(lines):  # the last line, not newline-terminated: torn by a kill
                    return
                raise JournalError(f"{self.path}:{n}: corrupt journal line") from None

    def done(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(bucket, config key) -> record, the last one winning."""
        return {(r["bucket"], r["key"]): r for r in self.records()}

    def append(self, record: Mapping[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            self._repair_torn_tail()
            with self.path.open("ab") as f:
                f.write(line.encode())
                f.flush()
                os.fsync(f.fileno())

    def _repair_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            data = f.seek(0) or f.read()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
        log.warning("%s: dropped a torn last line of %d bytes (a write cut by a kill); the candidate it held "
                    "is measured again", self.path, len(data) - keep)
