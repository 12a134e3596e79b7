"""The drafter's compiled program run by the CPU interpreter (``kerneltune.interpreter``): all four
ranks' grids of ``kernel.py``'s module over one fake global memory laid out as the GPU runner lays it
out (``rocm_runner.step_tensors``, ``rank_program``, ``api.DrafterWide``), so that every lane of the
kernel's own code runs here, with bounds-checked memory and cooperative blocks. What it cannot show:
real memory ordering between GPUs, and time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.interpreter.machine import Grid, Launch
from kerneltune.interpreter.memory import GlobalMemory
from kerneltune.interpreter.ops import bf16_value
from kerneltune.interpreter.program import Program, capture

from .health import WORDS
from .host_inputs import host_arrays
from .layout import TP, DrafterLayout, ModelDims
from .reference import Dims, StepInputs, Weights

BUILDER = "kerneltune.kernels.drafter_wide.kernel:build_wide_for"
# The small model of the interpreted tests: the kernel's fixed head shape (16 q heads and 1 KV head of 128
# per rank), half the hidden size and an eighth of the intermediate; a layout its static checks accept.
# A window of 512 keys (32 blocks) keeps a request's attention to a few blocks per chunk.
SMALL_DIMS = Dims(hidden=3072, intermediate=4 * 1536, window=512)
SMALL_MODEL = ModelDims(hidden=3072, intermediate=1536, window=512)


def small_layout(qpr: int = 1, layers: int = 1, w_na: int = 64) -> DrafterLayout:
    model = dataclasses.replace(SMALL_MODEL, layers=layers)
    return DrafterLayout(ng=192, threads=256, w_na=w_na, qpr=qpr, model=model)


def small_dims(layers: int = 1) -> Dims:
    return dataclasses.replace(SMALL_DIMS, layers=layers)


def capture_program(layout: DrafterLayout, arch: str, cache: Path) -> Program:
    """The layout's module, captured (or read from ``cache``) and read into a ``Program``."""
    from .kernel import KERNEL_ARG_SPEC
    from .plugin import PLUGIN

    m = layout.model
    model = {f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.name != "layers"}
    kwargs = {"arch": arch, "ng": layout.ng, "threads": layout.threads, "w_na": layout.w_na, "qpr": layout.qpr,
              "layers": m.layers, "model": model}
    return Program(capture(BUILDER, kwargs, KERNEL_ARG_SPEC, arch, cache, PLUGIN.source_hash()))


@dataclass
class InterpretResult:
    h_out: list[np.ndarray]  # every rank's [n_rows, hidden], float64 of its bf16
    health: list[list[int]]
    caches: list[list[np.ndarray]]  # every rank's K/V cache per layer after the step (bf16 as float64)
    launch: Launch


def _bf16(t: Any) -> np.ndarray:
    import torch

    return t.to(torch.bfloat16).view(torch.int16).numpy().copy()


def run_step(program: Program, layout: DrafterLayout, dims: Dims, weights: Weights, inputs: StepInputs, arch: str,
             step: int = 1, seed: int | None = None, wait_ticks_start: int = 0) -> InterpretResult:
    """One decode step of all four ranks, each rank's buffers as the GPU runner fills them."""
    from .packing import pack_rank

    n = inputs.x.shape[0]
    layout.check_rows(n)
    mem = GlobalMemory()
    host = host_arrays(layout, inputs, dims.rope_theta)
    syms = [mem.allocate(f"rank {r} sym", np.zeros(layout.Y_BYTES, np.uint8)) for r in range(TP)]
    grids, outs, healths, caches = [], [], [], []
    for r in range(TP):
        def put(name: str, a: np.ndarray, r: int = r) -> int:
            return mem.allocate(f"rank {r} {name}", np.ascontiguousarray(a))

        packed = pack_rank(dims, weights, r, arch)
        w = {k: (put(f"w_{k}", p.data.numpy()), put(f"s_{k}", p.scale.numpy())) for k, p in packed.items()}
        tab = np.zeros(dims.layers * layout.TABLE_SLOTS, np.int64)
        seq_lens = put("seq_lens", host.seq_lens)
        rank_caches = []
        for layer, lw in enumerate(weights.layers):
            import torch

            cache = _bf16(torch.stack([inputs.k_cache[layer][:, :, r], inputs.v_cache[layer][:, :, r]]))
            rank_caches.append(cache)
            entries = {layout.T_CACHE: put(f"kv cache {layer}", cache), layout.T_NBLK: cache.shape[1],
                       layout.T_SEQ_LENS: seq_lens,
                       **{slot: put(f"{k} {layer}", _bf16(lw[k])) for slot, k in (
                           (layout.T_Q_NORM, "q_norm"), (layout.T_K_NORM, "k_norm"), (layout.T_IN_LN, "in_ln"),
                           (layout.T_POST_LN, "post_ln"))}}
            for slot, value in entries.items():
                tab[layer * layout.TABLE_SLOTS + slot] = value
        h_out = np.full((n, dims.hidden), 0x7FC0, np.uint16)  # poisoned: NaN until written
        health = np.zeros(WORDS, np.int32)
        args = [put("x_in", _bf16(inputs.x)), put("h_out", h_out), put("tab", tab),
                *(a for k in ("qkv", "o", "gu", "d") for a in w[k]), put("fin_ln", _bf16(weights.final_ln)),
                put("cos_sin", host.cos_sin), put("block_table", host.block_table), put("positions", host.positions),
                put("slots", host.slots), put("scratch", np.zeros(dims.layers * layout.W_LAYER_BYTES, np.uint8)),
                syms[r], put("peers", np.asarray(syms, np.int64)), put("step", np.asarray([step], np.int32)),
                put("health", health), r, host.bt_width, n]
        grids.append(Grid(args, layout.BLOCKS, r))
        outs.append(h_out)
        healths.append(health)
        caches.append(rank_caches)
    launch = Launch(program, mem, arch, seed=seed, clock=wait_ticks_start)
    launch.run(grids)
    return InterpretResult([bf16_value(h).astype(np.float64) for h in outs], [h.tolist() for h in healths],
                           [[bf16_value(c.view(np.uint16)).astype(np.float64) for c in rc] for rc in caches], launch)
