"""Run a test kernel: its Program, a fresh global memory and one grid."""

from __future__ import annotations

from typing import Any

import numpy as np

from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
from kerneltune.kernels.drafter_wide.interpreter.program import Program


def launch(text: str, buffers: dict[str, np.ndarray], scalars: list[int] | None = None, blocks: int = 1,
           seed: int | None = None, **options: Any) -> tuple[Launch, dict[str, np.ndarray]]:
    """Allocate ``buffers`` (kept by name, written in place), pass their addresses then ``scalars``; ``options``
    go to ``Launch`` (``schedule``, ``weak``, ``races``)."""
    mem = GlobalMemory()
    addrs = [mem.allocate(name, b) for name, b in buffers.items()]
    run = Launch(Program(text), mem, "gfx942", seed=seed, **options)
    run.run([Grid([*addrs, *(scalars or [])], blocks)])
    return run, buffers
