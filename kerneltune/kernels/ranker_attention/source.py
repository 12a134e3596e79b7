"""What identifies the ranker's compiled code, without importing JAX: a tuned entry's kernel hash and the tile
fields a table may hold (a CLI command that only reads spaces, tables and journals starts in a second, not two)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import KernelConfig

KERNEL_NAME = "ranker_attention"
_SOURCES = ("kernel.py", "tile_steps.py", "cap.py", "bounds.py", "config.py", "accuracy.py", "exp2_fma.py",
            "lazy_rescale.py")


@functools.cache
def kernel_source_hash() -> str:
    """Hash of the files that decide what compiles; a tuned entry with another is stale."""
    from kerneltune.tables.stamps import source_hash

    here = Path(__file__).parent
    return source_hash(here / name for name in _SOURCES)


_TILE_TYPES = {f.name: type(f.default) for f in dataclasses.fields(KernelConfig) if f.name in KernelConfig.TILE_FIELDS}


def tile_type_error(tiles: Mapping[str, Any]) -> str | None:
    """A tile field unknown or of another type than the config's (exactly: a bool is not an int, a
    string "false" is not a bool, 3.0 is not an int), or None."""
    for name, value in tiles.items():
        want = _TILE_TYPES.get(name)
        if want is None:
            return f"{name}: not a tile field of the ranker ({', '.join(_TILE_TYPES)})"
        if type(value) is not want:
            return f"{name}: {value!r} is a {type(value).__name__}, not a {want.__name__}"
    return None
