"""Run-time lookup of a tuned config: exact bucket, else the nearest valid one, else none.

An entry is valid only when its stamps match the running system and, when the
caller says what it can launch, its config is one the kernel accepts for this
problem (a nearest entry tuned for another cap may carry a field this problem
refuses); the entry's fallbacks, measured in the same sweep, serve then before
any other entry. Every miss (no table, foreign stamps, no bucket, refused config) is
logged once, so a launch never uses a config tuned elsewhere without saying so.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kerneltune.files import logs
from kerneltune.files.records import Entry, Measured

from . import recording
from .locations import table_roots
from .recording import Served
from .stamps import mismatches
from .store import TableError, read_table, table_path

log = logging.getLogger("kerneltune.tables")


def log_once(message: str, level: int = logging.WARNING) -> None:
    """Log a table miss (or, at INFO, a note on the entry used) once per process: a lookup runs at every trace."""
    logs.log_once(log, message, level)


def bucket_key(bucket: Mapping[str, Any]) -> str:
    """A stable text key: 'field=value' pairs in field order."""
    return ",".join(f"{k}={bucket[k]}" for k in bucket)


def _categorical_mismatches(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    """Differing non-numeric fields: between equally distant buckets, the one that shares the
    categories (a cap method, say) is the better proxy."""
    return sum(1 for k in a if a[k] != b.get(k) and not isinstance(a[k], int | float))


def _key_like(entry_bucket: Mapping[str, Any], wanted: Mapping[str, Any]) -> str:
    """An entry's bucket key with its fields in the order of the wanted bucket's (tables store them
    sorted), so that the two read side by side in a message."""
    return bucket_key({k: entry_bucket[k] for k in wanted if k in entry_bucket} | entry_bucket)


def bucket_distance(a: Mapping[str, Any], b: Mapping[str, Any], hard: tuple[str, ...]) -> float:
    """inf if a hard field differs; else 1 per differing soft field plus |log2 ratio| per number."""
    if a.keys() != b.keys():
        return math.inf
    d = 0.0
    for key in a:
        x, y = a[key], b[key]
        if x == y:
            continue
        if key in hard:
            return math.inf
        if isinstance(x, int | float) and isinstance(y, int | float) and x > 0 and y > 0:
            try:
                d += abs(math.log2(x) - math.log2(y))  # each alone: a ratio of a 10**400 overflows a float
            except (OverflowError, ValueError):  # an infinity: as far as a number can be
                d += math.inf
        else:
            d += 1.0
    return d


# Why an entry's winner or fallback (its ``config``, and the ``accuracy`` measured of it where the kernel
# records one) cannot be launched for the problem at hand, or None.
Refusal = Callable[[Entry | Measured], str | None]
# How alike an entry's bucket is to the problem's beyond the distance (0: most alike): a kernel's own
# knowledge, e.g. that one cap method is another's approximation, which breaks ties between entries.
Kinship = Callable[[dict[str, Any]], int]


def _changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={new[k]}" for k in new if old.get(k) != new[k])


def _accepted(entry: Entry, refuses: Refusal | None) -> tuple[Entry | None, str | None]:
    """The entry's winner, else its fastest fallback, else its fastest runner-up, that ``refuses`` accepts (None
    if none), and why the winner was refused: each was measured in the entry's sweep, which no guess was."""
    why = refuses(entry) if refuses is not None else None
    if why is None:
        return entry, None
    measured = sorted((*(entry.fallbacks or ()), *(entry.runner_ups or ())), key=lambda item: item.median_us)
    for fb in measured:
        if refuses(fb) is None:
            # What was measured of the fallback (config, time, spread, errors) replaces the winner's.
            return entry.replace(config=fb.config, median_us=fb.median_us, spread=fb.spread, accuracy=fb.accuracy,
                                 program_digest=fb.program_digest), why
    return None, why


