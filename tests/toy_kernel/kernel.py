"""y = A @ x in row blocks of ``block`` rows, each block's product ``unroll`` columns at a time."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from kerneltune.seams.protocols import CheckResult
from kerneltune.tables.lookup import tuned_config

from .backend import BACKEND


@dataclasses.dataclass(frozen=True)
class ToyProblem:
    n: int


class ToyKernel:
    name = "toy"
    backend = "tests.toy_kernel.backend:BACKEND"
    devices = 1
    capabilities: frozenset = frozenset()
    tunables = frozenset({"block", "unroll"})
    problem_fields = frozenset({"n"})
    hard_bucket_fields = ()
    config_defaults: Mapping[str, Any] = MappingProxyType({})
    gated_params: tuple[str, ...] = ()

    def problem(self, fields: Mapping[str, Any]) -> ToyProblem:
        return ToyProblem(**fields)

    def problem_dict(self, problem: ToyProblem) -> dict[str, Any]:
        return {"n": problem.n}

    def infeasibility(self, problem: ToyProblem, tiles: Mapping[str, Any]) -> str | None:
        return f"block {tiles['block']} does not divide n={problem.n}" if problem.n % tiles["block"] else None

    def heuristic(self, problem: ToyProblem) -> dict[str, Any]:
        return {"block": 1, "unroll": 1}

    def bucket(self, problem: ToyProblem) -> dict[str, Any]:
        return {"n": problem.n}

    def source_hash(self) -> str:
        return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        return None if stamps.get("device") == "toy cpu" else "the toy CPU"

    def build(self, problem: ToyProblem, tiles: Mapping[str, Any]) -> dict[str, int]:
        return dict(tiles)

    def make_inputs(self, problem: ToyProblem, inputs_spec: Mapping[str, Any], seed: int) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(seed)
        return rng.standard_normal((problem.n, problem.n)), rng.standard_normal(problem.n)

    def check(self, built: Any, problem: ToyProblem, inputs: tuple[np.ndarray, ...]) -> CheckResult:
        a, x = inputs
        y = np.full(problem.n, np.nan)
        matvec(built, a, x, y)
        err = float(np.max(np.abs(y - a.astype(np.float64) @ x)))
        return CheckResult(None if err < 1e-9 else f"max error {err:.3g}", err)

    def timed_call(self, built: Any, inputs: tuple[np.ndarray, ...]) -> tuple[Any, tuple[Any, ...]]:
        a, x = inputs
        return matvec, (built, a, x, np.empty(len(x)))

    def flops(self, problem: ToyProblem, inputs: Any) -> float:
        return 2.0 * problem.n ** 2

    def release(self, built: Any) -> None:
        pass


def matvec(tiles: Mapping[str, int], a: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    block, unroll = tiles["block"], tiles["unroll"]
    for r in range(0, len(x), block):
        acc = np.zeros(block)
        for c in range(0, len(x), unroll):
            acc += a[r:r + block, c:c + unroll] @ x[c:c + unroll]
        y[r:r + block] = acc


PLUGIN = ToyKernel()


def toy_matvec(a: np.ndarray, x: np.ndarray, tables: Path) -> tuple[np.ndarray, dict[str, int]]:
    """The toy's launch API: the tuned table's config for this problem, else the heuristic."""
    problem = ToyProblem(len(x))
    tiles = tuned_config(PLUGIN.name, PLUGIN.bucket(problem), PLUGIN.source_hash(), PLUGIN.hard_bucket_fields,
                         BACKEND.stamps(), (tables,)) or PLUGIN.heuristic(problem)
    y = np.empty(len(x))
    matvec(tiles, a, x, y)
    return y, tiles
