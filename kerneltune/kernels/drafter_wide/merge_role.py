"""The L blocks' merge tasks, after their attention chunks: a task is one token row's quarter of the heads
(``indexing.merge_task``); it waits for every chunk of the row's request, merges their partials (max, sum,
output) into the attention output and quantises it per row and head quarter (``indexing.a8_scale_at``) for
o_proj, then publishes its flag. Each chunk's (max, sum, output) is read from the scratch once: the maxima
through LDS (``indexing.merge_max_word``) between the pass that finds the row's max and the one that sums."""

from __future__ import annotations

from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx

from . import device as dev
from . import indexing as ix
from .block import F32, Block
from .layout import WAVE


class MergeRole(Block):
    """An L block's merge tasks."""

    @flyc.jit
    def run(self, layer: Any, tag: Any, pidx: Any, cpr: Any) -> None:
        """This L block's merge tasks of the layer: tasks ``pidx`` (the block's index among the L blocks),
        ``pidx + W_NA``, ... of ``4 n_rows``; ``cpr``: the attention's chunks per request."""
        L, a, wave, lane, tid = self.L, self.args, self.wave, self.lane, self.tid
        n_rows, scratch = a.n_rows, a.scratch
        heads_per_task = L.model.q_heads // 4
        for task in range(pidx, 4 * n_rows, L.W_NA):
            t, hq, r = ix.merge_task(L, task)
            self.wait_flags(self.flag("apf", r * cpr), cpr, tag, 6)
            h = hq * heads_per_task + ix.smin(wave, heads_per_task - 1)
            i = t - r * L.QPR
            top = F32(float("-inf"))
            for c in range(cpr):  # each chunk's max read once and kept in LDS for the second pass, as the seed's
                mc = dev.ld(dev.at(scratch, ix.partial_at(L, layer, r * cpr + c, i, h)), F32)
                self.lds_put(ix.merge_max_word(L, wave, c), mc)
                top = top.maximumf(mc)
            num0, num1, den = F32(0.0), F32(0.0), F32(0.0)
            for c in range(cpr):
                part = r * cpr + c
                mc = self.lds(ix.merge_max_word(L, wave, c))
                f = (mc == F32(float("-inf"))).select(F32(0.0), fx.exp(mc - top))
                den = den + f * dev.ld(dev.at(scratch, ix.partial_l(L, layer, part, i, h)), F32)
                num0 = num0 + f * dev.ld(dev.at(scratch, ix.partial_o(L, layer, part, i, h, lane)), F32)
                num1 = num1 + f * dev.ld(dev.at(scratch, ix.partial_o(L, layer, part, i, h, lane + WAVE)), F32)
            mine = wave < heads_per_task
            out0, out1 = num0 / den, num1 / den
            amax = self.block_reduce(mine.select(self.abs_f(out0).maximumf(self.abs_f(out1)), F32(0.0)), True)
            amax = amax.maximumf(F32(1e-12))
            inv = F32(self.f8_max) / amax
            if mine:
                a8 = self.sc(layer, "a8")
                codes = self.f8_pair(out0 * inv, out1 * inv)
                dev.st(dev.at(a8, ix.a8_at(L, t, h, lane)), fx.Int8(codes & 0xFF), fx.Int8, 1)
                dev.st(dev.at(a8, ix.a8_at(L, t, h, lane + WAVE)), fx.Int8(codes.shrui(fx.Int32(8))), fx.Int8, 1)
            if tid == 0:
                dev.st(dev.at(scratch, ix.a8_scale_at(L, layer, t, hq)), amax / F32(self.f8_max), F32)
            self.publish("attf", task, tag)
