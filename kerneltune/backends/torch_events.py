"""Device events through torch: one pair of events around each call, read after one synchronize.
The same calls time CUDA and HIP (torch.cuda is HIP on a ROCm build)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerneltune.seams.protocols import TakeBatch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # over the L2 of any GPU we time (H200 60 MB, MI300X 256 MB Infinity Cache)


def event_sampler(call: Callable[[], Any], cold_l2: bool, device: Any = None) -> TakeBatch:
    import torch

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device or "cuda") if cold_l2 else None

    def take(n: int) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            if flush is not None:
                flush.zero_()
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in events]

    return take

