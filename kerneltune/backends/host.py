"""The host CPU as a device: wall-clock timing of a callable. For kernels that run on the CPU (a
NumPy kernel, an emulation) and for the engine's own tests."""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable
from typing import Any

from kerneltune.seams.protocols import TakeBatch

MATCHED = ("device", "cpu_count", "python", "numpy", "kernel_hash")


def wall_clock_sampler(call: Callable[[], Any]) -> TakeBatch:
    def take(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            call()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    return take


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Host:
    name = "host"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        import numpy as np

        return {"backend": self.name, "matched": list(MATCHED), "device": _cpu_model(), "device_kind": "cpu",
                "cpu_count": os.cpu_count() or 0, "python": platform.python_version(),
                "numpy": np.__version__}

    def ceilings(self) -> dict[str, float]:
        return {}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        return wall_clock_sampler(lambda: fn(*args))

    def worker_env(self, devices: str | None) -> dict[str, str]:
        return {}

    def prepare_worker(self, compile_cache: str | None) -> None:
        pass

    def is_sticky(self, error: BaseException) -> bool:
        return False

    def clocks(self) -> dict[str, Any]:
        return {}


BACKEND = Host()
