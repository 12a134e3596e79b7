"""Search strategies, registered by name: every module of this package exposes ``STRATEGIES``, a
mapping from a name to a factory of a :class:`kerneltune.seams.protocols.Strategy`. A new strategy is one
module here; the sweep and the CLI find it by its name."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from kerneltune.seams.protocols import StrategyFactory


@functools.cache
def registry() -> dict[str, StrategyFactory]:
    found: dict[str, StrategyFactory] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, factory in module.STRATEGIES.items():
            if name in found:
                raise RuntimeError(f"strategy {name!r} is registered twice (again in {module.__name__})")
            found[name] = factory
    return found


def names() -> list[str]:
    return sorted(registry(), key=lambda n: (n != "exhaustive", n))


def make_strategy(name: str) -> StrategyFactory:
    try:
        return registry()[name.lower()]
    except KeyError:
        raise ValueError(f"strategy: {name!r} is not one of {', '.join(names())}") from None
