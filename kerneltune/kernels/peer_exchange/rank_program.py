"""One rank of the peer exchange inside a launch group."""

from __future__ import annotations

from typing import Any

import numpy as np

from kerneltune.backends.launch_group import RankContext

from .exchange import POISON, NumpyExchange, buffer_words, halves, triton_exchange


class PeerExchangeRank:
    def __init__(self, words: int, block: int, num_warps: int, deadline_s: float = 10.0,
                 max_spins: int = 50_000_000, raise_flags: bool = True):
        self.words, self.block, self.num_warps = words, block, num_warps
        self.deadline_s, self.max_spins, self.raise_flags = deadline_s, max_spins, raise_flags
        self.step = 0

    def setup(self, ctx: RankContext) -> None:
        self.sym = ctx.symmetric("x", buffer_words(self.words, self.block))
        self.dst = (ctx.rank + 1) % ctx.size
        if ctx.on_gpu:
            import torch

            self.out = torch.full((self.words,), POISON, dtype=torch.int32, device=ctx.torch_device)
            self.health = torch.zeros(1, dtype=torch.int32, device=ctx.torch_device)
            self.impl: Any = triton_exchange(self.words, self.block, self.num_warps, self.max_spins, self.raise_flags)
        else:
            self.out = np.full(self.words, POISON, np.int32)
            self.health = np.zeros(1, np.int32)
            self.impl = NumpyExchange(self.words, self.block, self.deadline_s, self.raise_flags)

    def load(self, ctx: RankContext, spec: Any) -> None:
        pass  # the payload is a function of (rank, step, index)

    def poison(self, ctx: RankContext) -> None:
        self.out[:] = POISON
        self.health[:] = 0

    def launch(self, ctx: RankContext) -> None:
        self.step += 1
        self.impl.put(*halves(self.sym.peer(self.dst), self.words, self.block, self.step), ctx.rank, self.step)
        self.impl.wait_copy(*halves(self.sym.local, self.words, self.block, self.step), self.out, self.health,
                            self.step)

    def output(self, ctx: RankContext) -> dict[str, Any]:
        out = self.out.cpu().numpy() if ctx.on_gpu else self.out.copy()
        health = int(self.health[0])
        return {"rank": ctx.rank, "step": self.step, "out": out, "health": health}
