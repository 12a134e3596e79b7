"""Recording the traffic: with recording on, each lookup counts its problem, and how it was served, in the miss
ledger (``ledger.py``), so that ``kerneltune sweep KERNEL --from-ledger`` can tune what the traffic met.

Off by default; on with ``KERNELTUNE_RECORD=1`` in the environment (read when kerneltune's tables are first
imported) or ``kerneltune.record()``. On a lookup's path it is a dict update under a lock (``note``; about a
microsecond, ``results/engine/2026-12-07-ledger-cost/``). A problem is written to the ledger the first time this
process meets it, served that way (a merge under the ledger's lock: milliseconds, once; past ``AT_ONCE`` new
problems a process, at the next flush); the counts of the calls since are merged at exit, at the next new problem
written, or by ``flush()``. A process killed by SIGKILL loses the calls
counted since its last write; a forked child starts counting afresh (its parent's counts are its parent's).
Nothing here raises into a launch: a ledger that cannot be written is logged once and the counts kept for the
next write.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filelock import Timeout

from kerneltune.files import logs

from .ledger import LedgerError, LedgerRecord, Served, add_to_ledger, ledger_folder, ledger_path

__all__ = ["Served", "flush", "is_on", "note", "record"]

log = logging.getLogger("kerneltune.tables")

# (kernel, kernel hash, device kind, tables state, problem items, served)
_Key = tuple[str, str, str, tuple[tuple[str, int], ...], tuple[tuple[str, Any], ...], Served]

_on = os.environ.get("KERNELTUNE_RECORD", "").strip() not in ("", "0")
_folder: Path | None = None  # None: ``ledger_folder()`` when written
_lock = threading.Lock()
_pending: dict[_Key, list[Any]] = {}  # counted since the last write: [calls, first time, last time]
_written: set[_Key] = set()  # written at least once by this process: no write at its next call
# A process writes its first ``AT_ONCE`` new problems as it meets them; past that (a kernel given a new scalar at
# every call, a seed, would write at every call) new ones wait for a flush, which comes at the latest when
# ``MAX_PENDING`` problems are waiting (the memory they hold is bounded too).
AT_ONCE = 256
MAX_PENDING = 10_000


def record(on: bool = True, folder: Path | str | None = None) -> None:
    """Turn recording on (into ``folder``, default the user's cache's ``ledger/``) or off; off writes what was
    counted."""
    global _on, _folder
    if not on:
        flush()
    _on, _folder = on, Path(folder) if folder is not None else None


def is_on() -> bool:
    return _on


def note(kernel: str, kernel_hash: str, device_kind: str, tables: tuple[tuple[str, int], ...],
         problem: Mapping[str, Any], served: Served) -> None:
    """Count one lookup (``tables``: the table files it read, with their modification times)."""
    if not _on:
        return
    try:
        key = (kernel, kernel_hash, device_kind, tables, tuple(problem.items()), served)
        now = time.time()
        with _lock:
            slot = _pending.get(key)
            if slot is not None:
                slot[0] += 1
                slot[2] = now
                return
            _pending[key] = [1, now, now]
            if (key in _written or len(_written) >= AT_ONCE) and len(_pending) < MAX_PENDING:
                return
        flush()
    except Exception as e:  # an unhashable field, anything: said once, never raised into a launch
        logs.log_once(log, f"{kernel}: this call is not recorded in the miss ledger ({type(e).__name__}: {e})")


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def tables_digest(tables: tuple[tuple[str, int], ...]) -> str:
    """The tables a call was served under, in a word: a digest of their paths and modification times."""
    if not tables:
        return "none"
    return hashlib.sha256(repr(tables).encode()).hexdigest()[:12]


def flush() -> None:
    """Merge what was counted since the last write into the ledgers; what cannot be written is kept for the next
    time and said once."""
    with _lock:
        batch = dict(_pending)
        _pending.clear()
    if not batch:
        return
    folder = _folder or ledger_folder()
    by_file: dict[tuple[str, str], list[tuple[_Key, LedgerRecord]]] = {}
    for key, (count, first, last) in batch.items():
        kernel, kernel_hash, device_kind, tables, problem, served = key
        rec = LedgerRecord(kernel_hash, tables_digest(tables), dict(problem), served, count, _when(first), _when(last))
        by_file.setdefault((kernel, device_kind), []).append((key, rec))
    for (kernel, device_kind), items in by_file.items():
        try:
            path = ledger_path(folder, device_kind, kernel)
            add_to_ledger(path, kernel, device_kind, [r for _, r in items])
        except (OSError, ValueError, Timeout) as e:  # LedgerError and a table name's TableError are ValueErrors
            why = str(e) if isinstance(e, LedgerError | Timeout) else f"{type(e).__name__}: {e}"
            logs.log_once(log, f"{kernel}: the miss ledger in {folder} is not written ({why}); calls are still "
                               f"counted and written at the next chance")
            with _lock:
                for key, rec in items:
                    slot = _pending.setdefault(key, [0, time.time(), 0.0])
                    slot[0] += rec.count
                    slot[1] = min(slot[1], batch[key][1])
                    slot[2] = max(slot[2], batch[key][2])
            continue
        _written.update(key for key, _ in items)


def _forget_in_child() -> None:
    """A forked child's counts start at zero: its parent's pending calls are the parent's to write."""
    global _lock
    _lock = threading.Lock()
    _pending.clear()


atexit.register(flush)
os.register_at_fork(after_in_child=_forget_in_child)
