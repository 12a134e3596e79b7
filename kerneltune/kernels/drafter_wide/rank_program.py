"""One rank of the drafter's TP4 launch inside a launch group (``kerneltune.backends.launch_group``).

On ``rocm`` each rank quantises its weight shards from the reference's float64 masters, allocates the
symmetric peer region, and launches the FlyDSL megakernel once per step with ``h_out`` poisoned (NaN)
before a checked step; the health words come back with the output. Written against torch's HIP
build and FlyDSL 0.5's documented launch; never run: no AMD GPU exists in this workplace.

On ``emulated`` the CPU emulation stands in for the four GPUs: rank 0 runs the whole launch
(``emulation.Launch``, every block of every rank as a coroutine) and publishes each rank's ``h_out``
into that rank's symmetric buffer with a tagged flag; every rank waits for its flag with a deadline.
On ``interpret`` the CPU interpreter runs the kernel's compiled program for ``arch`` in the same place
(``interpreted.run_step``), and each rank's health words travel with its ``h_out``.
The group's rendezvous, peer buffers, flag waits and timing are the real ones; a timed step replays
the last computed ``h_out`` through the same exchange (what it times is the group, not the kernel).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from kerneltune.backends.launch_group import RankContext

from .health import WORDS
from .layout import TP, DrafterLayout
from .reference import Dims


@dataclass(frozen=True)
class StepSpec:
    """What a step computes: the model's and the inputs' seeds and the requests' cached tokens."""

    requests: int
    qpr: int
    context: tuple[int, ...]
    layers: int
    seed: int


class DrafterRank:
    def __init__(self, tiles: dict[str, int], qpr: int, arch: str, deadline_s: float = 600.0,
                 wait_ticks: int = 1_000_000_000):
        self.tiles, self.qpr, self.arch = dict(tiles), qpr, arch
        self.deadline_s, self.wait_ticks = deadline_s, wait_ticks
        self.step = 0

    def setup(self, ctx: RankContext) -> None:
        if ctx.size != TP:
            raise ValueError(f"the drafter runs on {TP} ranks, not {ctx.size}")
        self.layout = DrafterLayout(**self.tiles, qpr=self.qpr)
        if ctx.device == "rocm":
            self.impl: Any = _RocmDrafter(self.layout, self.arch, self.wait_ticks)
        elif ctx.device in ("emulated", "interpret"):
            self.impl = _EmulatedDrafter(self.layout, self.deadline_s, self.arch if ctx.device == "interpret" else None)
        else:
            raise RuntimeError(f"the drafter runs on AMD gfx942/gfx950 GPUs (or emulated), not on {ctx.device}")

    def load(self, ctx: RankContext, spec: dict[str, Any]) -> None:
        self.impl.load(ctx, StepSpec(**{**spec, "context": tuple(spec["context"])}))

    def poison(self, ctx: RankContext) -> None:
        self.impl.poison(ctx)

    def launch(self, ctx: RankContext) -> None:
        self.step += 1
        self.impl.launch(ctx, self.step)

    def output(self, ctx: RankContext) -> dict[str, Any]:
        return {"rank": ctx.rank, "step": self.step, **self.impl.output(ctx)}


