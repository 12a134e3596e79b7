"""Stamps: what a tuned entry was measured on, compared with the running system."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The stamps an entry must share with the running system are the running backend's ``matched`` list
# (it comes from the code that runs, never from the table); the rest are informational.


def device_kind(gpu_name: str) -> str:
    """A file-system friendly name for a GPU model: 'NVIDIA H200' -> 'nvidia-h200' (a plain name of at most 64
    characters, as ``store.safe_name`` requires of a table's folder)."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower())[:64].strip("-") or "unknown"


def source_hash(files: Iterable[Path]) -> str:
    """First 16 hex digits of the SHA-256 of the given source files, in order."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def matched_keys(running: Mapping[str, Any]) -> tuple[str, ...]:
    """The stamps the running backend matches entries on, the kernel source always among them."""
    keys = tuple(running["matched"])
    return keys if "kernel_hash" in keys else (*keys, "kernel_hash")


def mismatches(entry: Mapping[str, Any], running: Mapping[str, Any]) -> list[str]:
    """The matched stamps on which an entry differs from the running system."""
    return [
        f"{key}: table {entry.get(key)!r}, running {running.get(key)!r}"
        for key in matched_keys(running)
        if str(entry.get(key)) != str(running.get(key))
    ]
