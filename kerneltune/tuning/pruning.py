"""Early stopping as a pruner of its own, in the manner of Optuna's pruners: the sweep asks it, for each candidate,
the time above which the worker may stop timing (``measure.clearly_above`` judges that on the samples, beyond their
own noise), and whether a record it stopped early may stand for this sweep's measurement on resume.

A pruner is a frozen dataclass of its options; ``--early-stop-factor`` and ``--no-early-stop`` pick one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

EARLY_STOP_FACTOR = 1.5  # a candidate timed this many times the bucket's best so far, beyond its own noise, stops


class Pruner(Protocol):
    @property
    def stops_early(self) -> bool:
        """Whether it stops candidates early: a record stopped early is resumed only under a pruner that does."""
        ...

    def bound_us(self, best_us: float | None) -> float | None:
        """The time a candidate's first batches must stay under to be timed on, given the bucket's best so far;
        None: timed to the noise rule."""
        ...


@dataclass(frozen=True)
class EarlyStop:
    """Stop timing a candidate once it is ``factor`` times the bucket's best so far, beyond its own noise."""

    factor: float = EARLY_STOP_FACTOR

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 1):
            raise ValueError(f"early-stop-factor: must be a finite number above 1, got {self.factor}")

    @property
    def stops_early(self) -> bool:
        return True

    def bound_us(self, best_us: float | None) -> float | None:
        return None if best_us is None else best_us * self.factor


@dataclass(frozen=True)
class NoPruning:
    """Every candidate timed to the noise rule (``--no-early-stop``)."""

    @property
    def stops_early(self) -> bool:
        return False

    def bound_us(self, best_us: float | None) -> float | None:
        return None
