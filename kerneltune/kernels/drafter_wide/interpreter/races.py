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

SHIFT = 8  # a tag is ``interval << SHIFT | wave``
MANY = (1 << SHIFT) - 1  # more than one wave read the byte in this interval (so a task may have at most 254 waves)


class Race(RuntimeError):
    """Two accesses of one location by different waves (or blocks) that nothing orders, at least one a write."""


class BarrierDivergence(RuntimeError):
    """A barrier that some of a block's waves reach and others skip."""


class Shadow:
    """Who touched each LDS byte in one barrier interval: ``interval << SHIFT | wave`` of the last write and of
    the reads (wave ``MANY`` for several), and the op of each (an index into the program's sites)."""

    def __init__(self, nbytes: int, sites: type) -> None:
        self.w = np.zeros(nbytes, np.int64)  # interval 0: never
        self.w_site = np.zeros(nbytes, sites)
        self.r = np.zeros(nbytes, np.int64)
        self.r_site = np.zeros(nbytes, sites)
        self.wrote = 0  # the last interval with a write, and with a read: an interval without skips their checks
        self.read = 0


class ShadowPool:
    """Shadows for the blocks in the middle of an interval; ``sites``: how many sites the program has."""

    def __init__(self, nbytes: int, sites: int, waves: int) -> None:
        if waves >= MANY:
            raise ValueError(f"blocks of {waves} waves: the LDS race check tells at most {MANY - 1} apart")
        self.waves = waves
        self.nbytes = nbytes
        self.sites = np.int16 if sites < 2 ** 15 else np.int32
        self.free: list[Shadow] = []
        self.interval = 0
        self.scratch = np.zeros(nbytes, np.int64)  # one op's lanes' waves, to find two waves at one byte
        self.scratches: dict[int, np.ndarray] = {}
        self.marks: dict[int, np.ndarray] = {}  # bytes (or rows) another wave of one op accessed too

    def next_interval(self) -> int:
        self.interval += 1
        return self.interval

    def take(self) -> Shadow:
        return self.free.pop() if self.free else Shadow(self.nbytes, self.sites)

    def give(self, shadow: Shadow) -> None:
        self.free.append(shadow)

    def own(self, blocks: int) -> Shadow:
        """A batch's shadow of its ``blocks`` blocks' LDS, kept for the launch (its blocks' intervals differ)."""
        if blocks * self.waves >= MANY:
            raise ValueError(f"a batch of {blocks} blocks of {self.waves} waves: the LDS race check tells at most "
                             f"{MANY - 1} waves apart")
        return Shadow(self.nbytes * blocks, self.sites)

    def marks_of(self, nbytes: int) -> np.ndarray:
        return self.marks.setdefault(nbytes, np.zeros(nbytes, bool))

    def scratch_of(self, nbytes: int) -> np.ndarray:
        if nbytes == self.nbytes:
            return self.scratch
        return self.scratches.setdefault(nbytes, np.zeros(nbytes, np.int64))


_SPANS = [np.arange(n) for n in range(65)]


def _bytes(offsets: np.ndarray, waves: np.ndarray, nbytes: int) -> tuple[Any, int, np.ndarray]:
    """(an index of each access's bytes, the row width it indexes by, each access's wave [accesses, 1]): where
    every access is aligned to its size, a row index into the shadow viewed as rows of ``nbytes`` (a gather by
    row: several times faster at a batch's thousands of lanes); else [accesses, nbytes] byte offsets."""
    if nbytes > 1 and not (offsets % nbytes).any():
        return offsets // nbytes, nbytes, waves.astype(np.int64)[:, None]
    span = _SPANS[nbytes] if nbytes < len(_SPANS) else np.arange(nbytes)
    return offsets[:, None] + span, 0, waves.astype(np.int64)[:, None]


def _rows(a: np.ndarray, width: int) -> np.ndarray:
    """A shadow array as ``_bytes``' index reads it."""
    return a[:a.size - a.size % width].reshape(-1, width) if width else a


def _other(tags: np.ndarray, iv: Any, wv: np.ndarray) -> np.ndarray:
    """Where ``tags`` (``interval << SHIFT | wave``) are of interval ``iv`` (each access's, in a batch) and another
    wave than ``wv``."""
    x = tags ^ (iv << SHIFT)
    return (x < (1 << SHIFT)) & (x != wv)


