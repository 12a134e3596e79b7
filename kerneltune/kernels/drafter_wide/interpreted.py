"""The drafter's compiled program run by the CPU interpreter (``kerneltune.kernels.drafter_wide.interpreter``): all four
ranks' grids of the kernel's module over one fake global memory laid out as the GPU runner lays it
out (``rocm_runner.step_tensors``, ``rank_program``, ``api.DrafterWide``), so that every lane of the
kernel's own code runs here, with bounds-checked memory, cooperative blocks in a chosen schedule, LDS races
between waves and the weak model of global memory (``interpreter.races``, ``interpreter.weak_memory``). What it
cannot show: orderings beyond that model (``weak_memory`` lists them), and time."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
from kerneltune.kernels.drafter_wide.interpreter.ops import bf16_value
from kerneltune.kernels.drafter_wide.interpreter.program import Program, capture
from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule, exploration

from .health import WORDS
from .host_inputs import host_arrays
from .layout import TP, DrafterLayout, ModelDims
from .master_weights import DrawnWeights
from .reference import Dims, StepInputs, Weights
from .shape_matrix import VERIFY_SHAPES

BUILDER = "kerneltune.kernels.drafter_wide.kernel:build_wide_for"
# The small model of the interpreted tests: the kernel's fixed head shape (16 q heads and 1 KV head of 128
# per rank), half the hidden size and an eighth of the intermediate; a layout its static checks accept.
# A window of 512 keys (32 blocks) keeps a request's attention to a few blocks per chunk.
# Blocks a task in the fixed order (``batching``): 8 to 32 measured alike, 1 the unbatched interpreter (2.2x slower).
# Other schedules run every block alone: batched, PCT no longer found a narrow window it finds unbatched (planted bug
# 22 of .ci/interpret_mutants.py: a row sum that waits for three quarters of its pairs).
BATCH = 8
SMALL_DIMS = Dims(hidden=3072, intermediate=4 * 1536, window=512)
SMALL_MODEL = ModelDims(hidden=SMALL_DIMS.hidden, intermediate=SMALL_DIMS.intermediate // TP, window=SMALL_DIMS.window)


def small_layout(qpr: int = 1, layers: int = 1, w_na: int = 64, threads: int = 256) -> DrafterLayout:
    model = dataclasses.replace(SMALL_MODEL, layers=layers)
    return DrafterLayout(ng=192, threads=threads, w_na=w_na, qpr=qpr, model=model)


def small_dims(layers: int = 1) -> Dims:
    return dataclasses.replace(SMALL_DIMS, layers=layers)


def capture_program(layout: DrafterLayout, arch: str, cache: Path) -> Program:
    """The layout's module, captured (or read from ``cache``) and read into a ``Program``."""
    return Program(capture_text(layout, arch, cache), cache=cache)


