"""Warm start: a new bucket first measures what won its nearest tuned buckets on the same kind of device.

Tuned tables already say which configs win shapes like this one; a search that starts from them finds
a near-best config in a few candidates and the sampler then searches around it (Optuna's
``enqueue_trial``). The nearest buckets are found as the runtime finds them (``bucket_distance``: the
kernel's hard fields equal, then the fewest and smallest differences), in the sweep's own tables and the
tables the runtime reads. A config that the space or the kernel refuses for this problem is repaired: one field
changed, the one its refusal names first (a neighbour bucket's winner that leans on ``static_max`` under a cap of
44 or less becomes the same config without it where the cap is 50); one beyond repair is left out. Without the
repair, the third unseen bucket's search started from refused configs and needed 10 of its 28 candidates, as a cold
search did (results/engine/2026-12-05-build-cache/).

A sweep says where its warm start came from (``WarmStart.sources``: each table file and entry read), since a
fresh ``--out`` still reads the installed and shipped tables: ``--no-warm-start`` makes an independent run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltune.files.records import Entry, config_key
from kerneltune.seams.protocols import Kernel
from kerneltune.tables.locations import table_roots
from kerneltune.tables.lookup import bucket_distance, bucket_key
from kerneltune.tables.store import TableError, read_table, table_path

NEAREST_BUCKETS = 2


@dataclass(frozen=True)
class WarmSource:
    """One tuned entry a warm start read: its table file, which root that is, its bucket, and how many of its
    configs it gave."""

    table: Path
    where: str  # "this sweep's --out", "the installed tables" or "the shipped tables"
    bucket: str
    configs: int

    def text(self) -> str:
        return f"{self.bucket} ({self.configs} config{'s' * (self.configs != 1)}) of {self.table} ({self.where})"


@dataclass(frozen=True)
class WarmStart:
    configs: tuple[dict[str, Any], ...]
    sources: tuple[WarmSource, ...]


def warm_configs(kernel: Kernel, problem: Any, device_kind: str, out: Path, params: Mapping[str, list[Any]],
                 check: Callable[[dict[str, Any]], str | None]) -> tuple[dict[str, Any], ...]:
    """``warm_start``'s configs."""
    return warm_start(kernel, problem, device_kind, out, params, check).configs


def warm_start(kernel: Kernel, problem: Any, device_kind: str, out: Path, params: Mapping[str, list[Any]],
               check: Callable[[dict[str, Any]], str | None]) -> WarmStart:
    """The winners, runner-ups, rivals and fallbacks of the ``NEAREST_BUCKETS`` tuned buckets nearest ``problem``'s
    on ``device_kind``, nearest first, each once, as configs of this space that ``check`` accepts; and the entries
    they came from."""
    wanted = kernel.bucket(problem)
    entries: dict[str, tuple[float, Entry, Path, str]] = {}
    roots = ((out / "tables", "this sweep's --out"), *zip(table_roots(), ("the installed tables",
                                                                          "the shipped tables"), strict=True))
    for root, where in roots:  # the sweep's own first: it is the newest
        try:
            path = table_path(root, device_kind, kernel.name)
            table = read_table(path)
        except TableError:  # an unusable table, or a device kind from a journal that is no plain name (``safe_name``)
            continue  # only costs the warm start
        for entry in (table["entries"].values() if table else ()):
            d = bucket_distance(wanted, entry.bucket, kernel.hard_bucket_fields)
            key = bucket_key(entry.bucket)
            if not math.isinf(d) and key not in entries:
                entries[key] = (d, entry, path, where)
    nearest = sorted(entries.values(), key=lambda de: de[0])[:NEAREST_BUCKETS]
    configs: dict[str, dict[str, Any]] = {}
    sources = []
    for _, entry, path, where in nearest:
        before = len(configs)
        for item in [entry, *entry.measured()]:
            config = _in_space({**kernel.config_defaults, **item.config}, params)
            if config is not None and (why := check(config)) is not None:
                config = _repaired(config, params, check, why)
            if config is not None and config_key(config) not in configs:
                configs[config_key(config)] = config
        if len(configs) > before:
            sources.append(WarmSource(path, where, bucket_key(entry.bucket), len(configs) - before))
    return WarmStart(tuple(configs.values()), tuple(sources))


def _repaired(config: Mapping[str, Any], params: Mapping[str, list[Any]],
              check: Callable[[dict[str, Any]], str | None], why: str) -> dict[str, Any] | None:
    """The refused config with one field changed so that ``check`` accepts it, trying the fields the refusal
    ``why`` names first, each field's values in the space's order; None if no single change will do."""
    for name in sorted(params, key=lambda n: n not in why):
        for value in params[name]:
            if value != config[name] and check(changed := {**config, name: value}) is None:
                return changed
    return None


def _in_space(config: Mapping[str, Any], params: Mapping[str, list[Any]]) -> dict[str, Any] | None:
    """The config as this space's params, or None if it lacks one or holds a value the space does not offer."""
    kept = {n: config.get(n) for n in params}
    return kept if all(n in config and kept[n] in values for n, values in params.items()) else None
