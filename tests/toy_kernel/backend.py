"""The toy kernel's own backend: the host, with its own stamps and device kind."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

MATCHED = ("device", "numpy", "kernel_hash")


class ToyBackend:
    name = "toy-cpu"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        return {"backend": self.name, "matched": list(MATCHED), "device": "toy cpu", "device_kind": "toy-cpu",
                "numpy": np.__version__}

    def ceilings(self) -> dict[str, float]:
        return {}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool):
        def take(n: int) -> list[float]:
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn(*args)
                out.append((time.perf_counter() - t0) * 1e3)
            return out

        return take

    def worker_env(self, devices: str | None) -> dict[str, str]:
        return {}

    def prepare_worker(self, compile_cache: str | None) -> None:
        pass

    def is_sticky(self, error: BaseException) -> bool:
        return False

    def clocks(self) -> dict[str, Any]:
        return {}


BACKEND = ToyBackend()
