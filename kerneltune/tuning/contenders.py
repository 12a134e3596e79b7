"""Re-measuring a tuned table: each bucket's search narrowed to the configs the table holds for it.

After a kernel change every entry is stale (another kernel hash). Its winner, runner-ups and fallbacks are
the configs worth timing again: 42 of them re-measured in two device calls, where the whole space is
hundreds per bucket (results/ranker_attention/2026-12-02-h200-run-p/).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kerneltune.protocols import Kernel
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import read_table_of


def load_contenders(path: Path, kernel: Kernel) -> dict[str, list[dict[str, Any]]]:
    """The table's entry key (``tables.lookup.bucket_key`` of the kernel's bucket, as the writer keys it) -> its
    configs (winner, runner-ups, fallbacks), with the kernel's tile defaults filled in for tile fields the table
    predates."""
    table = read_table_of(path, kernel.name, "contenders")
    held: dict[str, list[dict[str, Any]]] = {}
    for key, entry in table["entries"].items():
        configs = [entry["config"], *(r["config"] for r in entry.get("runner_ups", ())),
                   *(f["config"] for f in entry.get("fallbacks", ()))]
        held[key] = [{**kernel.tile_defaults, **c} for c in configs]
    return held


def held_for(held: dict[str, list[dict[str, Any]]], path: Path, kernel: Kernel, bucket_name: str,
             problem: Any) -> list[dict[str, Any]]:
    """The configs ``held`` (``load_contenders``) for one bucket of the space; a bucket the table lacks is refused
    by name."""
    entry_key = bucket_key(kernel.bucket(problem))
    if not held.get(entry_key):
        raise ValueError(f"contenders {path}: no entry for bucket {bucket_name!r} ({entry_key}); "
                         f"--bucket sweeps the buckets it holds")
    return held[entry_key]


def is_contender(tiles: Mapping[str, Any], contenders: list[dict[str, Any]]) -> bool:
    """Whether the space's config is one the table holds (on every field the space sets)."""
    return any(all(c.get(k) == v for k, v in tiles.items()) for c in contenders)
