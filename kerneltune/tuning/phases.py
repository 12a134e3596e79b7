"""Where a candidate's wall time goes: the phases every journal record carries, and their summary.

The timing worker books ``compile_s`` (the compile itself, in a compile worker or not), ``compile_wait_s`` (what
the measurement waited for it), ``inputs_s``, ``reference_s`` (waiting for a compile worker to compile the check's
programs, then computing or loading its references: once per bucket and worker), ``check_s`` (running and judging
the candidate on every check case) and ``timing_s``. The sweep adds ``ask_s`` and ``tell_s`` (the strategy),
``journal_s`` (writing the previous record: a line cannot time its own write), ``wall_s`` (from the previous
record, or the bucket's start, to this one) and ``since_start_s`` (from the command's start).

In the steady state a candidate's wall is bounded by max(compile ÷ compile workers, check + timing): compiles
run ahead in compile workers while the timing worker checks and times the candidate before. ``summarize`` says how
near a sweep came to that bound and how busy it kept the timing worker.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kerneltune.files.records import Record

WORKER = ("compile_s", "compile_wait_s", "inputs_s", "reference_s", "check_s", "timing_s")
ENGINE = ("ask_s", "tell_s", "journal_s", "wall_s")
BUSY = ("inputs_s", "reference_s", "check_s", "timing_s")  # the timing worker's own work on the device
BOUND_SHOWN_S = 0.01  # a bound under this is said to be, not divided by (two decimals would show 0.00)


class Phases:
    """Seconds per phase of one candidate, as it is measured."""

    def __init__(self, **seconds: float):
        self.seconds = dict(seconds)

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def split(self, source: str, target: str, seconds: float) -> None:
        """Book ``seconds`` of ``source`` as ``target`` instead (the references inside a check)."""
        moved = min(max(seconds, 0.0), self.seconds.get(source, 0.0))
        self.seconds[source] = self.seconds.get(source, 0.0) - moved
        self.seconds[target] = self.seconds.get(target, 0.0) + moved

    def to_dict(self) -> dict[str, float]:
        return {k: round(v, 6) for k, v in self.seconds.items()}


@dataclass(frozen=True)
class PhaseSummary:
    """A sweep's (or a verify's) phases: medians over the steady state (each bucket's first candidate left
    out: it starts the worker and computes the bucket's references), rates over every candidate."""

    candidates: int
    steady: int
    per_minute: float  # candidates journaled per minute of wall, steady state
    busy_share: float  # the timing worker's device work over the wall, steady state
    medians: Mapping[str, float]
    first_s: float | None  # from the command's start to the first candidate journaled
    bound_s: float  # max(compile ÷ compile workers, check + timing), medians
    compile_workers: int
    totals: Mapping[str, float]  # seconds per phase summed over every candidate, each bucket's first included

    @property
    def mean_wall_s(self) -> float:
        """Seconds of wall per steady candidate. Not the median: with compile workers, candidates finish in
        bursts (0.15 s apart, then a wait for the next compile), so the median wall says nothing of the rate."""
        return 60.0 / self.per_minute if self.per_minute > 0 else float("inf")

    @property
    def wall_over_bound(self) -> float:
        return self.mean_wall_s / self.bound_s if self.bound_s > 0 else float("inf")

    def lines(self) -> list[str]:
        m = self.medians
        order = [*WORKER, *ENGINE]
        shown = ", ".join(f"{k[:-2]} {m[k]:.2f}" for k in order if k in m)
        first = f"; first candidate {self.first_s:.1f} s after the start" if self.first_s is not None else ""
        bound = f"max(compile / {self.compile_workers} workers, check + timing)"
        # A bound under what two decimals show (candidates that failed before their check, a kernel of microseconds)
        # gives no ratio worth printing ("inf x ... = 0.00 s"): the wall went to worker starts and the engine.
        against = (f"= {self.wall_over_bound:.2f} x {bound} = {self.bound_s:.2f} s" if self.bound_s >= BOUND_SHOWN_S
                   else f"against {bound} under {BOUND_SHOWN_S:.2f} s")
        return [
            f"{self.candidates} candidates, {self.per_minute:.1f} a minute in the steady state{first}",
            f"timing worker busy {100 * self.busy_share:.0f}% of the wall; wall per candidate "
            f"{self.mean_wall_s:.2f} s {against}",
            f"median seconds per candidate: {shown}",
            "seconds in all (every candidate, where the wall went): "
            + ", ".join(f"{k[:-2]} {self.totals[k]:.1f}" for k in order if k in self.totals),
        ]


@dataclass(frozen=True)
class BucketPhases:
    """One candidate's phases (a record's ``phases``), with its bucket: what ``summarize`` reads."""

    bucket: str
    seconds: Mapping[str, Any]

    @staticmethod
    def of_records(records: Iterable[Record]) -> list[BucketPhases]:
        """The phases of the records that carry them."""
        return [BucketPhases(r.bucket, r.phases) for r in records if r.phases]


def summarize(candidates: Iterable[BucketPhases], compile_workers: int) -> PhaseSummary | None:
    """The phases of the measured candidates (constraint records and replays carry none); None if none has any."""
    timed = [c.seconds for c in candidates if "wall_s" in c.seconds]
    buckets = [c.bucket for c in candidates if "wall_s" in c.seconds]
    if not timed:
        return None
    seen: set[str] = set()
    steady = []
    for bucket, r in zip(buckets, timed, strict=True):
        if bucket in seen:
            steady.append(r)
        seen.add(bucket)
    steady = steady or timed
    medians = {k: statistics.median(float(r.get(k, 0.0)) for r in steady)
               for k in (*WORKER, *ENGINE) if any(k in r for r in steady)}
    wall = sum(float(r["wall_s"]) for r in steady)
    busy = sum(float(r.get(k, 0.0)) for r in steady for k in BUSY)
    starts = [float(r["since_start_s"]) for r in timed if "since_start_s" in r]
    workers = max(compile_workers, 1)
    bound = max(medians.get("compile_s", 0.0) / workers,
                medians.get("check_s", 0.0) + medians.get("timing_s", 0.0))
    totals = {k: sum(float(r.get(k, 0.0)) for r in timed) for k in (*WORKER, *ENGINE) if any(k in r for r in timed)}
    return PhaseSummary(len(timed), len(steady), 60.0 * len(steady) / wall if wall > 0 else 0.0,
                        busy / wall if wall > 0 else 0.0, medians, min(starts) if starts else None, bound, workers,
                        totals)
