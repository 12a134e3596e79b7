"""Grids of blocks as cooperative tasks over one global memory: a launch of one kernel on each rank.

A block is one task: its lanes run in lockstep (so its barriers hold), and it runs until it yields at a
poll-loop iteration or a publish (a release store); then the next task runs. A wait's deadline is read
from ``s_memrealtime``, a counter that ticks on each read; when every task has polled with no memory
written since, the clock jumps a stall's worth of ticks, so waits with a deadline end as the kernel's own
misses. Tasks still polling after ``stalls`` such jumps are a ``Deadlock``, reported with each task's
rank, block and the source line of its poll."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .memory import GlobalMemory, SharedMemory
from .ops import run_gen
from .program import Program


class Deadlock(RuntimeError):
    """Every task waits and nothing is written: ``sites`` names each (rank, block, poll line)."""

    def __init__(self, sites: list[str]):
        super().__init__(f"deadlock: {len(sites)} blocks poll with nothing left to run; " + "; ".join(sites[:6]))
        self.sites = sites


@dataclass(frozen=True)
class Grid:
    """One rank's launch: its kernel arguments (Python ints) and block count."""

    args: Sequence[int]
    blocks: int
    rank: int = 0


@dataclass
class Task:
    launch: Launch
    memory: GlobalMemory
    lds: SharedMemory
    lanes: int
    tid: np.ndarray
    bid: int
    rank: int
    site: str = ""


@dataclass
class Launch:
    """Runs ``program`` over ``grids`` (one per rank) sharing ``memory``."""

    program: Program
    memory: GlobalMemory
    arch: str
    seed: int | None = None  # None: blocks in order; else a seeded interleaving
    stall_ticks: int = 1 << 31
    stalls: int = 3
    max_resumes: int = 50_000_000  # a loop that never ends but keeps changing its values
    clock: int = 0
    resumes: int = 0
    lines: dict[int, dict[tuple[int, int], np.ndarray]] = field(default_factory=dict)  # each rank's held peer lines

    def held_lines(self, rank: int) -> dict[tuple[int, int], np.ndarray]:
        """The lines of other ranks' memory rank ``rank``'s L2 holds in this launch (``GlobalMemory.load_plain``)."""
        return self.lines.setdefault(rank, {})

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def _task(self, grid: Grid, bid: int) -> tuple[Task, Iterator[Any]]:
        p = self.program
        lanes = p.block_size[0] if p.block_size else 64
        task = Task(self, self.memory, SharedMemory(p.lds_bytes), lanes, np.arange(lanes, dtype=np.int64), bid,
                    grid.rank)
        env: list[Any] = [None] * p.slots
        for slot, t, value in zip(p.params, p.param_types, grid.args, strict=True):
            env[slot] = np.array([value], dtype=t.dtype)
        return task, run_gen(task, p.body, env, None)

    def run(self, grids: Sequence[Grid]) -> None:
        rng = random.Random(self.seed) if self.seed is not None else None
        ready = deque(self._task(g, b) for g in grids for b in range(g.blocks))
        idle, version, stalls = 0, self.memory.version, 0
        with np.errstate(all="ignore"):
            while ready:
                if rng is not None and len(ready) > 1:
                    ready.rotate(-rng.randrange(len(ready)))
                task, gen = ready.popleft()
                self.resumes += 1
                if self.resumes > self.max_resumes:
                    raise Deadlock([f"rank {t.rank} block {t.bid} at {t.site} (no end after {self.max_resumes} "
                                    "resumes)" for t, _ in [(task, gen), *ready]])
                try:
                    kind, op = next(gen)
                except StopIteration:
                    idle = 0
                    continue
                task.site = op.where
                ready.append((task, gen))
                if self.memory.version != version or kind != "poll":
                    version, idle, stalls = self.memory.version, 0, 0
                    continue
                idle += 1
                if idle >= 2 * len(ready):
                    if stalls >= self.stalls:
                        raise Deadlock([f"rank {t.rank} block {t.bid} at {t.site}" for t, _ in ready])
                    stalls += 1
                    idle = 0
                    self.clock += self.stall_ticks