class _EmulatedDrafter:
    """``interpret``: an arch whose compiled program the CPU interpreter runs in place of the emulation."""

    def __init__(self, layout: DrafterLayout, deadline_s: float, interpret: str | None = None):
        self.layout, self.deadline_s, self.interpret = layout, deadline_s, interpret
        self.computed: list[np.ndarray] | None = None
        self.program: Any = None  # the interpreted kernel's Program, once read

    def load(self, ctx: RankContext, spec: StepSpec) -> None:
        from .reference import make_inputs, make_weights

        self.dims = Dims(layers=spec.layers)
        self.n = spec.requests * spec.qpr
        self.layout.check_rows(self.n)
        # Every rank's h_out travels as float64 in two int32 words, then its health words, then one flag word.
        self.words = 2 * self.n * self.dims.hidden
        self.sym = ctx.symmetric("h", self.words + WORDS + 1)
        self.out = np.full((self.n, self.dims.hidden), np.nan)
        self.health = [0] * WORDS
        if ctx.rank == 0:  # the emulated device: one process runs every rank's blocks
            self.weights = make_weights(self.dims, spec.seed)
            self.inputs = make_inputs(self.dims, spec.requests, spec.qpr, list(spec.context), spec.seed + 1)
        self.computed = None

    def poison(self, ctx: RankContext) -> None:
        self.out[:] = np.nan
        self.health = [0] * WORDS
        self.computed = None

    def launch(self, ctx: RankContext, step: int) -> None:
        if ctx.rank == 0:
            if self.computed is None and self.interpret is not None:
                from kerneltune.files.paths import user_cache_dir

                from .interpreted import capture_program, run_step

                if self.program is None:  # read once: a checked step after a poison runs it again
                    self.program = capture_program(self.layout, self.interpret, user_cache_dir() / "interpret")
                run = run_step(self.program, self.layout, self.dims, self.weights, self.inputs, self.interpret,
                               step=step)
                self.computed, self.computed_health = run.h_out, run.health
            elif self.computed is None:
                from .emulation import Launch

                self.computed = Launch(self.layout, self.dims, self.weights, self.inputs, step=step).run().h_out
                self.computed_health = [[0] * WORDS] * TP
            for r in range(TP):
                peer = self.sym.peer(r)
                peer[:self.words] = self.computed[r].reshape(-1).view(np.int32)
                peer[self.words:self.words + WORDS] = self.computed_health[r]
                peer[self.words + WORDS] = step
        end = time.monotonic() + self.deadline_s
        while self.sym.local[self.words + WORDS] < step:
            if time.monotonic() > end:
                self.health = [step, 0, 0, 0]
                return
            time.sleep(0.001)
        self.out[:] = self.sym.local[:self.words].view(np.float64).reshape(self.out.shape)
        self.health = [int(w) for w in self.sym.local[self.words:self.words + WORDS]]

    def output(self, ctx: RankContext) -> dict[str, Any]:
        return {"h_out": self.out.copy(), "health": list(self.health)}


class _RocmDrafter:
    """The FlyDSL megakernel on one AMD GPU of the group (never run: no AMD GPU here)."""

    def __init__(self, layout: DrafterLayout, arch: str, wait_ticks: int):
        self.layout, self.arch, self.wait_ticks = layout, arch, wait_ticks

    def load(self, ctx: RankContext, spec: StepSpec) -> None:
        import torch

        from .api import DrafterWide
        from .health import WORDS
        from .packing import pack_rank
        from .plugin import DrafterProblem
        from .reference import make_inputs, make_weights
        from .rocm_runner import step_tensors

        dev = ctx.torch_device
        self.dims = Dims(layers=spec.layers)
        weights = make_weights(self.dims, spec.seed)  # same seed on every rank: the same model
        inputs = make_inputs(self.dims, spec.requests, spec.qpr, list(spec.context), spec.seed + 1)
        self.n = inputs.x.shape[0]
        self.layout.check_rows(self.n)
        packed = pack_rank(self.dims, weights, ctx.rank, self.arch)
        self.w = {k: (p.data.to(dev), p.scale.to(dev)) for k, p in packed.items()}
        self.sym = ctx.symmetric("y", self.layout.Y_BYTES // 4)
        self.scratch = torch.zeros(spec.layers * self.layout.W_LAYER_BYTES, dtype=torch.uint8, device=dev)
        self.health = torch.zeros(WORDS, dtype=torch.int32, device=dev)
        self.step_word = torch.ones(1, dtype=torch.int32, device=dev)
        self.tensors = step_tensors(self.dims, self.layout, weights, inputs, ctx.rank, dev)
        self.h_out = torch.full((self.n, self.dims.hidden), float("nan"), dtype=torch.bfloat16, device=dev)
        problem = DrafterProblem(self.arch, spec.requests, spec.qpr, max(spec.context), spec.layers)
        tiles = {"ng": self.layout.ng, "threads": self.layout.threads, "w_na": self.layout.w_na}
        self.run = DrafterWide(problem, ctx.rank, tiles=tiles, wait_ticks=self.wait_ticks)

    def poison(self, ctx: RankContext) -> None:
        self.h_out.fill_(float("nan"))
        self.health.zero_()

    def launch(self, ctx: RankContext, step: int) -> None:
        self.run(self.tensors, self.w, self.h_out, self.scratch, self.sym.local, self.sym.ptrs, self.step_word,
                 self.health)
        self.step_word.add_(1)  # the next launch's tags are new

    def output(self, ctx: RankContext) -> dict[str, Any]:
        import torch

        return {"h_out": self.h_out.to(torch.float64).cpu().numpy(), "health": self.health.cpu().tolist()}
