"""Global memory as named byte arrays at fake device addresses, and a block's LDS, both bounds-checked.

Every allocation sits at its own address, 4 KiB aligned, with an unmapped gap after it, so an access
that leaves its allocation fails (``MemoryFault``, naming the op's source line, the lane, the address
and the allocation it is nearest) instead of reading a neighbour. Accesses are whole lanes at once: a
load gathers each active lane's bytes, a store scatters them (lanes that store to one address: the
highest lane's value lands, one of the orders hardware may choose).

An allocation may belong to a rank (``owner``): a plain load by another rank is answered from that rank's L2
(``load_plain``). The first such read of a 128-byte line keeps a copy of it, and every later plain read of the
line by that rank, in the same launch, gets the copy, whatever the owner wrote since: the worst CDNA3 allows for
peer memory that is not mapped uncached, where no acquire invalidates the line. Atomic loads (acquire or relaxed,
at system scope: ``sc0 sc1``) always read memory. So a kernel that reads a peer's data with plain loads reads a
stale line once the peer rewrites it, and its check fails."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

BASE = 0x1000_0000_0000  # far from 0: a null or small integer used as an address faults
ALIGN = 4096
LINE = 128  # bytes of an L2 cache line on CDNA3


class MemoryFault(RuntimeError):
    """An access outside every allocation, or misaligned for what its op promises."""


@dataclass
class Allocation:
    name: str
    start: int
    data: np.ndarray  # uint8, the allocation's bytes (may be a view of the caller's array)
    owner: int | None = None  # the rank whose device memory it is (None: every rank's own)
    sid: np.ndarray | None = None  # each byte's last store in the launch (``weak_memory``); None: none yet

    @property
    def end(self) -> int:
        return self.start + self.data.size


class GlobalMemory:
    def __init__(self) -> None:
        self.allocations: list[Allocation] = []
        self._starts: list[int] = []
        self._starts_np: np.ndarray | None = None
        self._next = BASE
        self.version = 0  # counts stores and atomics: a poll that sees no new version has nothing new to see
        self.owned = False  # any allocation belongs to a rank: plain loads may be stale (``load_plain``)

    def allocate(self, name: str, data: np.ndarray, owner: int | None = None) -> int:
        """Place ``data`` (any array, its bytes shared, not copied), on rank ``owner``'s device if given, and
        return its address."""
        raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        a = Allocation(name, self._next, raw, owner)
        self.owned = self.owned or owner is not None
        self.allocations.append(a)
        self._starts.append(a.start)
        self._next = a.start + (-(-max(raw.size, 1) // ALIGN) + 1) * ALIGN
        return a.start

    def find(self, address: int) -> Allocation | None:
        k = bisect.bisect_right(self._starts, address) - 1
        return self.allocations[k] if k >= 0 else None

    def describe(self, address: int) -> str:
        a = self.find(address)
        if a is None:
            return f"0x{address:x}, below every allocation"
        return f"0x{address:x}, {address - a.start} bytes into {a.name} ({a.data.size} bytes)"

    def _locate(self, addresses: np.ndarray, nbytes: int, where: str) -> list[tuple[Allocation, Any]]:
        """Each allocation the lanes touch with the lanes in it (None: all of them); faults on any stray."""
        lo = int(addresses.min())
        a = self.find(lo)
        if a is not None and int(addresses.max()) + nbytes <= a.end:  # most accesses: all lanes in one
            return [(a, None)]
        if self._starts_np is None or self._starts_np.size != len(self._starts):
            self._starts_np = np.asarray(self._starts, dtype=np.int64)
        k = np.searchsorted(self._starts_np, addresses, side="right") - 1
        k0 = int(k[0])
        parts = [(k0, None)] if (k == k0).all() else [(int(kk), np.nonzero(k == kk)[0]) for kk in np.unique(k)]
        groups = []
        for kk, lanes in parts:
            a = self.allocations[kk] if kk >= 0 else None
            mine = addresses if lanes is None else addresses[lanes]
            bad = np.nonzero(mine + nbytes > a.end)[0] if a else np.arange(mine.size)
            if bad.size:
                lane = int(bad[0]) if lanes is None else int(lanes[bad[0]])
                raise MemoryFault(f"{where}: a {nbytes}-byte access at {self.describe(int(addresses[lane]))} "
                                  f"leaves every allocation (lane {lane})")
            groups.append((a, lanes))
        return groups

    def load(self, addresses: np.ndarray, nbytes: int, where: str) -> np.ndarray:
        """``nbytes`` at each address: uint8 [lanes, nbytes]."""
        first = int(addresses[0])
        if addresses.size == 1 or (addresses == first).all():
            a = self.find(first)
            if a is None or first + nbytes > a.end:
                raise MemoryFault(f"{where}: a {nbytes}-byte access at {self.describe(first)} leaves every allocation")
            row = a.data[first - a.start:first - a.start + nbytes]
            return np.broadcast_to(row, (addresses.size, nbytes)).copy()
        return self._gather(addresses, nbytes, self._locate(addresses, nbytes, where))

    def _gather(self, addresses: np.ndarray, nbytes: int, groups: list[tuple[Allocation, Any]]) -> np.ndarray:
        """The bytes of ``_locate``'s groups: uint8 [lanes, nbytes]."""
        if len(groups) == 1 and groups[0][1] is None:
            a = groups[0][0]
            off = addresses - a.start
            if not (off % nbytes).any():  # aligned to the access: one row index a lane
                return _rows(a.data, nbytes)[off // nbytes]
            return a.data[off[:, None] + np.arange(nbytes)]
        span = np.arange(nbytes)
        out = np.empty((addresses.size, nbytes), np.uint8)
        for a, lanes in groups:
            out[lanes] = a.data[(addresses[lanes] - a.start)[:, None] + span]
        return out

    def load_plain(self, addresses: np.ndarray, nbytes: int, where: str, reader: int,
                   held: dict[tuple[int, int], np.ndarray], groups: list | None = None) -> np.ndarray:
        """A plain load by rank ``reader``: as ``load``, but the bytes of another rank's allocation come from
        the lines ``held`` (that rank's L2: allocation start and line index to the line's bytes), each kept
        at its first read. ``groups``: ``_locate``'s answer for ``addresses``, where the caller has it."""
        groups = self._locate(addresses, nbytes, where) if groups is None else groups
        out = self._gather(addresses, nbytes, groups)
        for a, lanes in groups:  # the reader's own memory as loaded; another rank's from the lines held
            if a.owner is None or a.owner == reader:
                continue
            sel = slice(None) if lanes is None else lanes
            offs = (addresses[sel] - a.start)[:, None] + np.arange(nbytes)
            lines = offs // LINE
            seen = np.unique(lines)
            table = np.zeros((seen.size, LINE), np.uint8)
            for i, line in enumerate(seen.tolist()):
                kept = held.setdefault((a.start, line), a.data[line * LINE:(line + 1) * LINE].copy())
                table[i, :kept.size] = kept
            out[sel] = table[np.searchsorted(seen, lines), offs % LINE]
        return out

    def store(self, addresses: np.ndarray, data: np.ndarray, where: str) -> None:
        """``data`` uint8 [lanes, nbytes] to each lane's address, lanes in order."""
        span = np.arange(data.shape[1])
        for a, lanes in self._locate(addresses, data.shape[1], where):
            if lanes is None:
                off = addresses - a.start
                if not (off % data.shape[1]).any():
                    _rows(a.data, data.shape[1])[off // data.shape[1]] = data
                else:
                    a.data[off[:, None] + span] = data
            else:
                a.data[(addresses[lanes] - a.start)[:, None] + span] = data[lanes]
        self.version += 1


def _rows(data: np.ndarray, nbytes: int) -> np.ndarray:
    """The allocation's bytes as rows of ``nbytes`` (a view; a tail shorter than a row left out)."""
    return data[:data.size - data.size % nbytes].reshape(-1, nbytes)


class SharedMemory:
    """One block's LDS: its bytes start as 0xFF (a float32 read before any write is NaN)."""

    def __init__(self, nbytes: int) -> None:
        self.data = np.full(nbytes, 0xFF, np.uint8)

    def _check(self, offsets: np.ndarray, nbytes: int, where: str) -> None:
        bad = np.nonzero((offsets < 0) | (offsets + nbytes > self.data.size))[0]
        if bad.size:
            raise MemoryFault(f"{where}: a {nbytes}-byte LDS access at offset {int(offsets[bad[0]])} leaves the "
                              f"block's {self.data.size} bytes (lane {int(bad[0])})")

    def load(self, offsets: np.ndarray, nbytes: int, where: str) -> np.ndarray:
        self._check(offsets, nbytes, where)
        if not (offsets % nbytes).any():
            return _rows(self.data, nbytes)[offsets // nbytes]
        return self.data[offsets[:, None] + np.arange(nbytes)]

    def store(self, offsets: np.ndarray, data: np.ndarray, where: str) -> None:
        self._check(offsets, data.shape[1], where)
        n = data.shape[1]
        if not (offsets % n).any():
            _rows(self.data, n)[offsets // n] = data
        else:
            self.data[offsets[:, None] + np.arange(n)] = data
