"""A weak model of global memory at the level the drafter relies on: scoped release and acquire, checked as races.

The unit is the **wave**: a fence orders only its own wave's accesses (a block's waves fence one by one in
``device.release_block``), so a store is private to the wave that made it until a *release* by that wave (a
release fence then an atomic store, or a release store or RMW) or a barrier of its block (``gpu.barrier``
carries workgroup fences) followed by a release of another wave of the block. Another block sees it only
through an *acquire* (an acquire load or RMW, or a relaxed atomic load then an acquire fence) that reads the
value that release wrote, and only where both scopes include both sides: ``workgroup`` the same block,
``agent`` the same rank (GPU), ``system`` (``one-as``) any. Synchronisation is *direct*: a wave knows the
releases it acquired itself (and, after a barrier, those its block's waves acquired), not what the releasing
block had acquired before; a chain through a third block counts as unordered. That is stricter than the
hardware (a false race, never a missed one), it keeps an acquire to a few scalar updates, and the drafter
never relies on such a chain (its interpreted steps run without a race).

Rather than choose one of the values a load may return when it could see more than one, every load is checked:
a load of a byte whose last store does not *happen before* it under the rules above is a ``Race`` naming both
source lines, both waves (rank, block, wave) and the address, and so is a store over such a store. Two atomic
accesses never race (a poll may read any tag). A program with no such race returns the same values as under
sequential consistency (data-race freedom), so the interleavings of blocks the scheduler runs stand for the
weak executions too; a tag published before its data, a missing fence or release, or a scope too narrow
fails in every interleaving in which the data is read after it was written.

How: every block counts its releases (its *clock*) and its barriers (its *epoch*); a store is stamped with its
block, wave, clock, epoch and whether it is atomic. A release is a record (block, wave, clock, epoch, scope);
a wave's knowledge holds, per block, the highest release clock it acquired, the wave that made it and the
highest epoch at any release it acquired. A store is covered if its block made it before a barrier that
precedes a release the reader acquired, or its own wave made it at or before such a release. An acquire
updates the acquiring wave's knowledge; a barrier merges its waves' knowledge into the block's.

What this model does not cover (and the drafter README says so): a load that runs *before* the store it races
with is not caught here (there is no read history for global memory): it reads the old value, which the checks
may or may not see; a wave's release seen by a block covers only the latest release of that block's waves in
one barrier interval (a second wave's earlier release in the same interval is forgotten: a false race, never
a missed one); waves of one block ordered through global flags rather than a barrier are not modelled (a false
race); nor are the hardware's caches beyond ``memory.GlobalMemory.load_plain``'s peer L2, out-of-thin-air
values, or an atomic load returning an older value than the latest (a longer spin, which another
interleaving already gives)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .races import Race

SCOPES = {"singlethread": 0, "wavefront": 0, "workgroup": 1, "agent": 2, "": 3, "system": 3}
RELEASE = (5, 6, 7)  # LLVM atomic orderings: release, acq_rel, seq_cst
ACQUIRE = (4, 6, 7)  # acquire, acq_rel, seq_cst


def scope_of(syncscope: Any) -> int:
    """An LLVM AMDGPU syncscope (``one-as`` forms too) as 0 wavefront, 1 workgroup, 2 agent, 3 system."""
    s = str(syncscope or "").removesuffix("one-as").rstrip("-")
    return SCOPES.get(s, 3)


class Stamps:
    """Who made each store: one row a stamp id (0: nothing stored in this launch), columns ``COLUMNS``."""

    COLUMNS = ("block", "wave", "clock", "epoch", "atomic", "site", "record")
    BLOCK, WAVE, CLOCK, EPOCH, ATOMIC, SITE, RECORD = range(7)

    def __init__(self) -> None:
        self.n = 1
        self.table = np.zeros((1024, len(self.COLUMNS)), np.int64)
        self.table[0, self.BLOCK] = -1

    def add(self, *row: int) -> int:
        if self.n == self.table.shape[0]:
            self.table = np.concatenate([self.table, np.zeros_like(self.table)])
        self.table[self.n] = row
        self.n += 1
        return self.n - 1


class WeakMemory:
    """The launch's happens-before bookkeeping over ``blocks`` blocks (their ranks in ``ranks``)."""

    def __init__(self, ranks: list[int], sites: list[str]):
        nb = len(ranks)
        self.ranks = ranks
        self.sites = sites
        self.clock = [0] * nb
        self.epoch = np.zeros(nb, np.int64)
        base = np.zeros((3, nb), np.int64)
        base[0] = -1  # no release of any block seen
        base[1] = -1
        # per block: (clock seen, its wave, epoch seen) of every block, one array (a batch's blocks are read at once)
        self.know = np.repeat(base[None], nb, axis=0)
        self.delta: list[dict[int, np.ndarray]] = [{} for _ in range(nb)]  # a wave's knowledge since the barrier
        self.joined: list[set[int]] = [set() for _ in range(nb)]
        self.wave_joined: list[set[int]] = [set() for _ in range(nb)]  # rid * 64 + wave, since the barrier
        self.fenced: dict[tuple[int, int], int] = {}  # (block, wave) -> its last release fence's record
        self.relaxed: dict[tuple[int, int], set[int]] = {}  # records read by relaxed loads, for an acquire fence
        self.records: list[tuple] = [()]  # (block, wave, clock, epoch, scope) of each release
        self.stamps = Stamps()
        self.polled: dict[tuple[int, int], np.ndarray] = {}  # (block, site) -> what its last atomic load read

    # ------------------------------------------------------------------ knowledge
    def _knows(self, gb: int, wave: int) -> np.ndarray:
        return self.delta[gb].get(wave, self.know[gb])

    def barrier(self, gb: int) -> None:
        """The block's waves meet: each knows what any of them knew, and every store before is ordered."""
        d = self.delta[gb]
        if d:
            k = self.know[gb]
            for w in d.values():
                k = _join(k, w)
            self.know[gb] = k
            self.joined[gb].update(key // 64 for key in self.wave_joined[gb])
            d.clear()
            self.wave_joined[gb].clear()
        self.epoch[gb] += 1

    def _release(self, gb: int, wave: int, scope: int) -> int:
        k = self.clock[gb]
        self.clock[gb] = k + 1
        self.records.append((gb, wave, k, int(self.epoch[gb]), scope))
        return len(self.records) - 1

    def _acquire(self, gb: int, wave: int, rids: list[int], scope: int) -> None:
        """Take the releases ``rids`` (those whose scopes reach both sides) into the wave's knowledge."""
        joined = self.wave_joined[gb]
        out = None
        for rid in rids:
            key = rid * 64 + wave
            if rid <= 0 or rid in self.joined[gb] or key in joined:
                continue
            rgb, rwave, k, e, rscope = self.records[rid]
            if not (_includes(rscope, rgb, rwave, gb, wave, self.ranks)
                    and _includes(scope, gb, wave, rgb, rwave, self.ranks)):
                continue
            joined.add(key)
            if out is None:
                out = self.delta[gb].get(wave)
                if out is None:
                    out = self.delta[gb][wave] = self.know[gb].copy()
            if k > out[0, rgb]:
                out[0, rgb], out[1, rgb] = k, rwave
            if e > out[2, rgb]:
                out[2, rgb] = e

    def fence(self, gb: int, waves: np.ndarray, order: int, scope: int) -> None:
        for w in np.nonzero(waves)[0].tolist():
            if order in ACQUIRE:
                self._acquire(gb, w, sorted(self.relaxed.pop((gb, w), ())), scope)
            if order in RELEASE:
                self.fenced[(gb, w)] = self._release(gb, w, scope)

    # ------------------------------------------------------------------ accesses
    def store(self, task: Any, addrs: np.ndarray, waves: np.ndarray, nbytes: int, site: int, atomic: bool,
              order: int, scope: int) -> None:
        """Stamp the bytes at ``addrs`` (each an access of wave ``waves``), after checking that each store it
        overwrites happened before it."""
        gb = task.gb
        groups = task.memory._locate(addrs, nbytes, self.sites[site])
        ids = {}
        for w in (waves[:1] if (waves == waves[0]).all() else np.flatnonzero(np.bincount(waves))).tolist():
            rec = self._release(gb, w, scope) if atomic and order in RELEASE else (
                self.fenced.get((gb, w), 0) if atomic else 0)
            clock = self.clock[gb] - 1 if atomic and order in RELEASE else self.clock[gb]
            ids[w] = self.stamps.add(gb, w, clock, int(self.epoch[gb]), int(atomic), site, rec)
        one = next(iter(ids.values())) if len(ids) == 1 else None
        sid = np.array([ids.get(w, 0) for w in range(max(ids) + 1)], np.int32)
        for a, lanes in groups:
            offs = addrs - a.start if lanes is None else addrs[lanes] - a.start
            wv = waves if lanes is None else waves[lanes]
            if a.sid is None:
                a.sid = np.zeros(a.data.size, np.int32)
            rows, at = _sid_rows(a.sid, offs, nbytes)
            old = rows[at]
            if old.any():
                self._check(task, a, offs, wv, old, atomic, site, "write")
            rows[at] = one if one is not None else sid[wv][:, None]

    def load(self, task: Any, addrs: np.ndarray, waves: np.ndarray, nbytes: int, site: int, atomic: bool,
             order: int, scope: int, groups: list | None = None, readers: np.ndarray | None = None) -> None:
        """Check the bytes a load reads; an atomic load takes the records of the stores it read: an acquire
        joins them, a relaxed one keeps them for its wave's next acquire fence. ``groups``: the one allocation
        every address lies in (``GlobalMemory._locate``'s answer), where the caller has it. ``readers``: each
        access's block (its index in the launch) where a batch's blocks make one plain load (``waves``: their
        waves in their blocks)."""
        assert readers is None or not atomic, "a batch's atomic loads are taken block by block"
        for a, lanes in groups or task.memory._locate(addrs, nbytes, self.sites[site]):
            if a.sid is None:
                continue
            offs = addrs - a.start if lanes is None else addrs[lanes] - a.start
            wv = waves if lanes is None else waves[lanes]
            rows, at = _sid_rows(a.sid, offs, nbytes)
            got = rows[at]
            if not got.any():
                continue
            if readers is not None:
                self._check_readers(task, a, offs, wv, got, readers if lanes is None else readers[lanes], site)
                continue
            self._check(task, a, offs, wv, got, atomic, site, "read")
            if atomic:
                self._take(task.gb, got[:, 0], wv, site, order, scope)

    def _take(self, gb: int, sids: np.ndarray, waves: np.ndarray, site: int, order: int, scope: int) -> None:
        """The records of the stores an atomic load read (``sids``, a lane's each), for the lanes' waves."""
        keys = self.stamps.table[sids, Stamps.RECORD] * 64 + waves
        last = self.polled.get((gb, site))
        if last is not None and last.shape == keys.shape and (last == keys).all():
            return  # a poll that read what it read before: joined already
        self.polled[(gb, site)] = keys
        block, waves_joined = self.joined[gb], self.wave_joined[gb]
        new: dict[int, list[int]] = {}
        for key in _distinct(keys).tolist():
            rid, w = divmod(key, 64)
            if rid > 0 and rid not in block and key not in waves_joined:
                new.setdefault(w, []).append(rid)
        for w, rids in new.items():
            if order in ACQUIRE:
                self._acquire(gb, w, rids, scope)
            else:
                self.relaxed.setdefault((gb, w), set()).update(rids)

    def _ordered(self, gb: int, key: int, atomic: bool) -> bool:
        """``_check``'s rule for one (stamp, reader wave) key, in plain Python (most accesses read one store)."""
        sid, w = divmod(key, 64)
        if sid == 0:
            return True
        sg, sw, st, se, sa = self.stamps.table[sid, :5].tolist()
        if sg == gb:
            return sw == w or se < self.epoch[gb]
        if atomic and sa:
            return True
        k = self._knows(gb, w)
        return bool(se < k[2, sg] or (sw == k[1, sg] and st <= k[0, sg]))

    def _check(self, task: Any, a: Any, offs: np.ndarray, waves: np.ndarray, sids: np.ndarray, atomic: bool,
               site: int, what: str) -> None:
        """Each byte (each lane's at ``offs`` in ``a``, their stamps ``sids`` [lanes, bytes], each lane of wave
        ``waves``) stored before the access under the model, or a ``Race``."""
        gb = task.gb
        first = sids[:, 0]
        if sids.shape[1] > 1 and not (sids == first[:, None]).all():
            keys = (sids.astype(np.int64) * 64 + waves[:, None]).ravel()
        else:
            keys = first.astype(np.int64) * 64 + waves
        keys = _distinct(keys)  # a few: one a store op and wave that wrote what the access reads
        if keys.size == 1 and self._ordered(gb, int(keys[0]), atomic):
            return
        s, w = keys // 64, keys % 64
        t = self.stamps.table[s]
        sg, sw, st, se = t[:, 0], t[:, 1], t[:, 2], t[:, 3]
        ok = (sg == gb) & ((sw == w) | (se < self.epoch[gb]))  # the block's own: program order or a barrier
        if ok.all():
            return
        ok |= s == 0
        if atomic:
            ok |= t[:, 4] == 1
        if ok.all():
            return
        sgi = np.where(sg < 0, 0, sg)
        if self.delta[gb]:
            know = np.stack([self._knows(gb, v) for v in range(int(w.max()) + 1)])
            kt, kv, ke = know[w, 0, sgi], know[w, 1, sgi], know[w, 2, sgi]
        else:
            k = self.know[gb]
            kt, kv, ke = k[0, sgi], k[1, sgi], k[2, sgi]
        ok |= (sg != gb) & ((se < ke) | ((sw == kv) & (st <= kt)))
        if ok.all():
            return
        i = int(np.argmax(~ok))
        j, reader = int(s[i]), int(w[i])
        at = np.nonzero((sids == j) & (waves[:, None] == reader))
        raise self._race(task, a, site, what, gb, reader, j, int(offs[at[0][0]]) + int(at[1][0]))

    def _check_readers(self, task: Any, a: Any, offs: np.ndarray, waves: np.ndarray, sids: np.ndarray,
                       readers: np.ndarray, site: int) -> None:
        """``_check`` of a plain load by several blocks at once (a batch's), ``readers`` each access's block."""
        r = readers.astype(np.int64)
        stamps, rows = _row_stamps(sids)
        s = stamps.astype(np.int64)
        g, w = (r, waves) if rows is None else (r[rows], waves[rows])
        table = self.stamps.table
        sg = table[s, Stamps.BLOCK]
        # nothing stored, or the block's own (program order or a barrier): most of a batch's reads, judged as they
        # are (thousands of bytes, no sort); the rest, distinct, against what each reader wave acquired
        ok = (s == 0) | ((sg == g) & ((table[s, Stamps.WAVE] == w) | (table[s, Stamps.EPOCH] < self.epoch[g])))
        if ok.all():
            return
        bad = ~ok
        keys = _distinct(((s[bad] << 16) | g[bad]) << 6 | w[bad])
        s, g, w = keys >> 22, (keys >> 6) & 0xFFFF, keys & 63
        t = table[s]
        sg, sw, st, se = t[:, 0], t[:, 1], t[:, 2], t[:, 3]
        # a wave that acquired since its block's barrier
        if any(self.delta[x] for x in np.flatnonzero(np.bincount(g)).tolist()):
            know = np.stack([self._knows(int(x), int(y)) for x, y in zip(g.tolist(), w.tolist(), strict=True)])
            kt, kv, ke = (know[np.arange(keys.size), i, sg] for i in range(3))
        else:
            kt, kv, ke = (self.know[g, i, sg] for i in range(3))
        fine = (se < ke) | ((sw == kv) & (st <= kt))
        if fine.all():
            return
        i = int(np.argmax(~fine))
        j, reader, rgb = int(s[i]), int(w[i]), int(g[i])
        at = np.nonzero((sids == j) & (waves[:, None] == reader) & (r[:, None] == rgb))
        view = task.views[task.gbs.index(rgb)]
        raise self._race(view, a, site, "read", rgb, reader, j, int(offs[at[0][0]]) + int(at[1][0]))

    def _race(self, task: Any, a: Any, site: int, what: str, gb: int, reader: int, stamp: int, byte: int) -> Race:
        row = self.stamps.table[stamp]
        og = int(row[Stamps.BLOCK])
        return Race(f"global race: rank {task.rank} block {task.bid} wave {reader}'s {what} at "
                    f"{self.sites[site]} of byte {byte} of {a.name} (0x{a.start + byte:x}) and the "
                    f"{'atomic ' if row[Stamps.ATOMIC] else ''}store by rank {self.ranks[og]} block "
                    f"{task.launch.block_ids[og]} wave {int(row[Stamps.WAVE])} at {self.sites[int(row[Stamps.SITE])]}:"
                    " no release and acquire (of a scope that includes both) order the store before it")


_SPANS = [np.arange(n) for n in range(65)]


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values of an int64 array, sorted (most accesses read one store's bytes: one value): a few
    hundred by sorting, more by marking them where their range is small (measured fastest each way)."""
    if (keys == keys[0]).all():
        return keys[:1]
    if keys.size > 512:
        lo = int(keys.min())
        span = int(keys.max()) - lo
        if span < 1 << 16:
            present = np.zeros(span + 1, bool)
            present[keys - lo] = True
            return np.nonzero(present)[0] + lo
    s = np.sort(keys)
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def _row_stamps(sids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Each access's stamps in ``sids`` [accesses, bytes], fewer than its bytes: the first byte's and those of
    the bytes where a stamp changes in some access (a store as wide as the load gives one, narrower ones a few),
    with the access of each (None: one an access, in order)."""
    n, nb = sids.shape
    if nb == 1 or (sids == sids[:, :1]).all():
        return sids[:, 0], None
    flat = sids.ravel()  # where a byte's stamp is not the byte before's, by column (no reduction across rows)
    changed = np.bincount((np.flatnonzero(flat[1:] != flat[:-1]) + 1) % nb, minlength=nb)
    cols = np.concatenate(([0], np.nonzero(changed[1:])[0] + 1))
    return sids[:, cols].ravel(), np.repeat(np.arange(n), cols.size)


def _sid_rows(sid: np.ndarray, offs: np.ndarray, nbytes: int) -> tuple[np.ndarray, Any]:
    """(an array, an index into it) that give each access's bytes of ``sid`` as [accesses, nbytes]: rows of
    ``nbytes`` where every access is aligned to its size (a view, gathered by row), else the bytes one by one."""
    if nbytes > 1 and not (offs % nbytes).any():
        return sid[:sid.size - sid.size % nbytes].reshape(-1, nbytes), offs // nbytes
    return sid, offs[:, None] + (_SPANS[nbytes] if nbytes < len(_SPANS) else np.arange(nbytes))


def _join(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a is b:
        return a
    newer = b[0] > a[0]
    out = np.where(newer, b, a)
    out[2] = np.maximum(a[2], b[2])
    return out


def _includes(scope: int, gb: int, wave: int, other_gb: int, other_wave: int, ranks: list[int]) -> bool:
    """Whether an operation of ``scope`` by (``gb``, ``wave``) reaches (``other_gb``, ``other_wave``)."""
    if scope >= 3:
        return True
    if scope == 2:
        return ranks[gb] == ranks[other_gb]
    if scope == 1:
        return gb == other_gb
    return gb == other_gb and wave == other_wave
