"""From a bucket's journal records to its tuned-table entry.

The winner is the playoff's (``playoff.py``: the leaders timed again head to head), else the fastest verified
candidate measured with the current kernel source; ties on the median break by the canonical config text, so
the same measurements always give the same table. ``decided_by`` says which: ``playoff`` (paired ratios over
interleaved rounds) or ``medians`` (separate sequential medians). Runner-ups are the playoff's ties, else the
candidates whose median lies within the winner's noise. Rivals are the next best measured configs, whether or not
a playoff ran: up to ``RIVALS`` within ``RIVAL_FACTOR`` of the winner, each with its median and its margin to the
winner (its time over the winner's, less one: the playoff's paired ratio and 95% interval where it was a leader,
else the ratio of the two medians); `verify` times them beside the winner. Fallbacks are, for each other setting of
the kernel's gated config, the fastest candidate with it: what a launch whose
problem refuses the winner runs instead, measured rather than guessed.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kerneltune.files.records import Entry, Measured, Record, config_key
from kerneltune.seams.protocols import Capability, Kernel, VoidTimings
from kerneltune.seams.registry import load_backend
from kerneltune.seams.wire import Status
from kerneltune.tables.locations import table_roots
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.stamps import device_kind, now_stamp
from kerneltune.tables.store import table_path, update_table
from kerneltune.tuning.playoff import Playoff
from kerneltune.tuning.pruning import EARLY_STOP_FACTOR

MAX_RUNNER_UPS = 5
RIVALS = 3  # the next best configs an entry keeps, for verify to time beside its winner
RIVAL_FACTOR = EARLY_STOP_FACTOR  # ... those within this factor of the winner's time (beyond it, clearly slower)


def _entry_hash(records: list[Record], kernel: Kernel) -> str | None:
    """The kernel source an entry is written for: the current one; in a replay of records made by an
    older source, that source (the newest record's), so the runtime sees the entry as stale."""
    current = kernel.source_hash()
    measured = [r for r in records if r.status == Status.OK]
    if any(r.kernel_hash == current for r in measured):
        return current
    replayed = [r for r in measured if r.replayed_from is not None]
    return max(replayed, key=lambda r: r.time or "").kernel_hash if replayed else None


def bucket_entry(records: list[Record], kernel: Kernel, rel_noise: float,
                 playoff: Playoff | None = None) -> Entry | None:
    """The table entry for one bucket's records, or None if none verified and timed. With a ``playoff`` of its
    leaders, its winner is the entry's and its ties are the runner-ups."""
    source = _entry_hash(records, kernel)  # once: it reads the kernel's source files
    # A record that lacks what an entry keeps (a device to name the table by, a spread, a count of samples) can
    # be no winner; it is passed over, not allowed to stop the bucket's table.
    ok = [r for r in records if r.status == Status.OK and r.kernel_hash == source
          and record_device_kind(r) and r.spread is not None and r.samples is not None]
    if not ok:
        return None
    ok.sort(key=lambda r: (r.median_us, r.key))
    by_key = {r.key: r for r in ok}
    # A candidate stopped early whose first batch came within the best's noise was a leader of the playoff too.
    stopped = {r.key: r for r in records if r.status == Status.PRUNED and r.kernel_hash == source
               and r.key not in by_key and r.median_us is not None and r.spread is not None}
    timed = {**by_key, **stopped}
    if playoff is not None and playoff.winner in timed and all(k in timed for k in playoff.ratios):
        playoff = playoff.kept_for(ok[0].key)
        win = timed[playoff.winner]
        runner_ups = [_measured(timed[k]) for k in playoff.ties][:MAX_RUNNER_UPS]
    else:
        playoff = None
        win = ok[0]
        limit = win.median_us * (1.0 + max(win.spread, win.noise, rel_noise))
        runner_ups = [_measured(r) for r in ok[1:] if r.median_us <= limit][:MAX_RUNNER_UPS]
    median_us, settled = win.median_us, win.settled
    if win.key in stopped and playoff is not None:  # its own timing was one batch: the playoff's rounds time it
        median_us, settled = playoff.medians.get(win.key, median_us), False
    rivals = _rivals(win, median_us, ok, timed, playoff)

    def gates(r: Record) -> tuple[Any, ...]:
        return tuple(r.config.get(g) for g in kernel.gated_params)

    fallbacks: dict[tuple[Any, ...], Measured] = {}  # ok is fastest first: the first of each wins
    for r in ok:
        if gates(r) != gates(win) and gates(r) not in fallbacks:
            fallbacks[gates(r)] = _measured(r)
    recorded = win.stamped
    # A record from before stamps carried their ``matched`` list: the kernel's backend's.
    matched = recorded.get("matched") or load_backend(kernel.backend).matched_stamps
    stamps = {k: recorded.get(k) for k in matched if k != "kernel_hash"}
    stamps.update(kernel_hash=win.kernel_hash, date=win.time or now_stamp())
    if win.replayed_from is not None:
        stamps["replayed_from"] = win.replayed_from
    problem = kernel.problem(win.problem)
    return Entry(
        bucket=kernel.bucket(problem), bucket_name=win.bucket, problem=win.problem, inputs=win.inputs or {},
        config=win.config, median_us=median_us, spread=win.spread, samples=win.samples, tflops=win.tflops,
        pct_ceiling=win.pct_of_ceiling(), runner_ups=tuple(runner_ups), rivals=rivals,
        decided_by="playoff" if playoff else "medians", fallbacks=tuple(fallbacks.values()), candidates_ok=len(ok),
        # Whether the winner's timing met the noise rule before its time cap (``measure.sample_until_quiet``).
        settled=settled, playoff=playoff.to_dict(lambda k: _label(timed[k].config)) if playoff else None,
        void_timings=void_timings(kernel, recorded),  # timed in an interpreter: what verify and the lookup repeat
        stamps=stamps, accuracy=win.accuracy or None)


def void_timings(kernel: Kernel, stamps: Mapping[str, Any]) -> str | None:
    """Why the kernel's times on the system ``stamps`` name say nothing of its speed (an interpreter), or None."""
    if Capability.VOID_TIMINGS not in kernel.capabilities:
        return None
    return cast(VoidTimings, kernel).void_timings(stamps)


def _rivals(win: Record, win_us: float, ok: list[Record], timed: dict[str, Record],
            playoff: Playoff | None) -> tuple[Measured, ...]:
    """The next best configs after ``win``, up to ``RIVALS`` within ``RIVAL_FACTOR`` of it, closest first: the
    playoff's other leaders with their paired ratio and its interval, then the other timed candidates by the ratio
    of their median to the winner's."""
    ratios = playoff.ratios if playoff is not None else {}
    found: list[tuple[float, Measured]] = []
    for key, (lo, med, hi) in ratios.items():
        found.append((med, _measured(timed[key]).replace(margin=med - 1.0, margin_low=lo - 1.0, margin_high=hi - 1.0,
                                                           by="playoff")))
    for r in ok:
        if r.key != win.key and r.key not in ratios:
            ratio = r.median_us / win_us
            found.append((ratio, _measured(r).replace(margin=ratio - 1.0, by="medians")))
    found.sort(key=lambda f: (f[0], config_key(f[1].config)))
    return tuple(item for ratio, item in found if ratio <= RIVAL_FACTOR)[:RIVALS]


def _label(config: Mapping[str, Any]) -> str:
    """A config as a reader names it in the playoff's ratios: ``cost=1.2 warps=4``."""
    return " ".join(f"{k}={v}" for k, v in config.items())


def record_device_kind(record: Record) -> str | None:
    """The table folder a record's device names: its stamps' device kind (or its GPU's, in older records)."""
    stamps = record.stamped
    return stamps.get("device_kind") or (device_kind(str(stamps["gpu"])) if stamps.get("gpu") else None)


def _measured(r: Record) -> Measured:
    """A runner-up's or fallback's config with what was measured of it (time, and errors where the
    kernel's check reports them: the runtime holds them against a launch's error budget)."""
    return Measured(r.config, r.median_us, r.spread, accuracy=r.accuracy or None)


def write_bucket_table(out: Path, kernel: Kernel, bucket: str, records: list[Record],
                       rel_noise: float, playoff: Playoff | None = None) -> WrittenEntry | None:
    """Write (atomically, under the table's lock) the entry of ``bucket`` from its records."""
    mine = [r for r in records if r.bucket == bucket and r.kernel == kernel.name]
    entry = bucket_entry(mine, kernel, rel_noise, playoff)
    if entry is None:
        return None
    key = config_key(entry.config)
    kind = next(k for r in reversed(mine) if r.key == key and (k := record_device_kind(r)))
    path = table_path(out / "tables", kind, kernel.name)
    inside = (out / "tables").resolve()
    where = path.parent.resolve()  # a link inside --out may point anywhere: where the write would really land
    if (where != inside and inside not in where.parents) or any(
            where == r or r in where.parents for r in (root.resolve() for root in table_roots())):
        raise OSError(errno.EPERM, f"{path.parent} resolves to {where}, outside the sweep's own tables folder "
                                   f"{inside} (a link?); a sweep writes only there, and the runtime reads only what "
                                   f"`kerneltune install` puts in its folder", str(path.parent))

    def put(table: dict[str, Any]) -> None:
        table["entries"][bucket_key(entry.bucket)] = entry

    update_table(path, kernel.name, kind, put)
    return WrittenEntry(entry, path)


@dataclass(frozen=True)
class WrittenEntry:
    """An entry and the table it was written into."""

    entry: Entry
    table: Path