def select_entry(table: dict[str, Any], bucket: dict[str, Any], running: dict[str, Any],
                 kernel_hash: str, hard: tuple[str, ...],
                 refuses: Refusal | None = None,
                 kin: Kinship | None = None) -> tuple[Entry | None, list[str]]:
    """The entry to use for ``bucket`` and the misses met on the way (for logging): the nearest
    entry with matching stamps whose config, or one of its fallbacks, ``refuses`` (if given) accepts;
    between equally near ones, the closest kin, then the one sharing the most categories."""
    typed = {"entries": {k: e if isinstance(e, Entry) else Entry.build(e) for k, e in table["entries"].items()}}
    entry, misses, _ = _select(typed, bucket, running, kernel_hash, hard, refuses, kin)
    return entry, misses


def _select(table: dict[str, Any], bucket: dict[str, Any], running: dict[str, Any], kernel_hash: str,
            hard: tuple[str, ...], refuses: Refusal | None,
            kin: Kinship | None) -> tuple[Entry | None, list[str], Served]:
    """``select_entry``, and how the problem was served (the miss ledger's word for it)."""
    want = {**running, "kernel_hash": kernel_hash}
    misses: list[str] = []
    valid: list[Entry] = []
    for entry in table["entries"].values():
        bad = mismatches(entry.stamps, want)
        if entry.replayed_from is not None:  # a replay's record of another run, never measured here
            bad = [f"written by a replay of {entry.replayed_from}", *bad]
        if bad:
            if not math.isinf(bucket_distance(bucket, entry.bucket, hard)):  # a candidate, passed over
                misses.append(f"entry {_key_like(entry.bucket, bucket)} not used for {bucket_key(bucket)}: "
                              + "; ".join(bad))
            continue
        valid.append(entry)
    ranked = sorted(((bucket_distance(bucket, e.bucket, hard), kin(e.bucket) if kin is not None else 0,
                      _categorical_mismatches(bucket, e.bucket), i) for i, e in enumerate(valid)))
    for dist, _, _, i in ranked:
        if math.isinf(dist):
            break
        entry, why = _accepted(valid[i], refuses)
        name = _key_like(valid[i].bucket, bucket)
        if entry is None:
            misses.append(f"entry {name} not used for {bucket_key(bucket)}: {why}")
            continue
        if why is not None:
            winner_us = valid[i].median_us
            against = f" against the winner's {winner_us:.1f} µs" if isinstance(winner_us, int | float) else ""
            misses.append(f"entry {name}'s winner not used for {bucket_key(bucket)}: {why}; using its fastest "
                          f"measured config with {_changes(valid[i].config, entry.config)} "
                          f"({entry.median_us:.1f} µs{against})")
        if dist > 0:
            misses.append(f"bucket {bucket_key(bucket)} not tuned; using nearest {_key_like(entry.bucket, bucket)}")
        served = Served.NEIGHBOUR if dist > 0 else Served.FALLBACK if why is not None else Served.TUNED
        return entry, misses, served
    if valid:
        accepts = " has a config this problem accepts" if refuses is not None else ""
        misses.append(f"no valid entry shares {', '.join(hard)} with {bucket_key(bucket)}" + (f" and{accepts}"
                      if accepts else "") if hard else f"no valid entry for {bucket_key(bucket)}{accepts}")
    return None, misses, Served.HEURISTIC


