"""Every feasible config not yet measured, in space order after the warm start's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kerneltune.files.records import config_key
from kerneltune.seams.protocols import StrategyContext


class Exhaustive:
    learns = False

    def __init__(self, ctx: StrategyContext):
        assert ctx.feasible is not None, "an exhaustive search enumerates the space"
        # The warm start's configs first: the best time known early prunes the slow candidates sooner.
        first = {config_key(c) for c in ctx.warm}
        todo = [c for c in ctx.feasible if config_key(c) not in ctx.known]
        self._todo = [c for c in todo if config_key(c) in first] + [c for c in todo if config_key(c) not in first]
        self._todo.reverse()

    def propose(self) -> dict[str, Any] | None:
        return self._todo.pop() if self._todo else None

    def observe(self, config: Mapping[str, Any], value: float | None) -> None:
        pass


STRATEGIES = {"exhaustive": Exhaustive}
