"""Device-side timing with a noise-based stopping rule (in the spirit of nvbench).

Samples are kernel times from the device: CUPTI through JAX's Mosaic GPU
profiler for JAX callables, CUDA events for torch callables. Batches of
samples are taken until the relative 95% confidence half-width of the median
falls under ``rel_noise`` or ``max_seconds`` of sampling have passed.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Timing:
    """One candidate's measured kernel time."""

    median_us: float
    spread: float  # (p75 - p25) / median
    samples: int
    min_us: float
    noise: float  # relative 95% CI half-width of the median at the stop
    converged: bool  # noise reached the threshold before the time cap
    clocks: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MeasureSettings:
    rel_noise: float = 0.01
    max_seconds: float = 3.0
    min_samples: int = 10
    batch: int = 10
    warmup: int = 3
    cold_l2: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.rel_noise < 1:
            raise ValueError(f"rel_noise: must be in (0, 1), got {self.rel_noise}")
        if self.max_seconds <= 0 or self.min_samples < 3 or self.batch < 1:
            raise ValueError("max_seconds > 0, min_samples >= 3 and batch >= 1 are required")


def median_noise(samples: Sequence[float]) -> float:
    """Relative half-width of a 95% CI of the median (order-statistic bound)."""
    n = len(samples)
    if n < 3:
        return math.inf
    s = np.sort(np.asarray(samples))
    half = 1.96 * math.sqrt(n) / 2
    lo = s[max(math.floor(n / 2 - half), 0)]
    hi = s[min(math.ceil(n / 2 + half), n - 1)]
    med = float(np.median(s))
    return float((hi - lo) / 2 / med) if med > 0 else math.inf


def summarize(samples_ms: Sequence[float], converged: bool, clocks: dict[str, Any]) -> Timing:
    s = np.asarray(samples_ms, dtype=np.float64) * 1e3
    med = float(np.median(s))
    p25, p75 = np.percentile(s, [25, 75])
    return Timing(
        median_us=med,
        spread=float((p75 - p25) / med) if med > 0 else 0.0,
        samples=len(s),
        min_us=float(s.min()),
        noise=median_noise(s),
        converged=converged,
        clocks=clocks,
    )


def sample_until_quiet(take_batch: Callable[[int], list[float]], settings: MeasureSettings,
                       clocks: Callable[[], dict[str, Any]] | None = None,
                       prune_above_us: float | None = None) -> Timing:
    """Call ``take_batch(n)`` (returns n kernel times in ms) until the noise rule stops it.

    With ``prune_above_us``, a candidate whose first batch is already slower
    than that stops there (a clearly slower config needs no precise time).
    """
    before = clocks() if clocks else {}
    take_batch(settings.warmup)
    samples: list[float] = []
    start = time.monotonic()
    converged = False
    while True:
        samples.extend(take_batch(settings.batch))
        if prune_above_us is not None and float(np.median(samples)) * 1e3 > prune_above_us:
            break
        if len(samples) >= settings.min_samples and median_noise(samples) <= settings.rel_noise:
            converged = True
            break
        if time.monotonic() - start > settings.max_seconds:
            break
    after = clocks() if clocks else {}
    info = {"before": before, "after": after}
    if after.get("throttle_active"):
        info["throttled"] = True
    return summarize(samples, converged, info)


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
    # 0x1 (idle) and 0x4 (applications clocks setting) are not throttling.
    active = int(reasons, 16) & ~0x5 if reasons.startswith("0x") else 0
    return {"sm_mhz": sm, "sm_max_mhz": sm_max, "throttle_reasons": reasons,
            "throttle_active": bool(active), "temp_c": temp}


def time_callable(fn: Callable[..., Any], args: Sequence[Any], settings: MeasureSettings,
                  prune_above_us: float | None = None) -> Timing:
    """Device time on a GPU (CUPTI), else host wall-clock time (CPU runs and tests)."""
    import jax

    if jax.devices()[0].platform == "gpu":
        return time_jax(fn, args, settings, prune_above_us)
    return time_host(fn, args, settings, prune_above_us)


def time_host(fn: Callable[..., Any], args: Sequence[Any], settings: MeasureSettings,
              prune_above_us: float | None = None) -> Timing:
    import jax

    def take_batch(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    return sample_until_quiet(take_batch, settings, None, prune_above_us)


def time_jax(fn: Callable[..., Any], args: Sequence[Any], settings: MeasureSettings = MeasureSettings(),
             prune_above_us: float | None = None) -> Timing:
    """Time a JAX callable by its CUPTI kernel times, summed over its kernels per call.

    With ``cold_l2`` each call is paired with a write of a buffer larger than
    L2 inside one jit; the flush's kernels are recognised by name and left out.
    """
    import jax
    from jax.experimental.mosaic.gpu import profiler

    call: Callable[..., Any] = fn
    skip: set[str] = set()
    if settings.cold_l2:
        import jax.numpy as jnp

        buf = jnp.zeros((256 * 1024 * 1024 // 4,), jnp.float32)  # 256 MiB, over any L2
        flush = jax.jit(lambda b: b + 1.0)
        _, flush_kernels = profiler.measure(flush, aggregate=False)(buf)
        skip = {name for name, _ in flush_kernels or []}
        both = jax.jit(lambda b, *a: (flush(b), fn(*a)))

        def call(*a):
            return both(buf, *a)

    def take_batch(n: int) -> list[float]:
        _, per_iter = profiler.measure(call, aggregate=False, iterations=n)(*args)
        if per_iter is None:
            raise RuntimeError("CUPTI returned no kernel timings")
        if n == 1:
            per_iter = [per_iter]
        jax.effects_barrier()
        return [float(sum(t for name, t in kernels if name not in skip)) for kernels in per_iter]

    return sample_until_quiet(take_batch, settings, gpu_clocks, prune_above_us)


def time_torch(fn: Callable[[], Any], settings: MeasureSettings = MeasureSettings()) -> Timing:
    """Time a torch callable with CUDA events around each call."""
    import torch

    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda") if settings.cold_l2 else None

    def take_batch(n: int) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            if flush is not None:
                flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in events]

    return sample_until_quiet(take_batch, settings, gpu_clocks)


def measure_ceilings() -> dict[str, float]:
    """The two rates every candidate is judged against, measured on this GPU now:
    a bf16 8192^3 matmul (TFLOP/s) and a device copy (TB/s, bytes read + written)."""
    import jax
    import jax.numpy as jnp

    n = 8192
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
    settings = MeasureSettings(rel_noise=0.02, max_seconds=1.0)
    mm = time_jax(jax.jit(lambda x, y: x @ y), (a, b), settings)
    buf = jax.random.normal(jax.random.key(2), (1 << 30,), jnp.float32)  # 4 GiB
    cp = time_jax(jax.jit(lambda x: x + 1.0), (buf,), settings)
    return {
        "bf16_tflops_ceiling": 2 * n**3 / (mm.median_us * 1e-6) / 1e12,
        "copy_tbps_ceiling": 2 * buf.nbytes / (cp.median_us * 1e-6) / 1e12,
    }