def _interval(task: Any, wv: np.ndarray) -> Any:
    """The barrier interval of each access's block: one for a block, each wave's block's in a batch."""
    return task.interval if task.blocks == 1 else task.intervals[wv // task.block_waves]


def _touched(last: int, task: Any, iv: Any) -> bool:
    """Whether a shadow whose last write (or read) was in interval ``last`` may hold one of ``iv``'s: intervals
    only grow, so none where ``last`` is older than every block's current one."""
    return last == iv if task.blocks == 1 else last >= int(task.intervals.min())


def _latest(last: int, task: Any, iv: Any) -> int:
    """What a shadow's last write (or read) interval becomes: a block's current one (a shadow from the pool may
    hold a later one of another block), a batch's latest."""
    return iv if task.blocks == 1 else max(last, int(iv.max()))


def _race(task: Any, sites: list[str], what: str, site: int, wave: int, other: str, osite: int, owave: int,
          offset: int) -> Race:
    block, base = task.bid, 0
    if task.blocks > 1:  # a batch: the block of the wave, the waves and the byte within it
        k, per = wave // task.block_waves, task.block_waves
        block, base, wave = task.bids[k], k * task.lds_block, wave - k * per
        owave = owave if owave == MANY else owave - k * per
    whose = "another wave's" if owave == MANY else f"wave {owave}'s"
    return Race(f"LDS race in rank {task.rank} block {block}: wave {wave}'s {what} at {sites[site]} and {whose} "
                f"{other} at {sites[osite]}, byte {offset - base} of the block's LDS, with no barrier between")


def _shared(task: Any, sh: Shadow, b: Any, width: int, wv: np.ndarray, every: bool = True) -> np.ndarray:
    """Where another wave's lane of this very op accesses the byte too: the op's waves scattered into a scratch
    (the last lane's stays) and read back, where a lane finds another wave; with ``every``, each such byte
    marked for all of its lanes (the last wave's too: a wave reading a byte another also read is a read by
    ``MANY``). Aligned accesses of one width meet whole rows or none, so one word a row serves ([accesses, 1]);
    else one a byte ([accesses, nbytes])."""
    pool = task.launch.pool
    n = sh.w.size // width if width else sh.w.size
    at, w = (b, wv[:, 0]) if width else (b, wv)
    scratch = pool.scratch_of(n)
    scratch[at] = w
    other = scratch[at] != w
    if every and other.any():
        mark = pool.marks_of(n)
        mark[at] = False
        mark[at[other]] = True
        other = mark[at]
    return other[:, None] if width else other


def _last_wave(task: Any, sh: Shadow, b: Any, width: int, i: tuple[int, int]) -> int:
    """The wave ``_shared`` left at access ``i``'s byte (another wave than the access's, without ``every``)."""
    if width:
        return int(task.launch.pool.scratch_of(sh.w.size // width)[b[i[0]]])
    return int(task.launch.pool.scratch_of(sh.w.size)[b[i]])


def _first(hit: np.ndarray) -> tuple[int, int]:
    i, j = np.nonzero(hit)
    return int(i[0]), int(j[0])


def lds_read(task: Any, offsets: np.ndarray, waves: np.ndarray, nbytes: int, site: int) -> None:
    """Check and record a load of ``nbytes`` at each offset by the wave of each lane."""
    sh = task.shadow_for_access()
    b, width, wv = _bytes(offsets, waves, nbytes)
    iv = _interval(task, wv)
    if _touched(sh.wrote, task, iv):
        w = _rows(sh.w, width)[b]
        bad = _other(w, iv, wv)
        if bad.any():
            i = _first(bad)
            raise _race(task, task.launch.sites, "read", site, int(wv[i[0], 0]), "write",
                        int(_rows(sh.w_site, width)[b][i]), int(w[i]) & MANY, int(offsets[i[0]]) + i[1])
    many: Any = False
    if wv.shape[0] > 1 and not (wv == wv[0, 0]).all():
        many = _shared(task, sh, b, width, wv)  # another wave's lane of this very op reads the byte too
    r = _rows(sh.r, width)
    if _touched(sh.read, task, iv):
        many = many | _other(r[b], iv, wv)
    sh.read = _latest(sh.read, task, iv)
    tag = (iv << SHIFT) | wv
    r[b] = np.where(many, (iv << SHIFT) | MANY, tag) if many is not False else tag
    _rows(sh.r_site, width)[b] = site


def lds_write(task: Any, offsets: np.ndarray, waves: np.ndarray, nbytes: int, site: int) -> None:
    """Check and record a store of ``nbytes`` at each offset by the wave of each lane."""
    sh = task.shadow_for_access()
    b, width, wv = _bytes(offsets, waves, nbytes)
    iv = _interval(task, wv)
    sites = task.launch.sites
    for last, tags, tag_sites, what in ((sh.wrote, sh.w, sh.w_site, "write"), (sh.read, sh.r, sh.r_site, "read")):
        if not _touched(last, task, iv):
            continue
        t = _rows(tags, width)[b]
        bad = _other(t, iv, wv)
        if bad.any():
            i = _first(bad)
            raise _race(task, sites, "write", site, int(wv[i[0], 0]), what, int(_rows(tag_sites, width)[b][i]),
                        int(t[i]) & MANY, int(offsets[i[0]]) + i[1])
    if wv.shape[0] > 1 and not (wv == wv[0, 0]).all():
        both = _shared(task, sh, b, width, wv, every=False)
        if both.any():
            i = _first(np.broadcast_to(both, b.shape if not width else (b.size, width)))
            raise _race(task, sites, "write", site, int(wv[i[0], 0]), "write", site, _last_wave(task, sh, b, width, i),
                        int(offsets[i[0]]) + i[1])
    sh.wrote = _latest(sh.wrote, task, iv)
    _rows(sh.w, width)[b] = (iv << SHIFT) | wv
    _rows(sh.w_site, width)[b] = site

