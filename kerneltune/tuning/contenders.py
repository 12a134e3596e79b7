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
