"""Tuned-table files: one JSON per (device kind, kernel), written atomically under a lock.

A table is read only if the user (or root) owns it and its folders and no one else can write them (``trust``):
another user's table would choose what a launch runs. It is written whole or not at all, never through a link.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kerneltune.files.locks import BoundedLock
from kerneltune.files.paths import make_folder
from kerneltune.files.records import Entry, RecordError, is_plain_name
from kerneltune.files.safe_io import (
    MAX_JSON_DEPTH,
    MAX_TABLE_BYTES,
    BadJson,
    UnsafeFile,
    atomic_writer,
    brief,
    deeper_than,
    loads_bounded_json,
    read_regular_bytes,
)
from kerneltune.files.trust import why_untrusted

SCHEMA = 1


class TableError(ValueError):
    """A table file that cannot be used, with the file named."""


def safe_name(value: object, what: str) -> str:
    """``value`` if it is a plain name (``is_plain_name``), else a TableError naming it."""
    if is_plain_name(value):
        return str(value)
    raise TableError(f"{what} {value!r} is not a plain name (lower-case letters, digits, '.', '_', '-'): "
                     f"it would name a path outside the tables' folder")


def table_path(root: Path, device_kind: str, kernel: str) -> Path:
    """The table of ``kernel`` on ``device_kind`` under ``root``; a TableError if either is not a plain name."""
    return root / safe_name(device_kind, "device kind") / f"{safe_name(kernel, 'kernel')}.json"


def empty_table(kernel: str, device_kind: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "kernel": kernel, "device_kind": device_kind, "entries": {}}


def read_table(path: Path) -> dict[str, Any] | None:
    """The table at ``path``, None if absent; ``TableError`` if the file itself is unusable. Its entries are
    ``Entry``s; one that breaks the schema is left out alone, named (file, entry, field) in ``table["skipped"]``.

    Whatever the file holds, nothing else is raised and nothing hangs (a launch's lookup reads the user's tables):
    a FIFO, a device, a socket, a file over ``MAX_TABLE_BYTES``, an integer past JSON's bounds is a TableError
    naming the file (``safe_io``); so is a table another user owns or can write, or one in such a folder
    (``trust``)."""
    try:
        data = read_regular_bytes(path, MAX_TABLE_BYTES, "tuned table")
    except FileNotFoundError:
        return None
    except UnsafeFile as e:  # a FIFO, a device, a file too big: what it is, named
        raise TableError(str(e)) from None
    except OSError as e:  # a folder, a file the user may not read, an I/O error: the file is named, never raised raw
        raise TableError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    if (why := why_untrusted(path)) is not None:
        raise TableError(f"{path}: {why}; not used (the guide's trust page says why)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TableError(f"{path}: not a text file (it is not UTF-8)") from None
    try:
        table = loads_bounded_json(text, str(path))
    except BadJson as e:
        raise TableError(str(e)) from None
    if not isinstance(table, dict) or table.get("schema") != SCHEMA:
        raise TableError(f"{path}: schema is {brief(table.get('schema') if isinstance(table, dict) else None)}, "
                         f"this kerneltune reads {SCHEMA}")
    if not isinstance(table.get("entries"), dict):
        raise TableError(f"{path}: field 'entries' is missing or not an object")
    table["skipped"] = []
    for key, entry in list(table["entries"].items()):
        try:
            table["entries"][key] = Entry.from_json(entry)
        except RecordError as why:
            table["skipped"].append(f"{path}: entry {_key_text(key)}: {why}; entry skipped")
            del table["entries"][key]
    return table


def read_table_of(path: Path, kernel: str, purpose: str) -> dict[str, Any]:
    """The table at ``path``, which must exist and be ``kernel``'s; ``ValueError`` starting with ``purpose``
    (the command or option that reads it) otherwise."""
    try:
        table = read_table(path)
    except TableError as e:
        raise ValueError(f"{purpose}: {e}") from None
    if table is None:
        raise ValueError(f"{purpose}: {path}: no such table")
    if table.get("kernel") != kernel:
        raise ValueError(f"{purpose}: {path} is a table of {table.get('kernel')!r}, not of {kernel!r}")
    return table


def _key_text(key: str) -> str:
    """An entry's key as a message names it: as written when short and printable, else quoted short."""
    return key if len(key) <= 80 and key.isprintable() else brief(key)


def _write_atomic(path: Path, table: dict[str, Any]) -> None:
    """Written beside its final path (same file system), then renamed over it: a reader sees the old table
    or the new one, never a part (``safe_io.atomic_writer``). Sorted keys and one-space indents, so a table diffs
    line by line. A table no reader would take (an entry that breaks the schema, nesting past the bound) is
    refused before anything is written."""
    entries = {}
    for key, entry in table["entries"].items():
        try:
            entries[key] = Entry.from_json(entry).to_json()
        except RecordError as why:
            raise TableError(f"{path}: refusing to write entry {key}: {why}") from None
    kept = {**{k: v for k, v in table.items() if k != "skipped"}, "entries": entries}
    if deeper_than(kept, MAX_JSON_DEPTH):
        raise TableError(f"{path}: refusing to write a table nested more than {MAX_JSON_DEPTH} levels, which no reader "
                         f"takes")
    with atomic_writer(path) as f:  # a table is read by every user of the machine: 0o644
        json.dump(kept, f, indent=1, sort_keys=True)
        f.write("\n")


def update_table(path: Path, kernel: str, device_kind: str,
                 change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Read-modify-write under an exclusive lock, so concurrent writers lose nothing; the lock waited on in
    bounded time, saying what holds it (``locks``). A table holding entries that break the schema is not
    rewritten: the rewrite would drop them unseen. A link, or a table or folder another user owns or can write,
    is refused."""
    if path.is_symlink():  # its lock and its rewrite would land beside the target, outside this folder
        raise TableError(f"{path}: a link to {os.readlink(path)}; a table is written only as a file of its own "
                         f"folder (remove the link)")
    if (why := why_untrusted(path)) is not None:
        raise TableError(f"{path}: {why}; not written (the guide's trust page says why)")
    make_folder(path.parent)
    with BoundedLock(f"{path}.lock", f"the table {path}"):
        for stale in path.parent.glob(f".{path.name}.*.tmp"):  # a writer killed mid-write (we hold the lock)
            stale.unlink(missing_ok=True)
        table = read_table(path) or empty_table(kernel, device_kind)
        if table.get("skipped"):
            raise TableError(f"{path}: not rewritten, it holds entries that break the schema "
                             f"({'; '.join(table['skipped'])}); mend or remove them first")
        change(table)
        _write_atomic(path, table)
    return table
