"""The drafter on 4 AMD GPUs: one process per rank (torch.distributed), symmetric peer buffers
(torch symmetric memory over HIP IPC), weights sharded and quantised from the reference's
float64 masters (``packing.py``), ``h_out`` poisoned with NaN before the launch, the output
checked against the reference's TP4 computation, then timed with device events after a warm-up
long enough for MI300 clocks to settle. A missed deadline comes back from the health buffer as
(rank, site) — ``health.DeadlineMissed`` — never as a hang.

Needs 4 MI300X (gfx942) or MI355X (gfx950) and the megakernel launcher ``kernel.build_wide``.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .layout import TP, DrafterLayout
from .packing import pack_rank, weight_bytes

# Vendor peak HBM bandwidth: the floor is the time to stream one rank's 8-bit weights once.
HBM_BYTES_PER_S = {"gfx942": 5.3e12, "gfx950": 8.0e12}
WARMUP_SECONDS = 0.4
# Relative Frobenius error of h_out the 8-bit TP4 computation may have against the float64 model
# (the reference's measured 5.8-5.9%, tests/kernels/drafter_wide/test_reference.py).
TOLERANCE = 0.10


class NeedsRocmGpus(RuntimeError):
    """This machine cannot run the drafter: the message names the hardware."""


@dataclass(frozen=True)
class RunReport:
    arch: str
    n_rows: int
    rel_error_vs_tp4: float  # against the reference's own 8-bit TP4 computation
    rel_error_vs_f64: float  # against the float64 unsharded model
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
    if arch not in HBM_BYTES_PER_S:
        raise NeedsRocmGpus(f"the drafter needs {need}; this machine's GPUs are {arch}")
    return arch


def floor_us(weight_bytes_per_rank: int, arch: str) -> float:
    return weight_bytes_per_rank / HBM_BYTES_PER_S[arch] * 1e6


def run_tp4(tiles: dict[str, int], requests: int, qpr: int, context: list[int], layers: int = 1, seed: int = 0,
            timed_steps: int = 50, wait_ticks: int = 1_000_000_000) -> RunReport:
    """Build, check and time one layout on the 4 local GPUs (one spawned process per rank)."""
    import torch.multiprocessing as mp

    arch = require_rocm_gpus()
    with tempfile.TemporaryDirectory(prefix="kerneltune-tp4-") as tmp:
        spec = {"tiles": tiles, "requests": requests, "qpr": qpr, "context": context, "layers": layers,
                "seed": seed, "timed_steps": timed_steps, "wait_ticks": wait_ticks, "arch": arch, "dir": tmp}
        mp.spawn(_rank_main, args=(spec,), nprocs=TP, join=True)
        return RunReport(**json.loads((Path(tmp) / "report.json").read_text()))


def _rank_main(rank: int, spec: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    from .health import WORDS, check_health
    from .kernel import build_wide
    from .reference import Dims, forward_f64, forward_tp4, make_inputs, make_weights

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{spec['dir']}/rendezvous", rank=rank, world_size=TP)
    dev = torch.device("cuda", rank)
    arch, qpr = spec["arch"], spec["qpr"]
    dims = Dims(layers=spec["layers"])
    layout = DrafterLayout(**spec["tiles"], qpr=qpr)
    weights = make_weights(dims, spec["seed"])  # same seed on every rank: the same model
    inputs = make_inputs(dims, spec["requests"], qpr, spec["context"], spec["seed"] + 1)
    n = inputs.x.shape[0]
    layout.check_rows(n)

    packed = pack_rank(dims, weights, rank, arch)
    w = {k: (p.data.to(dev), p.scale.to(dev)) for k, p in packed.items()}
    sym = symm_mem.empty(layout.Y_BYTES // 4, dtype=torch.int32, device=dev)
    handle = symm_mem.rendezvous(sym, dist.group.WORLD.group_name)
    sym.zero_()
    scratch = torch.zeros(spec["layers"] * layout.W_LAYER_BYTES, dtype=torch.uint8, device=dev)
    health = torch.zeros(WORDS, dtype=torch.int32, device=dev)
    step = torch.ones(1, dtype=torch.int32, device=dev)
    tensors = _step_tensors(dims, layout, weights, inputs, rank, dev)
    h_out = torch.full((n, dims.hidden), float("nan"), dtype=torch.bfloat16, device=dev)
    launch = build_wide(layout, arch, 0, spec["wait_ticks"])

    def one_step() -> None:
        launch(tensors["x_in"].data_ptr(), h_out.data_ptr(), tensors["tab"].data_ptr(),
               *(t.data_ptr() for k in ("qkv", "o", "gu", "d") for t in w[k]),
               tensors["fin_ln"].data_ptr(), tensors["cos_sin"].data_ptr(), tensors["block_table"].data_ptr(),
               tensors["positions"].data_ptr(), tensors["slots"].data_ptr(), tensors["seq_lens"].data_ptr(),
               scratch.data_ptr(), sym.data_ptr(), *handle.buffer_ptrs, step.data_ptr(), health.data_ptr(),
               rank, tensors["block_table"].shape[1], n)
        step.add_(1)  # the next launch's tags are new

    dist.barrier()
    one_step()
    torch.cuda.synchronize()
    healths = [torch.zeros_like(health) for _ in range(TP)]
    dist.all_gather(healths, health)
    check_health([h.tolist() for h in healths])
    out = h_out.to(torch.float64).cpu()
    ref_tp4 = forward_tp4(dims, weights, inputs, arch)
    ref_f64 = forward_f64(dims, weights, inputs)

    # Warm-up until the clocks settle, then events around the timed steps.
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_SECONDS:
        one_step()
        torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    start.record()
    for _ in range(spec["timed_steps"]):
        one_step()
    end.record()
    torch.cuda.synchronize()
    us = start.elapsed_time(end) * 1e3 / spec["timed_steps"]
    times = [None] * TP
    dist.all_gather_object(times, us)
    if rank == 0:
        nbytes = weight_bytes(packed)
        report = RunReport(arch, n, _rel(out, ref_tp4), _rel(out, ref_f64), max(times), spec["timed_steps"], nbytes,
                           floor_us(nbytes, arch))
        (Path(spec["dir"]) / "report.json").write_text(json.dumps(asdict(report)))
    dist.destroy_process_group()


def _rel(a: Any, b: Any) -> float:
    import torch

    if torch.isnan(a).any():
        return math.inf
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def _step_tensors(dims: Any, layout: DrafterLayout, weights: Any, inputs: Any, rank: int, dev: Any) -> dict[str, Any]:
    """The step's inputs on this rank: rows, the per-layer pointer table, RoPE table, cache slots."""
    import torch

    from .reference import rope_angles

    bf16 = torch.bfloat16
    keep: list[Any] = []

    def ptr(t: Any) -> int:
        keep.append(t)
        return t.data_ptr()

    # 16 two-word entries per layer; a pointer's low word first, as the kernel reassembles it.
    tab = torch.zeros(dims.layers * layout.TABLE_SLOTS, dtype=torch.int64)
    for layer, w in enumerate(weights.layers):
        cache = torch.stack([inputs.k_cache[layer][:, :, rank], inputs.v_cache[layer][:, :, rank]]).to(bf16).to(dev)
        def vec(name: str, w: dict[str, Any] = w) -> int:
            return ptr(w[name].to(bf16).to(dev))

        entries = {layout.T_CACHE: ptr(cache), layout.T_NBLK: cache.shape[1], layout.T_Q_NORM: vec("q_norm"),
                   layout.T_K_NORM: vec("k_norm"), layout.T_IN_LN: vec("in_ln"), layout.T_POST_LN: vec("post_ln")}
        for slot, value in entries.items():
            tab[layer * layout.TABLE_SLOTS + slot] = value
    ang = rope_angles(inputs.positions, dims.head_dim, dims.rope_theta)
    blk = inputs.block_table[torch.arange(inputs.x.shape[0]) // inputs.qpr, inputs.positions // dims.kv_block]
    return {
        "x_in": inputs.x.to(bf16).to(dev), "tab": tab.view(torch.int32).to(dev),
        "fin_ln": weights.final_ln.to(bf16).to(dev),
        "cos_sin": torch.cat([torch.cos(ang), torch.sin(ang)], dim=1).to(torch.float32).to(dev),
        "block_table": inputs.block_table.to(torch.int32).to(dev),
        "positions": inputs.positions.to(torch.int32).to(dev),
        "slots": (blk * dims.kv_block + inputs.positions % dims.kv_block).to(torch.int32).to(dev),
        "seq_lens": (inputs.context + inputs.qpr).to(torch.int32).to(dev),
        "device_buffers": keep,  # what the pointer table points at: alive as long as the step
    }

