"""Installing a sweep's table: the explicit act that puts measured entries where the runtime reads them.

Entries overlay the destination's entry by entry (same bucket: the new one wins). A table that holds
an entry made from a replay is refused whole: a replay reports measurements made then, by another
process and maybe another kernel source, and never becomes what the runtime launches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .store import TableError, read_table, table_path, update_table


def install_table(source: Path, root: Path) -> tuple[Path, int]:
    """Merge ``source``'s entries into the table of the same kernel and device kind under ``root``;
    returns the installed file and how many entries it took."""
    table = read_table(source)
    if table is None:
        raise TableError(f"{source}: no such table")
    if table["skipped"]:
        raise TableError(f"{source}: not installed, {'; '.join(table['skipped'])}")
    kernel, kind = table.get("kernel"), table.get("device_kind")
    if not isinstance(kernel, str) or not isinstance(kind, str) or not kernel or not kind:
        raise TableError(f"{source}: fields 'kernel' and 'device_kind' must name the table's kernel and device")
    replayed = sorted(str(e.bucket_name or k) for k, e in table["entries"].items() if e.replayed_from is not None)
    if replayed:
        shown = ", ".join(replayed[:3]) + (f" and {len(replayed) - 3} more" if len(replayed) > 3 else "")
        raise TableError(f"{source}: not installed: a replay wrote {shown}; install a live sweep's table")
    if not table["entries"]:
        raise TableError(f"{source}: no entries to install")

    def take(dest: dict[str, Any]) -> None:
        dest["entries"].update(table["entries"])

    try:
        dest = table_path(root, kind, kernel)
    except TableError as e:
        raise TableError(f"{source}: {e}") from None
    if dest.resolve() == source.resolve():
        raise TableError(f"{source}: already the installed table")
    update_table(dest, kernel, kind, take)
    return dest, len(table["entries"])
