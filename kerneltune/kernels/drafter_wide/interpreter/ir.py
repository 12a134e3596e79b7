"""The interpreter's program as data: an ``Op`` tree of numbered value slots in ``Region``s. ``program.py``
builds it from a captured MLIR module; ``ops.py`` gives each ``Op`` its ``run``. Both import this, neither the
other's module at import time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .types import VType

TERMINATORS = {"scf.yield", "scf.condition", "gpu.return", "func.return"}


class UnknownOp(NotImplementedError):
    """An op the interpreter has no meaning for: its name and source line."""


@dataclass(eq=False)
class Region:
    params: tuple[int, ...]
    ops: list[Op]


@dataclass(eq=False)
class Op:
    name: str
    res: tuple[int, ...]
    args: tuple[int, ...]
    res_types: tuple[VType, ...]
    arg_types: tuple[VType, ...]
    attrs: dict[str, Any]
    regions: tuple[Region, ...]
    where: str  # "kernel.py:230 <- ..." (innermost first)
    lines: tuple[tuple[str, int], ...]  # every (file name, line) of the location's call chain
    kill: tuple[int, ...] = ()  # slots whose last use this op is: freed after it
    run: Callable[..., Any] | None = None  # set by ops.bind
    generator: bool = False
    hit: bool = False  # run at least once (by any launch of the program): what coverage counts
