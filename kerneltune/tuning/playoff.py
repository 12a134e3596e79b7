"""A bucket's leaders timed again head to head before its entry is written.

A sweep times candidates one after another, minutes apart; a clock that drifts in between (a power cap, a warming
GPU, a neighbour's load on a CPU) can swap leaders that differ by less than the drift. The playoff times the
leaders in interleaved rounds on the same inputs (each round every leader takes a turn, the order reversed every
other round) and decides on the per-round ratios of their times, which the drift cancels out of: the winner is
the leader whose times are lowest against the others round by round, and each other leader's median ratio to it
comes with a distribution-free 95% confidence interval. A leader whose interval includes parity is a tie: a
runner-up the entry keeps, measured as good as the winner.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kerneltune.files.records import Record
from kerneltune.seams.wire import Status

LEADERS = 5  # at most this many are timed again
WITHIN = 0.03  # a leader is within the best's noise, or this much of it, whichever is more
ROUNDS = 10  # rounds a playoff request times
MAX_ROUNDS = 4 * ROUNDS  # a playoff times on, ``ROUNDS`` at a time, while a leader is undecided (``undecided``)
TURN_MS = 20.0  # a turn's batch is sized to take about this long (at least one call, at most ``MAX_BATCH``)
MAX_BATCH = 10
CONFIDENCE = 0.95


def _noise(record: Record) -> float:
    """A timing's own noise (the half-width of its median's 95% interval), 1 (100%) where it is missing or wider:
    a median known to no better than itself."""
    noise = record.timed.get("noise")
    return min(float(noise), 1.0) if isinstance(noise, int | float) and noise >= 0 else 1.0


def leaders(records: Sequence[Record]) -> list[Record]:
    """The records worth a playoff, fastest first: the timed ones (``ok``) whose median is within the best's noise
    (its spread or the noise at its stop) or ``WITHIN`` of it, and the ones stopped early (``pruned``) whose first
    batch's interval reached that far down (a busy host's batch wide enough to hide the true winner), at most
    ``LEADERS``; none where fewer than two."""
    timed = [r for r in records if r.status in (Status.OK, Status.PRUNED) and r.median_us is not None]
    ok = sorted((r for r in timed if r.status == Status.OK), key=lambda r: (r.median_us, r.key))
    if not ok:
        return []
    best = ok[0]
    limit = best.median_us * (1 + max(WITHIN, best.spread or 0.0, best.noise))

    def reach(r: Record) -> float:  # how fast the record may be: its median, less its noise if stopped
        return r.median_us * (1 - _noise(r)) if r.status == Status.PRUNED else r.median_us

    # The fastest median first (the incumbent a playoff must unseat beyond doubt), then the others by how fast they
    # may be, so that a stopped candidate within reach is not crowded out by settled ones behind it.
    others = sorted((r for r in timed if r is not best and reach(r) <= limit), key=lambda r: (reach(r), r.key))
    chosen = [best, *others[:LEADERS - 1]]
    return chosen if len(chosen) >= 2 else []


def batch_for(median_us: float) -> int:
    """Calls per turn: about ``TURN_MS`` of them, at least one, at most ``MAX_BATCH``."""
    return int(min(MAX_BATCH, max(1, round(TURN_MS * 1e3 / max(median_us, 1e-3)))))


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A distribution-free interval for the median of ``values``: the order statistics k and n-k+1 (1-based)
    with k the largest for which the binomial tail below it is at most (1 - confidence) / 2; the whole range
    where there are too few values for that confidence."""
    x = sorted(values)
    n = len(x)
    tail, k = 0.0, 0
    while k < n:
        nxt = tail + math.comb(n, k) / 2**n  # P(Bin(n, 1/2) <= k)
        if nxt > (1 - confidence) / 2:
            break
        tail, k = nxt, k + 1
    k = max(k, 1)
    return x[k - 1], x[n - k]


