"""Re-measuring a tuned table: each bucket's search narrowed to the configs the table holds for it.

After a kernel change every entry is stale (another kernel hash). Its winner, runner-ups and fallbacks are
the configs worth timing again: 42 of them re-measured in two device calls, where the whole space is
hundreds per bucket (results/ranker_attention/2026-12-02-h200-run-p/).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kerneltune.seams.protocols import Kernel
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import read_table_of

from .space import Bucket, Space


def _bucket_id(bucket: Mapping[str, Any]) -> str:
    """A bucket's identity whatever the order of its fields (a table keeps them in the order its journal did)."""
    return json.dumps(dict(bucket), sort_keys=True)


def load_contenders(path: Path, kernel: Kernel) -> dict[str, list[dict[str, Any]]]:
    """Each entry's bucket (``_bucket_id``) -> its configs (winner, runner-ups, rivals, fallbacks), each once, with
    the kernel's tile defaults filled in for tile fields the table predates."""
    table = read_table_of(path, kernel.name, "contenders")
    held: dict[str, list[dict[str, Any]]] = {}
    for entry in table["entries"].values():
        key = _bucket_id(entry.bucket)
        configs = [entry.config, *(m.config for m in entry.measured())]
        unique = {json.dumps(c, sort_keys=True): c for c in ({**kernel.config_defaults, **c} for c in configs)}
        held[key] = list(unique.values())
    return held


def held_for(held: dict[str, list[dict[str, Any]]], path: Path, kernel: Kernel, bucket_name: str,
             problem: Any) -> list[dict[str, Any]]:
    """The configs ``held`` (``load_contenders``) for one bucket of the space; a bucket the table lacks is refused
    by name."""
    bucket = kernel.bucket(problem)
    if not held.get(_bucket_id(bucket)):
        raise ValueError(f"contenders {path}: no entry for bucket {bucket_name!r} ({bucket_key(bucket)}); "
                         f"--bucket sweeps the buckets it holds")
    return held[_bucket_id(bucket)]


def is_contender(config: Mapping[str, Any], contenders: list[dict[str, Any]]) -> bool:
    """Whether the space's config is one the table holds (on every field the space sets)."""
    return any(all(c.get(k) == v for k, v in config.items()) for c in contenders)


def table_buckets(path: Path, kernel: Kernel, space: Space) -> tuple[list[Bucket], list[str]]:
    """The buckets the table at ``path`` holds beyond the space's own (those a ``--from-ledger`` sweep or a
    ``--bucket key=value`` added), each named and measured as its entry was (its problem and inputs), and a line
    for each entry that cannot be: it predates entries keeping their problem, or the kernel no longer takes it.
    A ``--contenders`` sweep re-measures them with the space's: a stale table's every bucket, not just the space's."""
    table = read_table_of(path, kernel.name, "contenders")
    own = set()
    for b in space.buckets:
        try:
            own.add(_bucket_id(kernel.bucket(kernel.problem(b.problem))))
        except (TypeError, ValueError):
            continue  # a malformed bucket of the space: named where the space's buckets are swept
    found, left = [], []
    for key, entry in table["entries"].items():
        if _bucket_id(entry.bucket) in own:
            continue
        name = entry.bucket_name or key
        try:
            if entry.problem is None:
                raise ValueError("the entry keeps no problem to measure it at")
            problem = kernel.problem(dict(entry.problem))
        except (TypeError, ValueError) as e:
            left.append(f"contenders {path}: bucket {name} not re-measured ({e})")
            continue
        found.append(Bucket(name, kernel.problem_dict(problem), dict(entry.inputs or {}), f"{path} (entry {key})"))
    return found, left
