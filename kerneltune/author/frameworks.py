"""What the check needs of each array framework: host copies, NaN poison, a wait for the device.

A framework is imported only when one of its kernels is checked, in the worker that checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class OutputSpec:
    shape: tuple[int, ...]
    dtype: Any  # the framework's own dtype object
    device: Any = None


class Framework:
    name = "numpy"
    backend = "host"  # the registered backend that times it (``kerneltune.seams.registry.BACKENDS``)

    def is_array(self, x: Any) -> bool:
        return isinstance(x, np.ndarray)

    def to_host(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def dtype_name(self, x: Any) -> str:
        return str(x.dtype) if self.is_array(x) else type(x).__name__  # no copy of a device array to name it

    def spec(self, x: Any) -> OutputSpec:
        return OutputSpec(tuple(x.shape), x.dtype)

    def is_float(self, x: Any) -> bool:
        return self.is_array(x) and np.issubdtype(x.dtype, np.floating)

    def nan_fill(self, x: Any) -> None:
        x[...] = np.nan

    def poison(self, specs: list[OutputSpec]) -> None:
        """Leave NaN where the next outputs will be allocated: arrays of their shapes, filled and freed."""
        for s in specs:
            if np.issubdtype(np.dtype(s.dtype), np.floating):
                np.full(s.shape, np.nan, s.dtype)

    def sync(self, result: Any) -> None:
        pass


class Jax(Framework):
    name = "jax"
    backend = "cuda-jax"  # CUPTI kernel times on an NVIDIA GPU, the host's wall clock on the CPU

    def is_array(self, x: Any) -> bool:
        import jax

        return isinstance(x, jax.Array | np.ndarray)

    def spec(self, x: Any) -> OutputSpec:
        import jax

        device = next(iter(x.devices()), None) if isinstance(x, jax.Array) else None
        return OutputSpec(tuple(x.shape), x.dtype, device)

    def is_float(self, x: Any) -> bool:
        import jax.numpy as jnp

        return self.is_array(x) and jnp.issubdtype(x.dtype, jnp.floating)

    def nan_fill(self, x: Any) -> None:
        raise TypeError("a JAX array cannot be written in place")

    def poison(self, specs: list[OutputSpec]) -> None:
        import jax
        import jax.numpy as jnp

        for s in specs:
            if jnp.issubdtype(s.dtype, jnp.floating):
                buf = jax.device_put(jnp.full(s.shape, jnp.nan, s.dtype), s.device)
                buf.block_until_ready().delete()  # its memory is free again, NaN, for the call's outputs

    def sync(self, result: Any) -> None:
        import jax

        jax.block_until_ready(result)


class Torch(Framework):
    name = "torch"
    backend = "torch"  # CUDA events on a GPU, the host's wall clock on the CPU (TRITON_INTERPRET=1)

    def is_array(self, x: Any) -> bool:
        import torch

        return isinstance(x, torch.Tensor)

    def to_host(self, x: Any) -> np.ndarray:
        import torch

        if not isinstance(x, torch.Tensor):
            return np.asarray(x)
        x = x.detach().cpu()
        return (x.double() if x.is_floating_point() else x).numpy()

    def dtype_name(self, x: Any) -> str:
        return str(x.dtype).removeprefix("torch.") if self.is_array(x) else type(x).__name__

    def spec(self, x: Any) -> OutputSpec:
        return OutputSpec(tuple(x.shape), x.dtype, x.device)

    def is_float(self, x: Any) -> bool:
        return self.is_array(x) and x.is_floating_point()

    def nan_fill(self, x: Any) -> None:
        x.fill_(float("nan"))

    def poison(self, specs: list[OutputSpec]) -> None:
        import torch

        for s in specs:
            if s.dtype.is_floating_point:
                torch.full(s.shape, float("nan"), dtype=s.dtype, device=s.device)  # freed to the allocator's cache
        self.sync(None)

    def sync(self, result: Any) -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (Framework(), Jax(), Torch())}