@dataclass(frozen=True)
class Playoff:
    """What a playoff decided: the winner, and each other leader's median ratio of times to the winner's with
    its confidence interval (above 1: slower)."""

    winner: str  # a config key (``journal.config_key``)
    rounds: int
    batch: int
    ratios: Mapping[str, tuple[float, float, float]]  # key -> (low, median, high)
    seconds: float = 0.0  # its wall on the timing worker, builds included
    medians: Mapping[str, float] = dataclasses.field(default_factory=dict)  # key -> its median time over rounds (µs)

    @property
    def ties(self) -> list[str]:
        """The leaders as good as the winner: their interval includes parity. Closest first."""
        return sorted((k for k, (lo, _, _) in self.ratios.items() if lo <= 1.0), key=lambda k: self.ratios[k][1])

    def beats(self, key: str) -> bool:
        """Whether the winner ran faster than ``key``'s leader beyond doubt: that leader's interval lies above 1."""
        return key in self.ratios and self.ratios[key][0] > 1.0

    def kept_for(self, incumbent: str) -> Playoff:
        """The decision an entry keeps: this one where its winner beats ``incumbent`` (the fastest sequential
        median) beyond doubt, else the incumbent's: a winner picked from within the noise would flip from one run
        to the next. The incumbent's ratios to the others are read off the winner's."""
        if incumbent == self.winner or self.beats(incumbent) or incumbent not in self.ratios:
            return self
        lo_w, med_w, hi_w = self.ratios[incumbent]
        ratios = {self.winner: (1 / hi_w, 1 / med_w, 1 / lo_w)}  # the winner against the incumbent
        for k, (lo, med, hi) in self.ratios.items():
            if k != incumbent:
                ratios[k] = (lo / hi_w, med / med_w, hi / lo_w)  # a conservative interval of a ratio of ratios
        return dataclasses.replace(self, winner=incumbent, ratios=ratios)

    @property
    def margin(self) -> float | None:
        """How much slower the closest other leader ran (median ratio less one); None with one leader."""
        return min(r[1] for r in self.ratios.values()) - 1.0 if self.ratios else None

    def to_dict(self, label: Any = str) -> dict[str, Any]:
        """As a table entry keeps it; ``label`` names a config key for a reader."""
        return {"rounds": self.rounds, "batch": self.batch, "leaders": 1 + len(self.ratios),
                "seconds": round(self.seconds, 3),
                "margin": self.margin, "ties": [label(k) for k in self.ties],
                "ratios": {label(k): {"low": lo, "median": med, "high": hi}
                           for k, (lo, med, hi) in self.ratios.items()}}


def undecided(playoff: Playoff, width: float) -> bool:
    """Whether a leader's interval both includes parity and is wider than ``width`` (twice ``--rel-noise``): the
    rounds so far say neither that it differs from the winner nor that it ties, as a busy host's 10 rounds may."""
    return any(lo <= 1.0 <= hi and hi - lo > width for lo, _, hi in playoff.ratios.values())


def decide(times: Mapping[str, Sequence[float]], batch: int) -> Playoff:
    """The winner of round-by-round ``times`` (key -> one time per round, all of equal length): the leader with the
    lowest median, over rounds, of its time over the round's mean of every leader's, then every other leader's
    per-round ratio to it."""
    keys = list(times)
    t = np.asarray([times[k] for k in keys], dtype=np.float64)
    if t.ndim != 2 or t.shape[0] < 2 or t.shape[1] < 1 or not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError(f"playoff: {t.shape[0]} leaders' times over {t.shape[-1]} rounds, not all positive")
    relative = np.median(t / t.mean(axis=0), axis=1)
    w = int(np.argmin(relative))
    ratios = {}
    for i, k in enumerate(keys):
        if i != w:
            r = t[i] / t[w]
            lo, hi = median_interval(r.tolist())
            ratios[k] = (float(lo), float(np.median(r)), float(hi))
    return Playoff(keys[w], t.shape[1], batch, ratios, medians={k: float(np.median(t[i])) for i, k in enumerate(keys)})
