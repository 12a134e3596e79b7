"""The miss ledger: the problems a kernel's lookups met at run time, how each was served and how often.

One JSON file per device kind and kernel (``FOLDER/<device-kind>/<kernel>.json``, the folder by default
``ledger/`` in the user's cache), one record per (kernel source, tables state, problem, how served) with a
count and the first and last time seen. Many processes of one app add to it at once: each merges its counts
under a lock into a file replaced whole (a temporary file, fsync, rename), so a reader sees the old ledger or
the new one and no count is lost. It is bounded (``MAX_RECORDS``; the least recently seen records go first,
their calls counted in ``dropped``) and read as every data file is (``safe_io``): a regular file within a size,
JSON within bounds, each record checked, a bad one named and left out.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from filelock import FileLock

from kerneltune.files.paths import make_folder, user_cache_dir
from kerneltune.files.records import finite
from kerneltune.files.safe_io import (
    MAX_LEDGER_BYTES,
    BadJson,
    UnsafeFile,
    brief,
    loads_bounded_json,
    read_regular_bytes,
)

from .store import table_path

SCHEMA = 1
MAX_RECORDS = 10_000  # problems (with how served) one ledger keeps: a service meets tens to thousands of shapes
MAX_FIELD_CHARS = 16_384  # a problem's string field (a Triton call's arguments and grids is a few KiB)
LOCK_TIMEOUT_S = 10.0  # a writer waits this long for another's merge (each takes milliseconds), then keeps its counts


class Served(StrEnum):
    """How a lookup served a problem: its own bucket's winner, its own bucket's measured fallback (the winner
    refused), another bucket's entry, or no entry at all."""

    TUNED = "tuned"
    FALLBACK = "fallback"
    NEIGHBOUR = "neighbour"
    HEURISTIC = "heuristic"


class LedgerError(ValueError):
    """A ledger file that cannot be used, with the file named."""


def ledger_folder() -> Path:
    """Where the runtime records: ``ledger/`` in the user's cache (``$KERNELTUNE_CACHE``, else
    ``~/.cache/kerneltune`` on Linux)."""
    return user_cache_dir() / "ledger"


def ledger_path(folder: Path, device_kind: str, kernel: str) -> Path:
    """The ledger of ``kernel`` on ``device_kind``; both must be plain names, as a table's are."""
    return table_path(folder, device_kind, kernel)


