"""Every feasible config not yet measured, in space order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kerneltune.protocols import StrategyContext

from ..journal import config_key


class Exhaustive:
    def __init__(self, ctx: StrategyContext):
        assert ctx.feasible is not None, "an exhaustive search enumerates the space"
        self._todo = [c for c in ctx.feasible if config_key(c) not in ctx.known]
        self._todo.reverse()

    def propose(self) -> dict[str, Any] | None:
        return self._todo.pop() if self._todo else None

    def observe(self, tiles: Mapping[str, Any], value: float | None) -> None:
        pass


STRATEGIES = {"exhaustive": Exhaustive}
