"""Stamps: what a tuned entry was measured on, compared with the running system."""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

# Stamps that must all match for an entry to be used; the rest are informational.
MATCHED_STAMPS = ("gpu", "sm_count", "driver", "cuda", "jax", "jaxlib", "kernel_hash")


def device_kind(gpu_name: str) -> str:
    """A file-system friendly name for a GPU model: 'NVIDIA H200' -> 'nvidia-h200'."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "unknown"


def source_hash(files: Iterable[Path]) -> str:
    """First 16 hex digits of the SHA-256 of the given source files, in order."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "none"


@functools.cache
def system_stamps() -> dict[str, str | int]:
    """Stamps of the running system's first JAX device (the CPU on a machine without GPU)."""
    import jax
    import jaxlib

    dev = jax.devices()[0]
    stamps: dict[str, str | int] = {
        "gpu": dev.device_kind if dev.platform == "gpu" else "cpu",
        "sm_count": int(getattr(dev, "core_count", 0) or 0),
        "driver": _driver_version() if dev.platform == "gpu" else "none",
        "cuda": _cuda_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
    }
    return stamps


def _cuda_version() -> str:
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        return "none"
    if cuda_versions is None:
        return "none"
    v = cuda_versions.cuda_runtime_get_version()
    return f"{v // 1000}.{(v % 1000) // 10}"


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def mismatches(entry: dict, running: dict) -> list[str]:
    """The matched stamps on which an entry differs from the running system."""
    return [
        f"{key}: table {entry.get(key)!r}, running {running.get(key)!r}"
        for key in MATCHED_STAMPS
        if str(entry.get(key)) != str(running.get(key))
    ]