@dataclass(frozen=True)
class LedgerRecord:
    """One problem as the traffic met it: under which kernel source and tables, served how, how often, when."""

    kernel_hash: str
    tables: str  # a digest of the table files the lookup read and their times ("none": no table)
    problem: Mapping[str, Any]
    served: Served
    count: int
    first_seen: str  # UTC, ISO 8601 to the second: they sort as text
    last_seen: str

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kernel_hash, self.tables, json.dumps(dict(self.problem), sort_keys=True), str(self.served))

    def to_json(self) -> dict[str, Any]:
        return {"kernel_hash": self.kernel_hash, "tables": self.tables, "problem": dict(self.problem),
                "served": str(self.served), "count": self.count, "first_seen": self.first_seen,
                "last_seen": self.last_seen}

    @classmethod
    def from_json(cls, data: Any) -> LedgerRecord:
        """A record from its JSON, every field checked (a ValueError saying which is wrong)."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        for name in ("kernel_hash", "tables", "first_seen", "last_seen"):
            if not isinstance(data.get(name), str) or len(data[name]) > 64:
                raise ValueError(f"{name}: {brief(data.get(name))} is not a short string")
        problem = data.get("problem")
        if not isinstance(problem, dict) or not problem or len(problem) > 64:
            raise ValueError("problem: missing, empty, or not an object of at most 64 fields")
        for k, v in problem.items():
            if type(v) not in (str, int, float, bool) or (isinstance(v, str) and len(v) > MAX_FIELD_CHARS) or (
                    type(v) is float and not finite(v)):
                name = k if len(k) <= 64 and k.isprintable() else brief(k)
                raise ValueError(f"problem.{name}: {brief(v)} is not a string, finite number or bool")
        if data.get("served") not in set(Served):
            raise ValueError(f"served: {brief(data.get('served'))} is not one of {', '.join(Served)}")
        count = data.get("count")
        if type(count) is not int or count < 1:
            raise ValueError(f"count: {brief(count)} is not a positive integer")
        return cls(data["kernel_hash"], data["tables"], problem, Served(data["served"]), count, data["first_seen"],
                   data["last_seen"])


@dataclass(frozen=True)
class Ledger:
    """A ledger file as read: its records, the calls of records dropped to stay within bounds, and the records
    left out for breaking the schema (named)."""

    path: Path
    kernel: str
    device_kind: str
    records: tuple[LedgerRecord, ...] = ()
    dropped: int = 0
    skipped: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "kernel": self.kernel, "device_kind": self.device_kind, "dropped": self.dropped,
                "records": [r.to_json() for r in self.records]}


def read_ledger(path: Path) -> Ledger | None:
    """The ledger at ``path``, None if absent; a LedgerError naming the file if it cannot be used."""
    try:
        data = read_regular_bytes(path, MAX_LEDGER_BYTES, "miss ledger")
    except FileNotFoundError:
        return None
    except UnsafeFile as e:
        raise LedgerError(str(e)) from None
    except OSError as e:
        raise LedgerError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    try:
        top = loads_bounded_json(data, str(path))
    except BadJson as e:
        raise LedgerError(str(e)) from None
    if not isinstance(top, dict) or top.get("schema") != SCHEMA:
        raise LedgerError(f"{path}: schema is {brief(top.get('schema') if isinstance(top, dict) else None)}, "
                          f"this kerneltune reads ledgers of schema {SCHEMA}")
    kernel, device = top.get("kernel"), top.get("device_kind")
    if not isinstance(kernel, str) or not isinstance(device, str):
        raise LedgerError(f"{path}: fields 'kernel' and 'device_kind' must be strings")
    raw, dropped = top.get("records"), top.get("dropped", 0)
    if not isinstance(raw, list) or len(raw) > MAX_RECORDS:
        raise LedgerError(f"{path}: field 'records' is not a list of at most {MAX_RECORDS} records")
    if type(dropped) is not int or dropped < 0:
        raise LedgerError(f"{path}: dropped: {brief(dropped)} is not a count")
    records, skipped = [], []
    for i, item in enumerate(raw):
        try:
            records.append(LedgerRecord.from_json(item))
        except ValueError as e:
            skipped.append(f"{path}: record {i}: {e}; left out")
    return Ledger(path, kernel, device, tuple(records), dropped, tuple(skipped))


def merge(records: Iterable[LedgerRecord], more: Iterable[LedgerRecord],
          limit: int = MAX_RECORDS) -> tuple[list[LedgerRecord], int]:
    """``records`` with ``more`` added (counts summed, the first and last times widened), and the calls of the
    records dropped to keep ``limit``: the least recently seen, then the least called."""
    merged: dict[tuple[Any, ...], LedgerRecord] = {}
    for r in (*records, *more):
        old = merged.get(r.key)
        merged[r.key] = r if old is None else LedgerRecord(
            r.kernel_hash, r.tables, r.problem, r.served, old.count + r.count, min(old.first_seen, r.first_seen),
            max(old.last_seen, r.last_seen))
    kept = sorted(merged.values(), key=lambda r: (r.last_seen, r.count), reverse=True)
    return kept[:limit], sum(r.count for r in kept[limit:])


def add_to_ledger(path: Path, kernel: str, device_kind: str, more: list[LedgerRecord]) -> Ledger:
    """Merge ``more`` into the ledger at ``path`` under its lock (filelock's Timeout after ``LOCK_TIMEOUT_S``); a
    LedgerError, and nothing written, where the ledger there cannot be used or holds records it would drop."""
    make_folder(path.parent)
    if path.is_symlink():
        raise LedgerError(f"{path}: a link to {os.readlink(path)}; a ledger is written only as a file of its own "
                          f"folder (remove the link)")
    with FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S):
        old = read_ledger(path) or Ledger(path, kernel, device_kind)
        if old.skipped:
            raise LedgerError(f"{path}: not rewritten, it holds records that break the schema ({old.skipped[0]}); "
                              f"remove the file to record again")
        records, dropped = merge(old.records, more, MAX_RECORDS)
        ledger = Ledger(path, kernel, device_kind, tuple(records), old.dropped + dropped)
        _write_atomic(path, ledger.to_json())
    return ledger


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    """Written beside its final path, synced, then renamed over it: a reader sees the old ledger or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ledger_files(where: Path) -> list[Path]:
    """The ledger files ``where`` names: itself if a file, else every ``<device-kind>/<kernel>.json`` under it."""
    if where.is_dir():
        return sorted(where.glob("*/*.json"))
    if not where.exists():
        raise LedgerError(f"{where}: no ledger there (record one with KERNELTUNE_RECORD=1; it lands in "
                          f"{ledger_folder()})")
    return [where]


def read_ledgers(where: Path, kernel: str | None = None) -> list[Ledger]:
    """Every usable ledger ``where`` names (of ``kernel`` only, if given); a LedgerError for one that is not."""
    out = []
    for path in ledger_files(where):
        ledger = read_ledger(path)
        if ledger is not None and (kernel is None or ledger.kernel == kernel):
            out.append(ledger)
    return out