def capture_text(layout: DrafterLayout, arch: str, cache: Path) -> str:
    """The layout's module for ``arch`` as MLIR text, captured into ``cache`` or read from it."""
    from .kernel import KERNEL_ARG_SPEC
    from .sources import drafter_source_hash

    m = layout.model
    model = {f.name: getattr(m, f.name) for f in dataclasses.fields(m) if f.name != "layers"}
    kwargs = {"arch": arch, "ng": layout.ng, "threads": layout.threads, "w_na": layout.w_na, "qpr": layout.qpr,
              "layers": m.layers, "model": model}
    return capture(BUILDER, kwargs, KERNEL_ARG_SPEC, arch, cache, drafter_source_hash())


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
             step: int = 1, seed: int | None = None, schedule: Schedule | None = None,
             checked: bool = True, batch: int | None = None, compares: dict[int, set] | None = None
             ) -> InterpretResult:
    """One decode step of all four ranks, each rank's buffers as the GPU runner fills them, in ``schedule``'s
    interleaving (``seed`` alone: ``Schedule("random", seed)``); ``checked``: with the weak model of global memory
    (``interpreter.weak_memory``) and, in the fixed order, the LDS race check (``interpreter.races``: a block's waves
    run in lockstep whatever the order of the blocks, so another order of a step that gives the same bits makes
    the same LDS accesses, and the same-bits check covers one that does not); ``compares``: a dict the launch fills
    with what each comparison met (``Launch.compares``)."""
    import torch

    from .packing import pack_ranks

    n = inputs.x.shape[0]
    layout.check_rows(n)
    mem = GlobalMemory()
    host = host_arrays(layout, inputs, dims.rope_theta)
    # Every buffer on its rank's device: another rank's plain loads of a symmetric region may be stale
    # (``GlobalMemory.load_plain``), so the kernel must read its peers' data with system-scope loads.
    syms = [mem.allocate(f"rank {r} sym", np.zeros(layout.Y_BYTES, np.uint8), owner=r) for r in range(TP)]
    grids, outs, healths, caches = [], [], [], []
    packed_ranks = pack_ranks(dims, weights, arch)  # every matrix drawn once, one at a time
    for r in range(TP):
        def put(name: str, a: np.ndarray, r: int = r) -> int:
            return mem.allocate(f"rank {r} {name}", np.ascontiguousarray(a), owner=r)

        w = {k: (put(f"w_{k}", p.data.numpy()), put(f"s_{k}", p.scale.numpy())) for k, p in packed_ranks[r].items()}
        tab = np.zeros(dims.layers * layout.TABLE_SLOTS, np.int64)
        seq_lens = put("seq_lens", host.seq_lens)
        rank_caches = []
        for layer, lw in enumerate(weights.layers):
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
    if schedule is None:
        schedule = Schedule() if seed is None else Schedule("random", seed)
    if batch is None:  # batched in the fixed order; PCT and random interleave every block on its own
        batch = BATCH if schedule.kind == "fixed" else 1
    launch = Launch(program, mem, arch, schedule=schedule, races=checked and schedule.kind == "fixed", weak=checked,
                    batch=batching(layout, batch), batch_size=batch, compares=compares)
    launch.run(grids)
    return InterpretResult([bf16_value(h).astype(np.float64) for h in outs], [h.tolist() for h in healths],
                           [[bf16_value(c.view(np.uint16)).astype(np.float64) for c in rc] for rc in caches], launch)


def batching(layout: DrafterLayout, size: int) -> Callable[[int, int], Hashable] | None:
    """Which blocks run as one task (``Launch.batch``): a rank's GEMV blocks, and its attention blocks, in order,
    ``size`` a task (the norm blocks alone: batching them measured slower). None: every block its own task."""
    if size <= 1:
        return None

    def key(rank: int, bid: int) -> Hashable:
        return "G" if bid < layout.NG else "L" if bid < layout.NORM0 else None
    return key


# verify --interpret: the test shape of the interpreted kernel's tests, both archs, each in INTERLEAVINGS
# schedules (the fixed order, then PCT and random ones: ``interpreter.schedule.exploration``); each arch its own
# seeds, so that the two explore different interleavings.
CHECK_SHAPE = {"requests": 4, "qpr": 2, "context": (30, 100, 5, 700), "layers": 2, "w_na": 32}
INTERLEAVINGS = 2
ARCH_SEEDS = {"gfx942": 1, "gfx950": 101}


def check_runs(interleavings: int | None = None) -> tuple[tuple[str, tuple[Schedule, ...]], ...]:
    """Each arch and the schedules its step runs in: ``interleavings`` of them (default ``INTERLEAVINGS``)."""
    n = INTERLEAVINGS if interleavings is None else interleavings
    if n < 1:
        raise ValueError(f"interleavings {n}: at least 1 (the fixed order)")
    return tuple((arch, exploration(n, first_seed=seed)) for arch, seed in ARCH_SEEDS.items())


CHECK_RUNS = check_runs()
SAME_BITS = 5e-324  # the tolerance of a check whose error must be exactly 0


WEIGHTS_SEED, INPUTS_SEED = 0, 1
# Rows whose scale makes every epsilon and clamp matter (issue 98): token row 0 scaled by 2**-10 (its mean square
# ~1e-6, RMSNorm's eps), and every 61st row of each gate and up weight by 8 (their g and u, ~N(0, 1) otherwise,
# pass the clamped SwiGLU's 7 about a third of the time): a wrong eps or clamp constant moves these rows' outputs
# past their bounds (tests/kernels/drafter_wide/test_quick_step.py shows both).
TINY_ROW = 2.0 ** -10
LOUD_EVERY, LOUD = 61, 8.0
# And the cached values at each request's window edge (its first key and the key before it) and at the slots this
# step writes (the stale values a wrong fresh-key rule would read) times 64: one key among hundreds moves an output
# by less than its bound, unless its value is loud (a window comparison moved by one position passed every check).
LOUD_KEYS = 64.0


