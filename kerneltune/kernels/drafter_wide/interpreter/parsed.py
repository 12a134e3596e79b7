"""A captured module's op tree kept beside it, so that the next read skips MLIR's Python bindings (2-4 s a
program, paid by every worker of ``verify --interpret`` that runs one of its steps).

The tree is plain data (``ir.Op``, ``ir.Region``, ``types.VType``, NumPy scalar types, Python's containers), kept
with ``pickle`` and read back by an unpickler that builds those types and nothing else: a file that names any
other is ignored, as is a torn one, and the module is read from its text again. The key is the module's text,
the kernel function's name and the source of the modules that define the tree, so a changed parser never reads
an old tree."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
_SOURCES = ("ir.py", "types.py", "program.py", "parsed.py")
_ALLOWED = {("kerneltune.kernels.drafter_wide.interpreter.ir", "Op"),
            ("kerneltune.kernels.drafter_wide.interpreter.ir", "Region"),
            ("kerneltune.kernels.drafter_wide.interpreter.types", "VType"),
            ("builtins", "object")}


class _TreeOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED or (module == "numpy" and isinstance(getattr(np, name, None), type)
                                          and issubclass(getattr(np, name), np.generic)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}: not part of a parsed program")


def _path(cache: Path, text: str, kernel: str | None) -> Path:
    h = hashlib.sha256(text.encode())
    h.update(f"\0{kernel}\0".encode())
    for name in _SOURCES:
        h.update((HERE / name).read_bytes())
    return cache / f"{h.hexdigest()[:24]}.ops.pickle"


def load(cache: Path, text: str, kernel: str | None) -> dict[str, Any] | None:
    """The tree kept for ``text``, or None (none kept, torn, or naming a type a tree has not)."""
    path = _path(cache, text, kernel)
    if not path.is_file():  # a FIFO or a folder in its place is no tree either
        return None
    try:
        state = _TreeOnly(io.BytesIO(path.read_bytes())).load()
    except (OSError, EOFError, AttributeError, ImportError, IndexError, TypeError, ValueError,
            pickle.UnpicklingError):
        return None
    return state if isinstance(state, dict) else None


def save(cache: Path, text: str, kernel: str | None, state: dict[str, Any]) -> None:
    """Keep ``state`` for ``text``; a cache that cannot be written costs the next read its time, nothing else."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path = _path(cache, text, kernel)
        fd, part = tempfile.mkstemp(dir=cache, prefix=path.name + ".", suffix=".part")  # a writer's own
        with os.fdopen(fd, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        Path(part).replace(path)
    except OSError:
        pass
