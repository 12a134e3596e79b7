"""The peer exchange as the engine sees it: a launch-group kernel whose tunables are the chunk a flag
covers and the warps per chunk."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from kerneltune.seams.protocols import CheckResult
from kerneltune.tables.stamps import source_hash

from .exchange import payload


@dataclasses.dataclass(frozen=True)
class ExchangeProblem:
    ranks: int = 2
    words: int = 1 << 20

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ValueError(f"ranks: an exchange needs at least 2 ranks, got {self.ranks}")
        if self.words < 1:
            raise ValueError(f"words: must be positive, got {self.words}")


class PeerExchangePlugin:
    name = "peer_exchange"
    backend = "launch-group"
    devices = 2
    capabilities: frozenset = frozenset()
    tunables = frozenset({"block", "num_warps"})
    problem_fields = frozenset(f.name for f in dataclasses.fields(ExchangeProblem))
    hard_bucket_fields = ("ranks",)
    config_defaults: Mapping[str, Any] = MappingProxyType({})
    gated_params: tuple[str, ...] = ()

    def problem(self, fields: Mapping[str, Any]) -> ExchangeProblem:
        return ExchangeProblem(**fields)

    def problem_dict(self, problem: ExchangeProblem) -> dict[str, Any]:
        return dataclasses.asdict(problem)

    def infeasibility(self, problem: ExchangeProblem, tiles: Mapping[str, Any]) -> str | None:
        block = tiles["block"]
        if block < 32 or block & (block - 1):
            return f"block {block} is not a power of two >= 32"
        return None

    def heuristic(self, problem: ExchangeProblem) -> dict[str, Any]:
        return {"block": 4096, "num_warps": 4}

    def bucket(self, problem: ExchangeProblem) -> dict[str, Any]:
        return self.problem_dict(problem)

    def source_hash(self) -> str:
        here = Path(__file__).parent
        return source_hash(here / n for n in ("exchange.py", "rank_program.py"))

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        if stamps.get("group_device") in ("cuda", "rocm", "emulated") and int(stamps.get("gpu_count", 0)) >= 2:
            return None
        return "2 or more GPUs driven by torch (CUDA or ROCm), or KERNELTUNE_GROUP_DEVICE=emulated"

    def build(self, problem: ExchangeProblem, tiles: Mapping[str, Any]) -> Any:
        from kerneltune.backends.launch_group import LaunchGroup, group_device

        params = {"words": problem.words, "block": tiles["block"], "num_warps": tiles["num_warps"]}
        return LaunchGroup("kerneltune.kernels.peer_exchange.rank_program:PeerExchangeRank", params,
                           problem.ranks, group_device())

    def make_inputs(self, problem: ExchangeProblem, inputs_spec: Mapping[str, Any], seed: int) -> None:
        return None  # the payload is a function of (rank, step, index): nothing to upload

    def check(self, built: Any, problem: ExchangeProblem, inputs: None) -> CheckResult:
        for rank_out in built.check():
            rank, step = rank_out["rank"], rank_out["step"]
            if rank_out["health"]:
                return CheckResult(f"rank {rank}: flag wait for chunk {rank_out['health'] - 1} missed its deadline")
            src = (rank - 1) % problem.ranks
            want = payload(src, step, problem.words)
            bad = np.flatnonzero(rank_out["out"] != want)
            if bad.size:
                return CheckResult(f"rank {rank}: {bad.size} of {problem.words} words wrong at step {step}, "
                                   f"first at {bad[0]} ({rank_out['out'][bad[0]]} for {want[bad[0]]})")
        return CheckResult(None, 0.0)

    def timed_call(self, built: Any, inputs: None) -> tuple[Any, tuple[Any, ...]]:
        return built, ()

    def flops(self, problem: ExchangeProblem, inputs: None) -> float:
        return 0.0  # a data movement: its rate is bytes, in ``bytes_moved``

    def release(self, built: Any) -> None:
        built.close()


PLUGIN = PeerExchangePlugin()
