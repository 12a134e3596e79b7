"""What ``verify drafter-wide --interpret`` holds in memory at its peak, said before it starts, and how many worker
processes this machine's memory allows: a CI runner has 7-16 GB for everything it runs, and a check killed for
memory (or swapping) tells its user nothing.

The figures are measured, not modelled: the peak resident memory (PSS, the shared libraries counted once) of the
parent and of a worker at its largest job, over verify's default shapes, by ``.ci/interpret_memory.py``
(``results/drafter_wide/2026-12-07-memory/``), with a margin. The machine's memory is the least of its RAM and the
limit of every control group above this process (v2 ``memory.max``, v1 ``memory.limit_in_bytes``): a container's
limit is what kills."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

GB = 1e9
# Measured peaks (PSS) over verify's default shapes, 2026-12-07 (results/drafter_wide/2026-12-07-memory/): the parent
# (the CLI, torch imported: 0.35 GB; the references and the steps' outputs it judges) 0.8-0.9 GB, and one worker at
# its largest job (the 512-thread shape's three-layer step, or with the references cold the full model's element
# model: its 8-bit weights or one float64 matrix, the interpreter's state) up to 2.2-2.4 GB; a tenth more.
PARENT_BYTES = int(0.9 * GB * 1.1)
WORKER_BYTES = int(2.4 * GB * 1.1)


@dataclass(frozen=True)
class MachineMemory:
    limit: int  # bytes this process's tree may hold: RAM, or less where a control group says so
    available: int  # bytes free for it now (MemAvailable, or the group's limit less its use)
    source: str  # where ``limit`` came from, in words

    @property
    def line(self) -> str:
        return f"{self.limit / GB:.1f} GB ({self.source}), {self.available / GB:.1f} GB of it available now"


def expected(workers: int) -> int:
    """Bytes ``verify --interpret`` holds at its peak with ``workers`` worker processes."""
    return PARENT_BYTES + workers * WORKER_BYTES


def fitting(limit: int) -> int:
    """The most worker processes ``limit`` bytes hold (0: not even one)."""
    return max(0, math.floor((limit - PARENT_BYTES) / WORKER_BYTES))


def _meminfo(root: Path) -> dict[str, int]:
    out = {}
    for line in (root / "proc/meminfo").read_text(encoding="ascii").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * 1024
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2, no limit) reads as none


def _group_limits(root: Path) -> list[tuple[int, int | None, str]]:
    """(limit, use, the group's path) of every memory control group from this process's up to the root."""
    try:
        lines = (root / "proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            base, limit_file, use_file = root / "sys/fs/cgroup", "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            base, limit_file, use_file = root / "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        group = Path(path.lstrip("/"))
        while True:
            limit = _read_int(base / group / limit_file)
            if limit is not None:
                found.append((limit, _read_int(base / group / use_file), f"/{group}"))
            if group == Path("."):
                break
            group = group.parent
    return found


def machine_memory(root: Path = Path("/")) -> MachineMemory:
    """This machine's memory as a process here may use it (``root``: where ``/proc`` and ``/sys`` are, for tests)."""
    info = _meminfo(root)
    limit, available, source = info["MemTotal"], info.get("MemAvailable", info["MemTotal"]), "RAM"
    for group_limit, use, path in _group_limits(root):
        if group_limit < limit:
            limit, source = group_limit, f"the memory limit of control group {path}"
        if use is not None:
            available = min(available, max(0, group_limit - use))
    return MachineMemory(limit, min(available, limit), source)


@dataclass(frozen=True)
class Plan:
    workers: int
    expected: int  # bytes at peak
    machine: MachineMemory

    @property
    def line(self) -> str:
        """The statement ``verify --interpret`` makes before it starts."""
        warn = "" if self.machine.available >= self.expected else (
            f"; only {self.machine.available / GB:.1f} GB is free now, so it may be slowed or killed")
        return (f"expects {self.expected / GB:.1f} GB resident at its peak with {self.workers} worker process"
                f"{'es' if self.workers > 1 else ''}; this machine has {self.machine.line}{warn}")


def plan(wanted: int, machine: MachineMemory | None = None) -> Plan:
    """``wanted`` workers (one a core, or as set), fewer where the machine's memory holds fewer; a ValueError (one
    line: the command's exit 3) where it does not hold even one."""
    machine = machine or machine_memory()
    workers = min(wanted, fitting(machine.limit))
    if workers < 1:
        raise ValueError(f"verify --interpret needs about {expected(1) / GB:.1f} GB resident at its peak (one "
                         f"worker process); this machine has {machine.line}")
    return Plan(workers, expected(workers), machine)
