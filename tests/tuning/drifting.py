"""A kernel timed on a simulated clock that slows as calls accumulate: a config's call returns its cost at the
nominal clock, and the backend's timer scales it by how far the clock has drifted. Timed one after the other,
a cheaper config measured later can read slower than a dearer one measured earlier: what a playoff must see
through."""

from __future__ import annotations

import itertools
from typing import Any

from kerneltune.author import Kernel
from kerneltune.backends.host import Host
from kerneltune.seams.protocols import CheckResult

DRIFT_PER_CALL = 0.1


class DriftingHost(Host):
    name = "drifting-host"

    def __init__(self) -> None:
        self.calls = itertools.count()

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool):
        def take(n: int) -> list[float]:
            return [fn(*args) * (1 + DRIFT_PER_CALL * next(self.calls)) for _ in range(n)]  # ms

        return take


BACKEND = DriftingHost()


class TwoCosts(Kernel):
    backend = "tests.tuning.drifting:BACKEND"  # type: ignore[assignment]
    params = {"cost": [1.2, 1.0]}  # the dearer one is measured first
    buckets = {"b": {"n": 1}}

    def build(self, p, c):
        return lambda: c.cost

    def inputs(self, p, seed):
        return ()

    def check(self, built, problem, inputs):
        return CheckResult(None, 0.0)


KERNEL = TwoCosts()
