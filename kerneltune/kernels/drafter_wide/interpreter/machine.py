"""Grids of blocks as cooperative tasks over one global memory: a launch of one kernel on each rank.

A block is one task: its lanes run in lockstep, each lane in its wave (``lane // 64``), and it runs until it
yields at a poll-loop iteration or a publish (a release store); then the schedule (``schedule.Schedule``:
fixed, random or PCT, with its seed) picks the next. Waves are the unit of ordering: a ``gpu.barrier`` is the
rendezvous of the block's waves (one that not every wave reaches is a ``BarrierDivergence``), LDS accesses of
different waves with no barrier between are a ``races.Race``, and global memory follows ``weak_memory``'s
scoped release/acquire model, its unordered accesses a ``Race`` too. A wait's deadline is read from
``s_memrealtime``, a counter that ticks on each read; when every task has polled with no memory written
since, the clock jumps a stall's worth of ticks, so waits with a deadline end as the kernel's own misses.
Tasks still polling after ``stalls`` such jumps are a ``Deadlock``, reported with each task's rank, block and
the source line of its poll."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .memory import GlobalMemory, SharedMemory
from .ops import run_gen
from .program import Program
from .races import Shadow, ShadowPool
from .schedule import Order, Schedule
from .weak_memory import WeakMemory

WAVE = 64  # lanes of a wave on gfx942 and gfx950


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


@dataclass(frozen=True)
class BlockView:
    """One block of a batched task, as the weak memory model and race reports see a task."""

    launch: Launch
    memory: GlobalMemory
    gb: int
    bid: int
    rank: int


@dataclass
class Task:
    """One block, or a batch of blocks of one rank run in lockstep (``Launch.batch``): ``lanes`` of all of them,
    ``threads`` a block; a batch's block ids, a lane's LDS and each block's barrier interval are its own."""

    launch: Launch
    memory: GlobalMemory
    lds: SharedMemory
    lanes: int
    tid: np.ndarray
    bid: int
    rank: int
    gb: int = 0  # the block's index in the launch (every rank's blocks); a batch's first
    site: str = ""
    interval: int = 0  # the block's current barrier interval (``races``)
    shadow: Shadow | None = None
    threads: int = 0  # a block's lanes (0: all of ``lanes``, one block)
    bids: tuple[int, ...] = ()  # a batch's block ids and launch indices
    gbs: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.threads = self.threads or self.lanes
        self.blocks = self.lanes // self.threads
        self.waves = -(-self.lanes // WAVE)
        self.block_waves = -(-self.threads // WAVE)
        self.lane = np.arange(self.lanes, dtype=np.int64)
        self.wave_of_lane = (self.lane // WAVE) if self.blocks > 1 else (self.tid // WAVE).astype(np.int64)
        if self.blocks > 1:
            self.block_id = np.repeat(np.asarray(self.bids, np.int64), self.threads)
            self.lds_block = self.lds.data.size // self.blocks
            self.lds_base = (self.lane // self.threads) * self.lds_block
            self.intervals = np.array([self.launch.pool.next_interval() for _ in range(self.blocks)], np.int64)
            self.gb_of = np.asarray(self.gbs, np.int64)
            self.views = [BlockView(self.launch, self.memory, g, b, self.rank) for g, b in zip(self.gbs, self.bids,
                                                                                            strict=True)]
        else:
            self.block_id = np.array([self.bid], np.int64)

    def active_waves(self, mask: Any) -> np.ndarray:
        """Which waves have an active lane (bool per wave)."""
        if mask is None:
            return np.ones(self.waves, bool)
        m = np.broadcast_to(mask, (self.lanes,))
        if self.lanes % WAVE:
            return np.array([m[w * WAVE:(w + 1) * WAVE].any() for w in range(self.waves)])
        return m.reshape(self.waves, WAVE).any(axis=1)

    def per_block(self, addrs: np.ndarray, waves: np.ndarray) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
        """(the block, its accesses' addresses, their waves in the block) for each block with an access."""
        if self.blocks == 1:
            yield self, addrs, waves
            return
        block = waves // self.block_waves
        for k in np.flatnonzero(np.bincount(block)).tolist():  # a few small ids: counted, not sorted
            sel = block == k
            yield self.views[k], addrs[sel], waves[sel] - k * self.block_waves

    def shadow_for_access(self) -> Shadow:
        if self.shadow is None:
            self.shadow = self.launch.pool.take() if self.blocks == 1 else self.launch.pool.own(self.blocks)
        return self.shadow

    def barrier(self, blocks: Any = None) -> None:
        """The waves of the block (of each of a batch's ``blocks``, a bool each; None: all) meet: LDS accesses
        before are ordered against those after, and so are global ones."""
        launch = self.launch
        if self.blocks > 1:
            for k in (range(self.blocks) if blocks is None else np.nonzero(blocks)[0].tolist()):
                self.intervals[k] = launch.pool.next_interval()
                if launch.weak is not None:
                    launch.weak.barrier(self.gbs[k])
            return
        if self.shadow is not None:
            launch.pool.give(self.shadow)
            self.shadow = None
        self.interval = launch.pool.next_interval()
        if launch.weak is not None:
            launch.weak.barrier(self.gb)


@dataclass
class Launch:
    """Runs ``program`` over ``grids`` (one per rank) sharing ``memory``."""

    program: Program
    memory: GlobalMemory
    arch: str
    seed: int | None = None  # without ``schedule``: None the fixed order, else ``Schedule("random", seed)``
    schedule: Schedule | None = None
    races: bool = True  # LDS accesses of different waves with no barrier between are a ``Race``
    weak: WeakMemory | bool | None = True  # the weak model of global memory (True: made at ``run``)
    stall_ticks: int = 1 << 31
    stalls: int = 3
    max_resumes: int = 50_000_000  # a loop that never ends but keeps changing its values
    clock: int = 0
    resumes: int = 0
    lines: dict[int, dict[tuple[int, int], np.ndarray]] = field(default_factory=dict)  # each rank's held peer lines
    block_ids: list[int] = field(default_factory=list)  # each block's id, by its index in the launch
    # Blocks of one rank whose ``batch(rank, block id)`` is the same (not None) run as one task of up to
    # ``batch_size`` blocks, their lanes in lockstep: as many blocks an op, for blocks that take one path. A block
    # of a batch that waits for one it is batched with, for what that one does later in program order, stalls
    # (lanes in lockstep cannot pass each other): a ``Deadlock``, or a wait's deadline passed where it has one (the
    # clock jumps; the drafter then reports a miss and carries on, and its next unordered read is a ``Race``).
    batch: Callable[[int, int], Hashable] | None = None
    batch_size: int = 8
    # Given a dict: each integer comparison's and clamp's ``lhs - rhs`` its active lanes met, clipped to -2..2, by
    # ``id`` of its op (``ops.COMPARED``): what shows a test met each bound below, at and above.
    compares: dict[int, set[int]] | None = None

    def __post_init__(self) -> None:
        if self.schedule is None:
            self.schedule = Schedule() if self.seed is None else Schedule("random", self.seed)
        self.sites = self.program.sites
        lanes = self.program.block_size[0] if self.program.block_size else WAVE
        self.pool = ShadowPool(self.program.lds_bytes, len(self.sites), -(-lanes // WAVE))

    def held_lines(self, rank: int) -> dict[tuple[int, int], np.ndarray]:
        """The lines of other ranks' memory rank ``rank``'s L2 holds in this launch (``GlobalMemory.load_plain``)."""
        return self.lines.setdefault(rank, {})

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def _task(self, grid: Grid, bids: list[int], gbs: list[int]) -> tuple[Task, Iterator[Any]]:
        p = self.program
        threads = p.block_size[0] if p.block_size else 64
        k = len(bids)
        task = Task(self, self.memory, SharedMemory(p.lds_bytes * k), threads * k,
                    np.tile(np.arange(threads, dtype=np.int64), k), bids[0], grid.rank, gbs[0],
                    interval=self.pool.next_interval(), threads=threads, bids=tuple(bids), gbs=tuple(gbs))
        env: list[Any] = [None] * p.slots
        for slot, t, value in zip(p.params, p.param_types, grid.args, strict=True):
            env[slot] = np.array([value], dtype=t.dtype)
        return task, run_gen(task, p.body, env, None)

    def _batches(self, blocks: list[tuple[Grid, int]]) -> list[tuple[Grid, list[int], list[int]]]:
        """The launch's tasks: (grid, block ids, launch indices), in the order of their first blocks; blocks of one
        rank with one ``batch`` key together, ``batch_size`` at most a task."""
        tasks: list[tuple[Grid, list[int], list[int]]] = []
        open_: dict[tuple[int, Hashable], int] = {}
        for gb, (g, b) in enumerate(blocks):
            key = None if self.batch is None else self.batch(g.rank, b)
            at = open_.get((g.rank, key)) if key is not None else None
            if at is not None and len(tasks[at][1]) < self.batch_size:
                tasks[at][1].append(b)
                tasks[at][2].append(gb)
                continue
            if key is not None:
                open_[(g.rank, key)] = len(tasks)
            tasks.append((g, [b], [gb]))
        return tasks

    def run(self, grids: Sequence[Grid]) -> None:
        blocks = [(g, b) for g in grids for b in range(g.blocks)]
        self.block_ids = [b for _, b in blocks]
        if self.weak is True:
            self.weak = WeakMemory([g.rank for g, _ in blocks], self.sites)
        elif self.weak is False:
            self.weak = None
        assert self.schedule is not None
        tasks = self._batches(blocks)
        ready = Order(self.schedule, len(tasks))
        for i, (g, bids, gbs) in enumerate(tasks):
            ready.push(i, self._task(g, bids, gbs))
        # a stall: every ready task has polled (the fixed order: twice round) with nothing written since; a random
        # order that has not yet picked the task that can go on is none
        idle, polled, version, stalls = 0, set(), self.memory.version, 0
        with np.errstate(all="ignore"):
            while ready:
                i, (task, gen) = ready.pop()
                self.resumes += 1
                if self.resumes > self.max_resumes:
                    raise Deadlock([f"rank {t.rank} {_blocks(t)} at {t.site} (no end after {self.max_resumes} "
                                    "resumes)" for t, _ in [(task, gen), *ready.items()]])
                try:
                    kind, op = next(gen)
                except StopIteration:
                    idle = 0
                    polled.clear()
                    continue
                task.site = op.where
                ready.push(i, (task, gen), spinning=kind == "poll")
                if self.memory.version != version or kind != "poll":
                    version, idle, stalls = self.memory.version, 0, 0
                    polled.clear()
                    continue
                idle += 1
                polled.add(i)
                if idle >= 2 * len(ready) and len(polled) >= len(ready):
                    if stalls >= self.stalls:
                        raise Deadlock([f"rank {t.rank} {_blocks(t)} at {t.site}" for t, _ in ready.items()])
                    stalls += 1
                    idle = 0
                    polled.clear()
                    self.clock += self.stall_ticks


def _blocks(task: Task) -> str:
    return f"block {task.bid}" if task.blocks == 1 else f"blocks {', '.join(map(str, task.bids))} (a batch)"
