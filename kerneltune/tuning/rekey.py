"""Carry a tuned table across a kernel change that left its configs' programs as they were.

The kernel hash covers every file that decides what compiles, so any edit (a comment, a refactor, another
config's code path) makes every entry stale, and each bucket is due a re-measure on the GPU (two re-measures spent
about 850 s of device time re-checking entries whose programs had not changed:
results/ranker_attention/2026-12-03-h200-run-ab/). A kernel that digests
its programs (``ProgramDigest``) lets this step, on any host, tell the two apart:

- an entry under the current hash gets each of its configs' digests recorded (``program_digest``), so the
  next change can be judged;
- a stale entry whose winner, runner-ups and fallbacks all digest as recorded takes the current hash (the
  old ones kept in ``stamps.rekeyed_from``): what was measured is what the current source launches;
- any other stale entry stays stale, named with the configs whose programs changed, for ``sweep
  --contenders``.

Digests compare only under the framework versions the entry was measured with (the kernel's
``digest_stamps``); an entry measured under others is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltune.files.records import Entry, Measured
from kerneltune.seams.protocols import Capability, Kernel
from kerneltune.seams.registry import load_backend, load_kernel
from kerneltune.tables.store import read_table_of, update_table

RECORDED, CURRENT, CARRIED = "recorded", "current", "carried"  # the entry is current after the run
CHANGED, UNKNOWN, FOREIGN, INCONSISTENT = "changed", "unknown", "foreign", "inconsistent"  # it is not


@dataclass
class RekeyItem:
    bucket: str
    key: str
    outcome: str
    detail: str = ""

    @property
    def current(self) -> bool:
        return self.outcome in (RECORDED, CURRENT, CARRIED)


@dataclass
class RekeyReport:
    table: Path
    kernel_hash: str
    items: list[RekeyItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def stale_buckets(self) -> list[str]:
        return [i.bucket for i in self.items if not i.current]


def _measured_configs(entry: Entry) -> list[tuple[str, Entry | Measured]]:
    """(name, what holds its config and digest) for the winner, each runner-up and each fallback."""
    return [("winner", entry),
            *((f"runner-up {i + 1}", r) for i, r in enumerate(entry.runner_ups or ())),
            *((f"fallback {i + 1}", f) for i, f in enumerate(entry.fallbacks or ()))]


def _judge(kernel: Any, entry: Entry, current: str, running: dict[str, Any]) -> tuple[str, str, list[str]]:
    """(outcome, detail, the digest of each measured config: empty where none was computed). ``kernel`` is a
    ``Kernel`` that is a ``ProgramDigest`` too."""
    stamps = entry.stamps
    foreign = [f"{k} {stamps.get(k)!r} (running {running.get(k)!r})" for k in kernel.digest_stamps
               if str(stamps.get(k)) != str(running.get(k))]
    if foreign:
        return FOREIGN, "measured under " + ", ".join(foreign) + ": its digests do not compare here", []
    if not isinstance(entry.problem, dict):
        return UNKNOWN, "the entry records no problem to lower", []
    configs = _measured_configs(entry)
    recorded = [item.program_digest for _, item in configs]
    old = entry.stamp_hash
    is_current = old == current
    if not is_current and None in recorded:
        return UNKNOWN, f"measured under {old} before its programs were digested", []
    # A problem or config the current source cannot take is a finding about this entry, not a crash.
    try:
        problem = kernel.problem(entry.problem)
    except Exception as e:
        return UNKNOWN, f"its problem is not one this source takes: {type(e).__name__}: {e}"[:500], []
    digests = []
    for name, item in configs:
        try:
            digests.append(kernel.program_digest(problem, item.config, stamps))
        except Exception as e:
            return UNKNOWN, f"its {name} does not lower here: {type(e).__name__}: {e}"[:500], []
    if is_current:
        differ = [name for (name, _), r, d in zip(configs, recorded, digests, strict=True) if r not in (None, d)]
        if differ:
            return INCONSISTENT, (f"under the current source, the program of {', '.join(differ)} differs from "
                                  "the one recorded (a lowering that is not deterministic?)"), []
        return (CURRENT, "", digests) if None not in recorded else (RECORDED, f"{len(digests)} digests", digests)
    changed = [name for (name, _), r, d in zip(configs, recorded, digests, strict=True) if r != d]
    if changed:
        return CHANGED, f"{', '.join(changed)} of {len(configs)} changed since {old}", []
    return CARRIED, f"{len(configs)} programs as measured under {old}", digests


def rekey_table(kernel_name: str, path: Path, on_item: Callable[[RekeyItem], None] | None = None) -> RekeyReport:
    """Judge every entry of the table at ``path`` and write what changed (digests, hashes) back under the
    table's lock. ``ValueError`` names the culprit when the table or the kernel cannot be used."""
    kernel: Kernel = load_kernel(kernel_name)
    if Capability.PROGRAM_DIGEST not in kernel.capabilities:
        raise ValueError(f"rekey: kernel {kernel.name} cannot digest its programs; its tables are re-measured "
                         "after every change (kerneltune sweep --contenders)")
    table = read_table_of(path, kernel.name, "rekey")
    current = kernel.source_hash()
    running = load_backend(kernel.backend).stamps()
    report = RekeyReport(path, current, notes=list(table["skipped"]))  # read_table_of lists them, maybe none
    updates: dict[str, tuple[Entry, Entry]] = {}  # key -> (entry as read, entry to write)
    for key, entry in sorted(table["entries"].items(), key=lambda kv: str(kv[1].bucket_name or kv[0])):
        outcome, detail, digests = _judge(kernel, entry, current, running)
        item = RekeyItem(str(entry.bucket_name or key), key, outcome, detail)
        report.items.append(item)
        if outcome in (RECORDED, CARRIED):
            updates[key] = (entry, _updated(entry, digests, current))
        if on_item is not None:
            on_item(item)
    if updates:
        def change(t: dict[str, Any]) -> None:
            for key, (before, after) in updates.items():
                if t["entries"].get(key) == before:  # a writer that changed the entry meanwhile wins
                    t["entries"][key] = after
                else:
                    report.notes.append(f"entry {key} changed while it was judged; left as that writer left it")

        update_table(path, kernel.name, str(table.get("device_kind")), change)
    return report


def _updated(entry: Entry, digests: list[str], current: str) -> Entry:
    """The entry with its configs' digests (in ``_measured_configs``'s order) and the current hash."""
    rest = iter(digests[1:])
    runner_ups, fallbacks = (None if items is None else tuple(m.replace(program_digest=next(rest)) for m in items)
                             for items in (entry.runner_ups, entry.fallbacks))
    stamps = dict(entry.stamps)
    if entry.stamp_hash != current:
        stamps.update(rekeyed_from=[*entry.rekeyed_from, entry.stamp_hash], kernel_hash=current)
    return entry.replace(program_digest=digests[0], runner_ups=runner_ups, fallbacks=fallbacks, stamps=stamps)
