"""NVIDIA GPUs through JAX: kernel times from CUPTI (JAX's Mosaic GPU profiler), clocks from
nvidia-smi, cold L2 by a 256 MiB write inside the timed jit. On a machine whose JAX device is the
CPU (tests, interpret mode) the timer falls back to the host's wall clock and says so in the stamps."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from typing import Any

from kerneltune.seams.limits import CEILING_MAX_SECONDS
from kerneltune.seams.protocols import TakeBatch
from kerneltune.tables.stamps import device_kind

from .host import wall_clock_sampler

MATCHED = ("gpu", "sm_count", "driver", "cuda", "jax", "jaxlib", "kernel_hash")


@functools.cache
def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "none"


def _cuda_version() -> str:
    try:
        from jax._src.lib import cuda_versions
    except ImportError:
        return "none"
    if cuda_versions is None:  # a CPU jaxlib
        return "none"
    v = cuda_versions.cuda_runtime_get_version()
    return f"{v // 1000}.{(v % 1000) // 10}"


@functools.cache
def system_stamps() -> dict[str, Any]:
    """The running system's first JAX device (the CPU on a machine without GPU)."""
    import jax
    import jaxlib

    from .host import _cpu_model

    dev = jax.devices()[0]
    gpu = dev.device_kind if dev.platform == "gpu" else "cpu"
    on_cpu = {} if dev.platform == "gpu" else {"device": _cpu_model(), "cpu_count": os.cpu_count() or 0}
    return {
        "backend": CudaJax.name, "matched": list(MATCHED) + list(on_cpu), "device_kind": device_kind(gpu),
        "gpu": gpu, "device": gpu, **on_cpu,
        "sm_count": int(getattr(dev, "core_count", 0) or 0),
        "driver": _driver_version() if dev.platform == "gpu" else "none",
        "cuda": _cuda_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
    }


# CUDA errors after which the context is lost (an illegal address, a launch failure, a GPU fallen off the bus):
# the next candidate in the same process would fail for no fault of its own.
_STICKY = ("illegal", "misaligned", "launch failure", "out of memory", "resource_exhausted", "cuda_error", "xid")


def cuda_error_is_sticky(error: BaseException) -> bool:
    text = str(error).lower()
    return any(s in text for s in _STICKY)


def gpu_clocks() -> dict[str, Any]:
    """SM clock and active throttle reasons from nvidia-smi ({} where there is none)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,temperature.gpu",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return {}
    sm, sm_max, reasons, temp = (x.strip() for x in out.split(","))
    return {"sm_mhz": sm, "sm_max_mhz": sm_max, "throttle_reasons": reasons,
            "throttle_active": throttling(reasons), "temp_c": temp}


# NVML's clock event reasons that are not a slowdown: GPU idle (0x1) and the applications clocks
# setting (0x2). Every other bit is one: 0x4 is the software power cap, which a sustained tensor-core
# loop on the H200 hits (1710-1770 MHz against 1980: 1371b475c129:results/ranker_attention/2026-12-01-h200-run-k/).
_NOT_THROTTLING = 0x1 | 0x2


def throttling(reasons: str) -> bool:
    """Whether nvidia-smi's ``clocks_throttle_reasons.active`` bit mask holds a real slowdown."""
    return reasons.startswith("0x") and bool(int(reasons, 16) & ~_NOT_THROTTLING)


def cupti_sampler(fn: Callable[..., Any], args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
    """n CUPTI kernel times of a JAX callable, summed over its kernels per call. With ``cold_l2`` each
    call is paired with a write of a buffer larger than L2 inside one jit; the flush's kernels are
    recognised by name and left out."""
    import jax
    from jax.experimental.mosaic.gpu import profiler

    call: Callable[..., Any] = fn
    skip: set[str] = set()
    if cold_l2:
        import jax.numpy as jnp

        buf = jnp.zeros((256 * 1024 * 1024 // 4,), jnp.float32)  # 256 MiB, over any L2
        flush = jax.jit(lambda b: b + 1.0)
        _, flush_kernels = profiler.measure(flush, aggregate=False)(buf)
        skip = {name for name, _ in flush_kernels or []}
        both = jax.jit(lambda b, *a: (flush(b), fn(*a)))

        def call(*a: Any) -> Any:
            return both(buf, *a)

    def take(n: int) -> list[float]:
        _, per_iter = profiler.measure(call, aggregate=False, iterations=n)(*args)
        if per_iter is None:
            raise RuntimeError("CUPTI returned no kernel timings")
        if n == 1:
            per_iter = [per_iter]
        jax.effects_barrier()
        return [float(sum(t for name, t in kernels if name not in skip)) for kernels in per_iter]

    return take


def time_jax(fn: Callable[..., Any], args: tuple[Any, ...], settings: Any = None) -> Any:
    """A JAX callable's CUPTI time under the engine's stopping rule (for benches and probes)."""
    from kerneltune.seams.measure import MeasureSettings, sample_until_quiet

    settings = settings or MeasureSettings()
    return sample_until_quiet(cupti_sampler(fn, args, settings.cold_l2), settings, gpu_clocks)


class CudaJax:
    name = "cuda-jax"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        stamps = dict(system_stamps())
        if stamps["gpu"] == "cpu":
            stamps["timer"] = "host wall clock (no GPU)"
        return stamps

    def ceilings(self) -> dict[str, float]:
        """A bf16 8192^3 matmul (TFLOP/s) and a device copy (TB/s, bytes read + written), measured now."""
        import jax
        import jax.numpy as jnp

        from kerneltune.seams.measure import MeasureSettings

        if jax.devices()[0].platform != "gpu":
            return {}
        n = 8192
        a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
        b = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
        settings = MeasureSettings(rel_noise=0.02, max_seconds=CEILING_MAX_SECONDS)
        mm = time_jax(jax.jit(lambda x, y: x @ y), (a, b), settings)
        buf = jax.random.normal(jax.random.key(2), (1 << 30,), jnp.float32)  # 4 GiB
        cp = time_jax(jax.jit(lambda x: x + 1.0), (buf,), settings)
        return {"bf16_tflops_ceiling": 2 * n**3 / (mm.median_us * 1e-6) / 1e12,
                "copy_tbps_ceiling": 2 * buf.nbytes / (cp.median_us * 1e-6) / 1e12}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        import jax

        if jax.devices()[0].platform == "gpu":
            return cupti_sampler(fn, args, cold_l2)
        return wall_clock_sampler(lambda: jax.block_until_ready(fn(*args)))

    def worker_env(self, devices: str | None) -> dict[str, str]:
        env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # several workers share one GPU
        return env if devices is None else {**env, "CUDA_VISIBLE_DEVICES": devices}

    def prepare_worker(self, compile_cache: str | None) -> None:
        if not compile_cache:
            return
        import jax

        jax.config.update("jax_compilation_cache_dir", compile_cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    def is_sticky(self, error: BaseException) -> bool:
        return cuda_error_is_sticky(error)

    def clocks(self) -> dict[str, Any]:
        return gpu_clocks()


BACKEND = CudaJax()
