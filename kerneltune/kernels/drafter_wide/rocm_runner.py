"""The drafter on 4 AMD GPUs outside a sweep: one launch group (``backends/launch_group.py``, one
process per rank, symmetric peer buffers over HIP IPC) running ``rank_program.DrafterRank``, the output
checked against the reference's TP4 computation, then timed with device events after a warm-up long
enough for MI300 clocks to settle. A missed deadline comes back from the health buffer as (rank,
site) — ``health.DeadlineMissed`` — never as a hang.

Needs 4 MI300X (gfx942) or MI355X (gfx950); never run here (no AMD GPU in this workplace).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cost_model import ARCHS, floor_us
from .layout import TP, DrafterLayout
from .packing import weight_bytes

WARMUP_SECONDS = 0.4


class NeedsRocmGpus(RuntimeError):
    """This machine cannot run the drafter: the message names the hardware."""


@dataclass(frozen=True)
class RunReport:
    arch: str
    n_rows: int
    rel_error_vs_tp4: float  # against the reference's own 8-bit TP4 computation (relative Frobenius)
    rel_error_vs_f64: float  # against the float64 unsharded model (relative Frobenius)
    error_bound: float  # what the formats allow against float64 (numerics.error_bound)
    us_per_step: float
    steps_timed: int
    weight_bytes_per_rank: int
    floor_us: float

    @property
    def ratio_to_floor(self) -> float:
        return self.us_per_step / self.floor_us


def require_rocm_gpus(n: int = TP) -> str:
    """The arch of this machine's GPUs, or :class:`NeedsRocmGpus`."""
    import torch

    need = f"{n} AMD MI300X (gfx942) or MI355X (gfx950) GPUs with ROCm"
    if torch.version.hip is None or torch.cuda.device_count() < n:
        raise NeedsRocmGpus(f"the drafter's TP{n} run needs {need}; this machine has "
                            f"{torch.cuda.device_count() if torch.version.hip else 'no ROCm'} GPU(s)")
    arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    if arch not in ARCHS:
        raise NeedsRocmGpus(f"the drafter needs {need}; this machine's GPUs are {arch}")
    return arch


def run_tp4(tiles: dict[str, int], requests: int, qpr: int, context: list[int], layers: int = 1, seed: int = 0,
            timed_steps: int = 50, wait_ticks: int = 1_000_000_000) -> RunReport:
    """Build, check and time one layout on the 4 local GPUs: a launch group of one process per rank."""
    import torch

    from kerneltune.backends.launch_group import LaunchGroup

    from .health import check_health
    from .numerics import bounded_reference
    from .packing import pack_rank
    from .reference import Dims, forward_tp4, make_inputs, make_weights

    arch = require_rocm_gpus()
    group = LaunchGroup("kerneltune.kernels.drafter_wide.rank_program:DrafterRank",
                        {"tiles": tiles, "qpr": qpr, "arch": arch, "wait_ticks": wait_ticks}, TP, "rocm", timeout=900)
    try:
        group.load({"requests": requests, "qpr": qpr, "context": context, "layers": layers, "seed": seed})
        outs = group.check()
        check_health([o["health"] for o in outs])
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < WARMUP_SECONDS:  # until MI300 clocks settle
            group.take(10)
        us = float(np.median(group.take(timed_steps))) * 1e3
    finally:
        group.close()
    dims = Dims(layers=layers)
    weights = make_weights(dims, seed)
    inputs = make_inputs(dims, requests, qpr, context, seed + 1)
    out = torch.from_numpy(outs[0]["h_out"])
    nbytes = weight_bytes(pack_rank(dims, weights, 0, arch))
    ref, bound = bounded_reference(dims, weights, inputs)
    return RunReport(arch, out.shape[0], _rel(out, forward_tp4(dims, weights, inputs, arch)), _rel(out, ref),
                     bound, us, timed_steps, nbytes, floor_us(nbytes, arch))


def _rel(a: Any, b: Any) -> float:
    import torch

    if torch.isnan(a).any():
        return math.inf
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def step_tensors(dims: Any, layout: DrafterLayout, weights: Any, inputs: Any, rank: int, dev: Any) -> dict[str, Any]:
    """The step's inputs on this rank: rows, the per-layer pointer table, RoPE table, cache slots."""
    import torch

    from .host_inputs import host_arrays

    bf16 = torch.bfloat16
    keep: list[Any] = []

    def ptr(t: Any) -> int:
        keep.append(t)
        return t.data_ptr()

    # 16 two-word entries per layer; a pointer's low word first, as the kernel reassembles it.
    tab = torch.zeros(dims.layers * layout.TABLE_SLOTS, dtype=torch.int64)
    host = host_arrays(layout, inputs, dims.rope_theta)
    seq_lens = ptr(torch.from_numpy(host.seq_lens).to(dev))
    for layer, w in enumerate(weights.layers):
        cache = torch.stack([inputs.k_cache[layer][:, :, rank], inputs.v_cache[layer][:, :, rank]]).to(bf16).to(dev)
        def vec(name: str, w: dict[str, Any] = w) -> int:
            return ptr(w[name].to(bf16).to(dev))

        entries = {layout.T_CACHE: ptr(cache), layout.T_NBLK: cache.shape[1], layout.T_Q_NORM: vec("q_norm"),
                   layout.T_K_NORM: vec("k_norm"), layout.T_IN_LN: vec("in_ln"), layout.T_POST_LN: vec("post_ln"),
                   layout.T_SEQ_LENS: seq_lens}
        for slot, value in entries.items():
            tab[layer * layout.TABLE_SLOTS + slot] = value
    return {
        "x_in": inputs.x.to(bf16).to(dev), "tab": tab.view(torch.int32).to(dev),
        "fin_ln": weights.final_ln.to(bf16).to(dev),
        "cos_sin": torch.from_numpy(host.cos_sin).to(dev),
        "block_table": torch.from_numpy(host.block_table).view(-1, host.bt_width).to(dev),
        "positions": torch.from_numpy(host.positions).to(dev),
        "slots": torch.from_numpy(host.slots).to(dev),
        "device_buffers": keep,  # what the pointer table points at: alive as long as the step
    }

