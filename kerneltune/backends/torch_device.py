"""Torch's device, for torch and Triton kernels: CUDA events on an NVIDIA GPU, the host's wall clock on
the CPU (Triton's interpreter, ``TRITON_INTERPRET=1``, or plain torch on the CPU)."""

from __future__ import annotations

import functools
from typing import Any

from kerneltune.seams.protocols import TakeBatch
from kerneltune.tables.stamps import device_kind

from .cuda_jax import cuda_error_is_sticky, gpu_clocks
from .host import _cpu_model, wall_clock_sampler
from .torch_events import event_sampler

MATCHED = ("device", "cuda", "torch", "triton", "kernel_hash")


@functools.cache
def system_stamps() -> dict[str, Any]:
    import torch

    gpu = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if gpu else _cpu_model()
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    stamps: dict[str, Any] = {"backend": TorchDevice.name, "matched": list(MATCHED), "device": device,
                              "device_kind": device_kind(device) if gpu else "cpu",
                              "cuda": torch.version.cuda if gpu else "none", "torch": torch.__version__,
                              "triton": triton_version}
    if gpu:
        stamps["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
    else:
        stamps["timer"] = "host wall clock (no GPU)"
    return stamps


class TorchDevice:
    name = "torch"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        return dict(system_stamps())

    def ceilings(self) -> dict[str, float]:
        return {}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        import torch

        if torch.cuda.is_available():
            return event_sampler(lambda: fn(*args), cold_l2)
        return wall_clock_sampler(lambda: fn(*args))

    def worker_env(self, devices: str | None) -> dict[str, str]:
        return {} if devices is None else {"CUDA_VISIBLE_DEVICES": devices}

    def prepare_worker(self, compile_cache: str | None) -> None:
        pass  # Triton keeps its own cache (~/.triton)

    def is_sticky(self, error: BaseException) -> bool:
        return cuda_error_is_sticky(error)

    def clocks(self) -> dict[str, Any]:
        import torch

        return gpu_clocks() if torch.cuda.is_available() else {}


BACKEND = TorchDevice()