def setup(s: dict) -> tuple[DrafterLayout, Dims, Weights, StepInputs]:
    """The layout, model, weights and step inputs of a check shape (``CHECK_SHAPE``'s keys, and optionally
    ``threads`` and ``full``: ``shape_matrix.Shape``), with its edge rows (``TINY_ROW``, ``LOUD``)."""
    from .reference import make_inputs

    layout, dims = layout_of(s)
    weights = EdgeWeights(dims, WEIGHTS_SEED)
    inputs = make_inputs(dims, s["requests"], s["qpr"], list(s["context"]), INPUTS_SEED)
    inputs.x[0] *= TINY_ROW  # a power of two: still bf16
    for r, context in enumerate(s["context"]):
        lo = max(context - dims.window + 1, 0)  # the first row's window starts here
        keys = {k for k in (lo - 1, lo) if k >= 0} | set(range(context, context + s["qpr"]))
        for key in keys:
            blk, off = int(inputs.block_table[r, key // dims.kv_block]), key % dims.kv_block
            for v in inputs.v_cache:
                v[blk, off] *= LOUD_KEYS
    return layout, dims, weights, inputs


class EdgeWeights(DrawnWeights):
    """``make_weights``' weights, each matrix drawn when read (``master_weights``), with every ``LOUD_EVERY``-th row
    of gate and up times ``LOUD``: their outputs reach the SwiGLU's clamps."""

    def _draw(self, w: Any) -> Any:
        t = super()._draw(w)
        if w.name in ("gate", "up"):
            t[::LOUD_EVERY] *= LOUD  # float32, a power of two: exact
        return t


def recipe(s: dict) -> str:
    """``check_cache.recipe_key`` of a check shape: what ``setup`` draws its weights and inputs from, so that a
    cached reference is found without drawing them."""
    from . import check_cache, master_weights

    edges = repr((TINY_ROW, LOUD_EVERY, LOUD, LOUD_KEYS))
    try:
        drawn_by = inspect.getsource(setup) + inspect.getsource(EdgeWeights) + inspect.getsource(master_weights)
    except OSError:  # installed without its sources: its bytecode
        drawn_by = "".join(f.__code__.co_code.hex() for f in (setup, EdgeWeights._draw, DrawnWeights._draw))
    drawn_by += edges
    return check_cache.recipe_key(layout_of(s)[1], {"shape": s, "seeds": [WEIGHTS_SEED, INPUTS_SEED]}, drawn_by)


def layout_of(s: dict) -> tuple[DrafterLayout, Dims]:
    """The layout and model of a check shape (``setup``'s first two)."""
    threads = s.get("threads", 256)
    if s.get("full"):
        dims = Dims(layers=s["layers"])
        layout = DrafterLayout(ng=192, threads=threads, w_na=s["w_na"], qpr=s["qpr"],
                               model=dataclasses.replace(ModelDims(), layers=s["layers"]))
    elif threads == 256:
        layout, dims = small_layout(s["qpr"], s["layers"], s["w_na"], threads), small_dims(s["layers"])
    else:  # K of down whole chunks of 8 waves x 4 lane groups x 32 B, and NG's share of gate/up whole: 3072 a rank
        dims = dataclasses.replace(small_dims(s["layers"]), intermediate=4 * 3072)
        model = dataclasses.replace(small_layout().model, intermediate=3072, layers=s["layers"])
        layout = DrafterLayout(ng=192, threads=threads, w_na=s["w_na"], qpr=s["qpr"], model=model)
    return layout, dims


def label(s: dict) -> str:
    """A check shape in words."""
    return (f"{'full' if s.get('full') else 'small'} model, {s.get('threads', 256)} threads, w_na={s['w_na']}, "
            f"{s['requests']}x{s['qpr']} rows, ctx {'/'.join(map(str, s['context']))}, {s['layers']} layers")


# And more shapes in the fixed order, for what the default never reaches (``shape_matrix.VERIFY_SHAPES``: a single
# request at 512 threads over three layers, 52 rows, the full model's unheld weights).
CHECK_EXTRA = tuple((s.arch, s.as_check()) for s in VERIFY_SHAPES)
