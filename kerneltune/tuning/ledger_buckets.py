"""Buckets from the traffic: the problems a miss ledger recorded (``sweep --from-ledger``) and problems given on
the command line (``--bucket key=value,...``), each a bucket of the sweep.

A recorded problem is swept when its latest record was not served by its own tuned entry; problems that share a
bucket (a Triton kernel's calls of one key) are one bucket, its inputs from the most called of them; the most called
bucket first. A recorded problem the kernel no longer takes (a field added since) is left out and counted.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltune.seams.protocols import Kernel
from kerneltune.tables.ledger import LedgerRecord, Served, read_ledgers
from kerneltune.tables.lookup import bucket_key

from .space import Bucket, Space


def parse_problem(text: str) -> dict[str, Any]:
    """``key=value,...`` as a problem: integers, floats and true/false as such, anything else a string."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"--bucket {text!r}: {part!r} is not key=value (a problem is key=value,key=value)")
        out[key.strip()] = _value(value.strip())
    return out


def _value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        return number if kind is int or math.isfinite(number) else text
    return text


def _canonical(problem: Mapping[str, Any]) -> str:
    return json.dumps(dict(problem), sort_keys=True)


@dataclass
class _Group:
    """The recorded problems of one bucket not served by their own entry, and their calls."""

    bucket: dict[str, Any]
    calls: int = 0
    problems: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    served_own: bool = True  # every one of its problems served by its own entry now (asked for by --bucket)


def recorded_buckets(kernel: Kernel, where: Path, space: Space, top: int | None,
                     wanted: list[dict[str, Any]] | None = None) -> tuple[list[Bucket], str]:
    """The buckets the ledger(s) at ``where`` call for, the most called first (``top`` of them), and a line
    saying where they came from. ``wanted``: only buckets whose fields hold these values (``--bucket``), served by
    their own entry now or not: a key asked for by name is tuned again (its calls, all of them, rank it)."""
    records = [r for ledger in read_ledgers(where, kernel.name) for r in ledger.records]
    if not records:
        raise ValueError(f"--from-ledger: {where} holds no recorded call of {kernel.name} (record one: run the app "
                         f"with KERNELTUNE_RECORD=1)")
    # A ledger's fields come sorted; a bucket is named with them in the order of the space's buckets, where it has any.
    order = {k: i for i, k in enumerate(space.buckets[0].problem)} if space.buckets else {}
    by_problem: dict[str, list[LedgerRecord]] = defaultdict(list)
    for r in records:
        by_problem[_canonical(r.problem)].append(r)
    groups: dict[str, _Group] = {}
    served_own = refused = 0
    for items in by_problem.values():
        latest = max(items, key=lambda r: r.last_seen)
        own = latest.served == Served.TUNED
        if own and wanted is None:
            served_own += 1
            continue
        try:
            problem = kernel.problem(dict(latest.problem))
            bucket = dict(kernel.bucket(problem))
        except (TypeError, ValueError):
            refused += 1
            continue
        if wanted is not None and not any(all(bucket.get(k) == v for k, v in w.items()) for w in wanted):
            continue
        bucket = {k: bucket[k] for k in sorted(bucket, key=lambda k: order.get(k, len(order)))}
        calls = sum(r.count for r in items if r.served != Served.TUNED or wanted is not None)
        group = groups.setdefault(bucket_key(bucket), _Group(bucket))
        group.calls += calls
        group.served_own &= own
        group.problems.append((calls, kernel.problem_dict(problem)))
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1].calls, kv[0]))[:top]
    named = {}
    for b in space.buckets:
        try:
            named[_canonical(kernel.bucket(kernel.problem(b.problem)))] = b
        except (TypeError, ValueError):
            continue  # a malformed bucket of the space: named where the space's buckets are swept
    buckets = []
    for key, group in ranked:
        problem = max(group.problems, key=lambda cp: cp[0])[1]  # the most called call of the bucket
        own = named.get(_canonical(group.bucket))
        buckets.append(Bucket(own.name if own is not None else key, problem, dict(own.bounds) if own else {},
                              f"{where} ({group.calls} calls)"))
    left = [f"{served_own} served by their own entry"] if served_own else []
    if refused:
        left.append(f"{refused} whose fields {kernel.name} no longer takes")
    if not buckets:
        which = " matching --bucket" if wanted is not None else ""
        raise ValueError(f"--from-ledger: {where} holds no problem of {kernel.name}{which} to tune "
                         f"({len(by_problem)} recorded" + (f": {', '.join(left)}" if left else "") + ")")
    note = (f"{len(buckets)} bucket(s) from the ledger {where}, the most called first: "
            + ", ".join(f"{b.name} ({groups[k].calls} calls{', served by its own entry now' * groups[k].served_own})"
                        for b, (k, _) in zip(buckets, ranked, strict=True))
            + (f"; of {len(by_problem)} recorded problems, left out: {', '.join(left)}" if left else ""))
    return buckets, note


def given_bucket(kernel: Kernel, fields: dict[str, Any], ledger: Path, space: Space) -> tuple[list[Bucket], str]:
    """The bucket of a problem given as ``--bucket key=value,...``: the problem itself where the kernel takes it
    whole, else the recorded calls in ``ledger`` that hold these values (a Triton kernel's problem is its key and
    the call's arguments, which only a recorded call gives)."""
    try:
        problem = kernel.problem(fields)
    except (TypeError, ValueError) as e:
        try:
            return recorded_buckets(kernel, ledger, space, None, [fields])
        except ValueError as missing:
            why = str(missing).removeprefix("--from-ledger: ")
            raise ValueError(f"--bucket {bucket_key(fields)}: not a whole problem of {kernel.name} ({e}), and "
                             f"{why}") from None
    name = bucket_key(dict(kernel.bucket(problem)))
    return [Bucket(name, kernel.problem_dict(problem), {}, f"--bucket {bucket_key(fields)}")], ""
