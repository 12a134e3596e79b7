"""Which ready block runs next: a schedule is ``(kind, seed)``, so any interleaving a check ran can be run again.

- ``fixed``: blocks in order, each resumed in turn (round robin).
- ``random``: a uniformly random ready block at every resume.
- ``pct``: probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): every block gets a random priority
  at least ``depth``; the highest-priority block that is not spinning runs; at ``depth - 1`` random resumes
  (change points, drawn from the first ``steps``) the running block drops to priority ``depth - i``. A bug
  that needs ``d`` orderings between events is found with probability at least ``1 / (n k^(d-1))`` a run,
  which is what makes a narrow window show within a few runs where the round robin never opens it.

A block that polled and read nothing new is *spinning*: under ``pct`` it runs only when no other block can,
in turn with the other spinning blocks, so a high priority cannot starve the block it waits for."""

from __future__ import annotations

import heapq
import random
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

KINDS = ("fixed", "random", "pct")
STEPS = 30_000  # about the resumes of a PCT run of the drafter's test shape (its blocks one by one)


@dataclass(frozen=True)
class Schedule:
    kind: str = "fixed"
    seed: int = 0
    depth: int = 3  # pct: priority change points + 1
    steps: int = STEPS  # pct: where change points may fall

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"schedule kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.depth < 1 or self.steps < 1:
            raise ValueError(f"schedule {self}: depth and steps must be at least 1")

    @property
    def label(self) -> str:
        if self.kind == "fixed":
            return "fixed"
        pct = f" d={self.depth}" + (f" n={self.steps}" if self.steps != STEPS else "")
        return f"{self.kind} seed {self.seed}" + (pct if self.kind == "pct" else "")

    @classmethod
    def parse(cls, label: str) -> Schedule:
        """The schedule a ``label`` names (a check's record carries it): ``fixed``, ``random seed 3``,
        ``pct seed 5 d=3``, ``pct seed 5 d=3 n=30000`` (change points within the first 30000 resumes)."""
        m = re.fullmatch(r"\s*(fixed|random|pct)(?:\s+seed\s+(\d+))?(?:\s+d=(\d+))?(?:\s+n=(\d+))?\s*", label)
        if not m:
            raise ValueError(f"schedule {label!r}: 'fixed', 'random seed N' or 'pct seed N d=D [n=STEPS]'")
        kind, seed, depth, steps = m.groups()
        return cls(kind, int(seed or 0), int(depth or 3), int(steps or STEPS))


def exploration(count: int, first_seed: int = 1, depth: int = 3, steps: int = STEPS) -> tuple[Schedule, ...]:
    """``count`` schedules: the fixed order, then ``pct`` and ``random`` in turn from ``first_seed``."""
    out = [Schedule()]
    for i in range(max(count, 1) - 1):
        kind = "pct" if i % 2 == 0 else "random"
        out.append(Schedule(kind, first_seed + i, depth, steps))
    return tuple(out[:max(count, 1)])


class Order:
    """The ready blocks in the order a schedule runs them; items are (key, payload), ``key`` the block's
    index in the launch."""

    def __init__(self, schedule: Schedule, blocks: int):
        self.schedule = schedule
        self.kind = schedule.kind
        self.rng = random.Random(schedule.seed)
        self.fifo: deque[Any] = deque()
        self.pool: list[Any] = []
        self.heap: list[tuple[int, int, Any]] = []
        self.step = 0
        if self.kind == "pct":
            prio = list(range(schedule.depth, schedule.depth + blocks))
            self.rng.shuffle(prio)
            self.priority = prio
            self.changes = {self.rng.randrange(1, schedule.steps + 1): schedule.depth - 1 - i
                            for i in range(schedule.depth - 1)}
            self.seq = 0

    def __len__(self) -> int:
        return len(self.fifo) + len(self.pool) + len(self.heap)

    def items(self) -> list[Any]:
        """Every ready payload (for a report)."""
        return [item for _, item in [*self.fifo, *self.pool, *(h[2] for h in self.heap)]]

    def push(self, key: int, item: Any, spinning: bool = False) -> None:
        if self.kind == "fixed":
            self.fifo.append((key, item))
        elif self.kind == "random":
            self.pool.append((key, item))
        elif spinning:
            self.fifo.append((key, item))
        else:
            self.seq += 1
            heapq.heappush(self.heap, (-self.priority[key], self.seq, (key, item)))

    def pop(self) -> tuple[int, Any]:
        self.step += 1
        if self.kind == "fixed":
            return self.fifo.popleft()
        if self.kind == "random":
            i = self.rng.randrange(len(self.pool))
            self.pool[i], self.pool[-1] = self.pool[-1], self.pool[i]
            return self.pool.pop()
        key, item = heapq.heappop(self.heap)[2] if self.heap else self.fifo.popleft()
        low = self.changes.get(self.step)
        if low is not None:
            self.priority[key] = low
        return key, item
