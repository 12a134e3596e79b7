"""Races between the waves of a block in LDS, found from the accesses themselves, whatever order the waves ran in.

A block's lanes run in lockstep, but each lane belongs to its wave (``lane // 64``) and every LDS byte keeps,
for the current *barrier interval* of its block (the accesses since the block's last barrier), the wave and
op that last wrote it and the wave (or ``MANY``) and op that read it. An access by one wave to a byte that
another wave wrote in the same interval (read after write, or write after write), or a write to a byte another
wave read in it (write after read), is a ``Race`` naming both source lines, both waves and the offset: no
barrier orders the two, so on the hardware either may come first. Two waves' lanes of one op that write one
byte race too.

Why this is exact without running the waves apart: a barrier is the only thing that orders one wave's LDS
accesses against another's (the kernel syncs waves with ``gpu.barrier`` alone), so two accesses of different
waves are ordered iff a barrier lies between them, which does not depend on the order the waves ran in. A
program with no such race reads the same bytes under every interleaving of its waves, so the lockstep run
stands for all of them; a program with one fails here, in every interleaving. A barrier that only some of a
block's waves reach (its lanes all masked off in the others) is a ``BarrierDivergence``: on the hardware the
block hangs or pairs the wrong barriers.

What lockstep cannot show: a wave that waits for something another wave of its block does later in program
order (a spin on an LDS or global word) hangs here where the hardware, running the waves apart, goes on; and
the hardware's choice between two racing values (a race is reported, not given a value). The drafter's waves
never wait for one another except at barriers.

Each interval gets a number unique in the launch, so a shadow handed back at a barrier needs no clearing and
serves whichever block next touches LDS (``ShadowPool``): only blocks in the middle of an interval hold one."""

from __future__ import annotations

from typing import Any

import numpy as np

MANY = 15  # more than one wave read the byte in this interval (so a block may have at most 14 waves)


class Race(RuntimeError):
    """Two accesses of one location by different waves (or blocks) that nothing orders, at least one a write."""


class BarrierDivergence(RuntimeError):
    """A barrier that some of a block's waves reach and others skip."""


class Shadow:
    """Who touched each LDS byte in one barrier interval: ``interval << 4 | wave`` of the last write and of the
    reads (wave ``MANY`` for several), and the op of each (an index into the program's sites)."""

    def __init__(self, nbytes: int, sites: type) -> None:
        self.w = np.zeros(nbytes, np.int32)  # interval 0: never
        self.w_site = np.zeros(nbytes, sites)
        self.r = np.zeros(nbytes, np.int32)
        self.r_site = np.zeros(nbytes, sites)
        self.wrote = 0  # the last interval with a write, and with a read: an interval without skips their checks
        self.read = 0


class ShadowPool:
    """Shadows for the blocks in the middle of an interval; ``sites``: how many sites the program has."""

    def __init__(self, nbytes: int, sites: int, waves: int) -> None:
        if waves >= MANY:
            raise ValueError(f"blocks of {waves} waves: the LDS race check tells at most {MANY - 1} apart")
        self.nbytes = nbytes
        self.sites = np.int16 if sites < 2 ** 15 else np.int32
        self.free: list[Shadow] = []
        self.interval = 0
        self.scratch = np.zeros(nbytes, np.int32)  # one op's lanes' waves, to find two waves at one byte

    def next_interval(self) -> int:
        self.interval += 1
        return self.interval

    def take(self) -> Shadow:
        return self.free.pop() if self.free else Shadow(self.nbytes, self.sites)

    def give(self, shadow: Shadow) -> None:
        self.free.append(shadow)


_SPANS = [np.arange(n) for n in range(65)]


def _bytes(offsets: np.ndarray, waves: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each access's bytes [accesses, nbytes] and its wave [accesses, 1]."""
    span = _SPANS[nbytes] if nbytes < len(_SPANS) else np.arange(nbytes)
    return offsets[:, None] + span, waves.astype(np.int32)[:, None]


def _other(tags: np.ndarray, iv: int, wv: np.ndarray) -> np.ndarray:
    """Where ``tags`` (``interval << 4 | wave``) are of interval ``iv`` and another wave than ``wv``."""
    x = tags ^ (iv << 4)
    return (x < 16) & (x != wv)


def _race(task: Any, sites: list[str], what: str, site: int, wave: int, other: str, osite: int, owave: int,
          offset: int) -> Race:
    whose = "another wave's" if owave == MANY else f"wave {owave}'s"
    return Race(f"LDS race in rank {task.rank} block {task.bid}: wave {wave}'s {what} at {sites[site]} and {whose} "
                f"{other} at {sites[osite]}, byte {offset} of the block's LDS, with no barrier between")


def _first(hit: np.ndarray) -> tuple[int, int]:
    i, j = np.nonzero(hit)
    return int(i[0]), int(j[0])


def lds_read(task: Any, offsets: np.ndarray, waves: np.ndarray, nbytes: int, site: int) -> None:
    """Check and record a load of ``nbytes`` at each offset by the wave of each lane."""
    sh, iv = task.shadow_for_access(), task.interval
    b, wv = _bytes(offsets, waves, nbytes)
    if sh.wrote == iv:
        bad = _other(sh.w[b], iv, wv)
        if bad.any():
            i = _first(bad)
            raise _race(task, task.launch.sites, "read", site, int(wv[i[0], 0]), "write", int(sh.w_site[b[i]]),
                        int(sh.w[b[i]]) & 15, int(b[i]))
    many: Any = False
    if wv.shape[0] > 1 and not (wv == wv[0, 0]).all():
        scratch = task.launch.pool.scratch
        scratch[b] = wv
        many = scratch[b] != wv  # another wave's lane of this very op reads the byte too
    if sh.read == iv:
        many = many | _other(sh.r[b], iv, wv)
    sh.read = iv
    tag = (iv << 4) | wv
    sh.r[b] = np.where(many, (iv << 4) | MANY, tag) if many is not False else tag
    sh.r_site[b] = site


def lds_write(task: Any, offsets: np.ndarray, waves: np.ndarray, nbytes: int, site: int) -> None:
    """Check and record a store of ``nbytes`` at each offset by the wave of each lane."""
    sh, iv = task.shadow_for_access(), task.interval
    b, wv = _bytes(offsets, waves, nbytes)
    sites = task.launch.sites
    if sh.wrote == iv:
        bad = _other(sh.w[b], iv, wv)
        if bad.any():
            i = _first(bad)
            raise _race(task, sites, "write", site, int(wv[i[0], 0]), "write", int(sh.w_site[b[i]]),
                        int(sh.w[b[i]]) & 15, int(b[i]))
    if sh.read == iv:
        bad = _other(sh.r[b], iv, wv)
        if bad.any():
            i = _first(bad)
            raise _race(task, sites, "write", site, int(wv[i[0], 0]), "read", int(sh.r_site[b[i]]),
                        int(sh.r[b[i]]) & 15, int(b[i]))
    if wv.shape[0] > 1 and not (wv == wv[0, 0]).all():
        scratch = task.launch.pool.scratch
        scratch[b] = wv
        both = scratch[b] != wv
        if both.any():
            i = _first(both)
            raise _race(task, sites, "write", site, int(wv[i[0], 0]), "write", site, int(scratch[b[i]]),
                        int(b[i]))
    sh.wrote = iv
    sh.w[b] = (iv << 4) | wv
    sh.w_site[b] = site
