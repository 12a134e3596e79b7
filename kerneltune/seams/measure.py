"""Timing with a noise-based stopping rule (in the spirit of nvbench), over any backend's timer.

Samples come from the backend (CUPTI, device events, the host clock). Batches of samples are taken
until the relative 95% confidence half-width of the median falls under ``rel_noise`` or
``max_seconds`` of sampling have passed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from kerneltune.seams.protocols import Backend
from kerneltune.seams.settings import MeasureSettings


@dataclass(frozen=True)
class Timing:
    """One candidate's measured kernel time."""

    median_us: float
    spread: float  # (p75 - p25) / median
    samples: int
    min_us: float
    noise: float  # relative 95% CI half-width of the median at the stop
    converged: bool  # noise reached the threshold before the time cap
    clocks: dict[str, Any] = field(default_factory=dict)
    stopped_early: bool = False  # stopped as clearly slower than ``prune_above_us`` (``sample_until_quiet``)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def median_noise(samples: Sequence[float]) -> float:
    """Relative half-width of a 95% CI of the median (order-statistic bound)."""
    n = len(samples)
    if n < 3:
        return math.inf
    s = np.sort(np.asarray(samples))
    half = 1.96 * math.sqrt(n) / 2
    lo = s[max(math.floor(n / 2 - half), 0)]
    hi = s[min(math.ceil(n / 2 + half), n - 1)]
    med = float(np.median(s))
    return float((hi - lo) / 2 / med) if med > 0 else math.inf


def summarize(samples_ms: Sequence[float], converged: bool, clocks: dict[str, Any],
              stopped_early: bool = False) -> Timing:
    s = np.asarray(samples_ms, dtype=np.float64) * 1e3
    med = float(np.median(s))
    p25, p75 = np.percentile(s, [25, 75])
    return Timing(
        median_us=med,
        spread=float((p75 - p25) / med) if med > 0 else 0.0,
        samples=len(s),
        min_us=float(s.min()),
        noise=median_noise(s),
        converged=converged,
        clocks=clocks,
        stopped_early=stopped_early,
    )


def clearly_above(samples_ms: Sequence[float], bound_us: float) -> bool:
    """Whether the samples' median is above ``bound_us`` beyond its own noise: the low end of its 95% interval
    (median less ``median_noise``) lies above the bound. A batch disturbed by a neighbour's load is wide (the
    one that threw a busy host's true winner away read 4,107 µs at 100% noise, its settled runs 1,933-2,055 µs):
    it decides nothing."""
    if len(samples_ms) < 3:
        return False
    median = float(np.median(samples_ms)) * 1e3
    return median * (1.0 - median_noise(samples_ms)) > bound_us


def sample_until_quiet(take_batch: Callable[[int], list[float]], settings: MeasureSettings,
                       clocks: Callable[[], dict[str, Any]] | None = None,
                       prune_above_us: float | None = None,
                       clock: Callable[[], float] | None = None) -> Timing:
    """Call ``take_batch(n)`` (returns n kernel times in ms) until the noise rule stops it.

    With ``prune_above_us``, a candidate is stopped early (``stopped_early``) once its samples are slower than
    that beyond their own noise (``clearly_above``); a batch too noisy to say so is timed on, batch after batch,
    until it does, settles or meets the time cap. ``clock``: the cap's clock (a fake one in tests; by default
    ``time.monotonic``).
    """
    clock = clock or time.monotonic
    before = clocks() if clocks else {}
    take_batch(settings.warmup)
    samples: list[float] = []
    start = clock()
    converged = stopped = False
    while True:
        samples.extend(take_batch(settings.batch))
        if prune_above_us is not None and clearly_above(samples, prune_above_us):
            stopped = True
            break
        if len(samples) >= settings.min_samples and median_noise(samples) <= settings.rel_noise:
            converged = True
            break
        if clock() - start > settings.max_seconds:
            break
    after = clocks() if clocks else {}
    info = {"before": before, "after": after}
    if after.get("throttle_active"):
        info["throttled"] = True
    return summarize(samples, converged, info, stopped)


@dataclass(frozen=True)
class Turn:
    """One implementation's turn in alternating rounds: its median time (µs) and the clocks read at its end."""

    name: str
    median_us: float
    clocks: dict[str, Any] = field(default_factory=dict)


def take_turns(samplers: dict[str, Callable[[int], list[float]]], rounds: int, batch: int, warmup: int = 3,
               settle_s: float = 0.0, clocks: Callable[[], dict[str, Any]] | None = None,
               clock: Callable[[], float] | None = None) -> list[Turn]:
    """The samplers taking turns in every round, the order reversed every other round (A B, B A, ...); each
    turn's median over one batch of ``batch`` samples.

    Two implementations timed one after the other see the GPU in different states: a bench timed one dense
    problem at 1600 and 1805 µs minutes apart on a power-capped H200
    (results/ranker_attention/2026-12-03-h200-run-ab/). Taking turns within rounds puts both under the same
    heat, so the ratio of two round medians is what differs between the
    implementations, not between the moments.

    With ``settle_s`` a turn first runs its sampler for that long, untimed: under a power cap the clock follows
    the power drawn with a lag, and a turn shorter than it runs at the clock the previous turn's implementation
    left (in turns of 50 calls the H200 ran cuDNN at the clock ours had left, and ours at cuDNN's:
    1371b475c129:results/ranker_attention/2026-12-04-h200-run-aj/). With
    ``clocks`` each turn reads them after its timed batch. ``clock``: the settle period's clock (a fake one in
    tests; by default ``time.monotonic``).
    """
    clock = clock or time.monotonic
    if rounds < 1 or batch < 1 or len(samplers) < 2:
        raise ValueError("take_turns: at least two samplers, one round and one sample per turn")
    if settle_s < 0:
        raise ValueError(f"take_turns: settle_s must be >= 0, got {settle_s}")
    for take in samplers.values():
        take(warmup)
    names = list(samplers)
    turns = []
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            start = clock()
            while clock() - start < settle_s:
                samplers[name](batch)
            median = float(np.median(samplers[name](batch))) * 1e3
            turns.append(Turn(name, median, clocks() if clocks else {}))
    return turns


def turn_medians(turns: list[Turn]) -> dict[str, list[float]]:
    """Each implementation's turn medians (µs), round by round."""
    out: dict[str, list[float]] = {}
    for t in turns:
        out.setdefault(t.name, []).append(t.median_us)
    return out


def round_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> dict[str, float]:
    """Median and quartiles of the per-round ratios of two implementations' times, and the rounds."""
    r = np.asarray(numerator, dtype=np.float64) / np.asarray(denominator, dtype=np.float64)
    p25, med, p75 = np.percentile(r, [25, 50, 75])
    return {"ratio": float(med), "p25": float(p25), "p75": float(p75), "rounds": int(r.size)}


def time_with(backend: Backend, fn: Any, args: tuple[Any, ...], settings: MeasureSettings,
              prune_above_us: float | None = None) -> Timing:
    """Time ``fn(*args)`` with the backend's timer and clocks under the noise rule."""
    return sample_until_quiet(backend.sampler(fn, args, settings.cold_l2), settings, backend.clocks, prune_above_us)
