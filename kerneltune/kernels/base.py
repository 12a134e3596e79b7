"""The small protocol through which the engine knows a kernel, and the kernel registry.

A kernel is found by name in ``REGISTRY`` or by an import path
``"package.module:ATTRIBUTE"`` (how tests plug in a kernel of their own);
worker processes load it the same way, so nothing is pickled across.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

REGISTRY: dict[str, str] = {
    "ranker_attention": "kerneltune.kernels.ranker_attention.plugin:PLUGIN",
    "drafter_wide": "kerneltune.kernels.drafter_wide.plugin:PLUGIN",
}
ALIASES = {"ranker-attention": "ranker_attention", "drafter-wide": "drafter_wide"}


@dataclass(frozen=True)
class CheckResult:
    """Outcome of running a built candidate on fresh inputs against the reference."""

    error: str | None
    rel_error: float | None = None


class TunableKernel(Protocol):
    """What the engine needs of a kernel; everything else stays inside its folder."""

    name: str
    tunables: frozenset[str]
    problem_fields: frozenset[str]
    hard_bucket_fields: tuple[str, ...]
    # The value a tunable had before it became one (how kernels built then behave): a journal recorded
    # before a tunable existed still answers, in a replay, for configs at that value.
    tile_defaults: Mapping[str, Any]
    # Tunables that some problems of one bucket refuse, because what decides them is not in the bucket
    # key (a cap's value, say): a table entry keeps the best measured config for each other setting of
    # them, so a launch that refuses the winner still gets a measured config of that bucket.
    gated_tiles: tuple[str, ...]

    def problem(self, fields: Mapping[str, Any]) -> Any: ...
    def problem_dict(self, problem: Any) -> dict[str, Any]: ...
    def infeasibility(self, problem: Any, tiles: Mapping[str, Any]) -> str | None: ...
    def heuristic(self, problem: Any) -> dict[str, Any]: ...
    def bucket(self, problem: Any) -> dict[str, Any]: ...
    def source_hash(self) -> str: ...
    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        """None if candidates can be timed here, else the hardware they need."""
        ...

    # In worker processes only: these may import the kernel's framework.
    def build(self, problem: Any, tiles: Mapping[str, Any]) -> Any: ...
    def make_inputs(self, problem: Any, inputs_spec: Mapping[str, Any], seed: int) -> Any: ...
    def check(self, built: Any, problem: Any, inputs: Any) -> CheckResult: ...
    def timed_call(self, built: Any, inputs: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]: ...
    def flops(self, problem: Any, inputs: Any) -> float: ...


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def load_kernel(name: str) -> TunableKernel:
    """The kernel registered under ``name`` (or at the import path ``module:attr``)."""
    target = REGISTRY.get(canonical_name(name), name)
    if ":" not in target:
        known = ", ".join(sorted(REGISTRY) + sorted(ALIASES))
        raise ValueError(f"kernel: unknown kernel {name!r} (known: {known})")
    module, attr = target.split(":", 1)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"kernel: cannot load {target!r}: {e}") from None