def file_identity(st: Any) -> tuple[int, ...]:
    """What tells one file at a path from another: the inode (a table renamed into place is a new one), its size,
    and its modification and change times (a file rewritten in place with its old modification time restored, or
    copied with ``cp -p``, still has a new change time, which no user can set)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_cached(path: Path) -> dict[str, Any] | None:
    """The table, read again only when its file is replaced or changes (launches call this on every call;
    ``file_identity``); a file that cannot be used is not read again either until then (a broken 64 MiB table cost
    every launch its read)."""
    return _read_stamped(path)[0]


def _read_stamped(path: Path) -> tuple[dict[str, Any] | None, int]:
    """``_read_cached``'s table and the file's modification time (0 if absent): what the ledger tells apart the
    tables a call was served under by."""
    try:
        stamp = file_identity(path.stat())
    except FileNotFoundError:
        return None, 0
    except OSError as e:  # a loop of links, a folder it may not enter: named and skipped, never raised at launch
        raise TableError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    table, error = _read_at(path, stamp)
    if error is not None:
        raise TableError(error)
    return table, stamp[3]  # its modification time


@functools.lru_cache(maxsize=64)
def _read_at(path: Path, identity: tuple[int, ...]) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return read_table(path), None
    except TableError as e:
        return None, str(e)


def read_overlaid(kernel: str, device_kind: str, roots: tuple[Path, ...]) -> tuple[dict[str, Any] | None, str]:
    """The table of ``kernel`` on ``device_kind`` as the runtime sees it: each root's file overlaying the
    ones after it entry by entry (the user's tables over the shipped ones), and where it came from.
    A file that cannot be used is logged and left out; the others still serve."""
    merged, where, _ = _overlaid(kernel, device_kind, roots)
    return merged, where


def _overlaid(kernel: str, device_kind: str,
              roots: tuple[Path, ...]) -> tuple[dict[str, Any] | None, str, tuple[tuple[str, int], ...]]:
    """``read_overlaid``, and the files it used with their modification times (the tables' state)."""
    merged: dict[str, Any] | None = None
    used = []
    state = []
    for root in reversed(roots):
        path = table_path(root, device_kind, kernel)
        try:
            table, stamp = _read_stamped(path)
        except TableError as e:
            log_once(f"{kernel}: {e}; left out")
            used.append("")  # a table was there: no second line says there was none
            continue
        if table is None:
            continue
        for skipped in table["skipped"]:
            log_once(f"{kernel}: {skipped}")
        used.append(str(path))
        state.append((str(path), stamp))
        merged = {"entries": {**(merged or {}).get("entries", {}), **table["entries"]}}
    where = " over ".join(u for u in reversed(used) if u) or " or ".join(
        str(table_path(r, device_kind, kernel)) for r in roots)
    return merged, where if merged is not None or not used else "", tuple(state)


def tuned_config(kernel: str, bucket: dict[str, Any], kernel_hash: str, hard: tuple[str, ...],
                 running: dict[str, Any], roots: tuple[Path, ...] | None = None, refuses: Refusal | None = None,
                 kin: Kinship | None = None, one_line: bool = False,
                 problem: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The tuned config fields for ``bucket`` on the system ``running`` describes (its backend's stamps,
    with their ``device_kind`` and ``matched`` list), or None (heuristic). ``roots``: the table folders in
    overlay order, by default the user's and then the shipped ones. ``one_line``: a lookup's misses are
    logged as one line (once per process), not one line each. With recording on (``recording``), the call is
    counted in the miss ledger under ``problem`` (default: the bucket), with how it was served."""
    device = str(running["device_kind"])
    table, where, state = _overlaid(kernel, device, roots or table_roots())
    if table is None:
        recording.note(kernel, kernel_hash, device, state, problem or bucket, Served.HEURISTIC)
        if where:  # else every table there was left out, and said so: one line, not two
            log_once(f"{kernel}: no tuned table at {where}; using the heuristic")
        return None
    entry, misses, served = _select(table, bucket, running, kernel_hash, hard, refuses, kin)
    recording.note(kernel, kernel_hash, device, state, problem or bucket, served)
    if entry is None:
        misses.append(f"no valid tuned entry for {bucket_key(bucket)}; using the heuristic")
    if one_line and misses:
        log_once(f"{kernel}: {'; '.join(misses)} ({where})")
    else:
        for m in misses[:-1] if entry is None else misses:
            log_once(f"{kernel}: {m} ({where})")
        if entry is None:
            log_once(f"{kernel}: {misses[-1]}")
    if entry is None:
        return None
    if entry.void_timings:  # once a kernel and table: every entry of a sweep in an interpreter says the same
        log_once(f"{kernel}: its tuned entries ({where}) were timed in an interpreter: {entry.void_timings[:300]}; "
                 f"they serve, chosen on those times")
    if carried := entry.rekeyed_from:
        log_once(f"{kernel}: {bucket_key(bucket)}: entry measured under kernel {carried[0]}, carried to {kernel_hash} "
                 "by kerneltune rekey (its programs unchanged)", logging.INFO)
    return dict(entry.config)
