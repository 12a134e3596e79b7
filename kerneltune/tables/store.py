"""Tuned-table files: one JSON per (device kind, kernel), written atomically under a lock."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

from kerneltune.paths import RESULTS

SCHEMA = 1


class TableError(ValueError):
    """A table file that cannot be used, with the file named."""


def default_tables_dir() -> Path:
    """``$KERNELTUNE_TABLES`` or the repository's ``results/tables``."""
    env = os.environ.get("KERNELTUNE_TABLES")
    if env:
        return Path(env)
    return RESULTS / "tables"


def table_path(root: Path, device_kind: str, kernel: str) -> Path:
    return root / device_kind / f"{kernel}.json"


def empty_table(kernel: str, device_kind: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "kernel": kernel, "device_kind": device_kind, "entries": {}}


def read_table(path: Path) -> dict[str, Any] | None:
    """The table at ``path``, None if absent; ``TableError`` if corrupt."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        table = json.loads(text)
    except json.JSONDecodeError as e:
        raise TableError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if not isinstance(table, dict) or table.get("schema") != SCHEMA:
        raise TableError(f"{path}: schema is {table.get('schema') if isinstance(table, dict) else None!r}, "
                         f"this kerneltune reads {SCHEMA}")
    if not isinstance(table.get("entries"), dict):
        raise TableError(f"{path}: field 'entries' is missing or not an object")
    for key, entry in table["entries"].items():
        if (why := _entry_problem(entry)) is not None:
            raise TableError(f"{path}: entry {key}: {why}")
    return table


def _entry_problem(entry: Any) -> str | None:
    """What makes an entry unusable by a launch, or None: the fields the lookup reads."""
    if not isinstance(entry, dict):
        return "not an object"
    for name in ("bucket", "config"):
        if not isinstance(entry.get(name), dict):
            return f"field {name!r} is missing or not an object"
    fallbacks = entry.get("fallbacks", [])
    if not isinstance(fallbacks, list):
        return "field 'fallbacks' is not a list"
    for i, fb in enumerate(fallbacks):
        if not (isinstance(fb, dict) and isinstance(fb.get("config"), dict)
                and isinstance(fb.get("median_us"), int | float)):
            return f"fallbacks[{i}] needs a 'config' object and a numeric 'median_us'"
    return None


def _write_atomic(path: Path, table: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(table, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update_table(path: Path, kernel: str, device_kind: str,
                 change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read-modify-write under an exclusive lock, so concurrent writers lose nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        table = read_table(path) or empty_table(kernel, device_kind)
        change(table)
        _write_atomic(path, table)
    return table
