"""A cost model of one drafter step per arch: how layouts rank where none can be timed (compile-only).

Its figures are modelled, never measured: a compile-only sweep journals them under ``modelled`` and
writes no table, so a measured entry always outranks them (only timed records become entries,
``tuning/table_writer.py``). Per layer and rank (the four ranks are symmetric), the phases run one after
another, each ending in a flag round trip. It counts what the kernel does, loop by loop:

* the QKV, o_proj, gate/up and down GEMVs: a G block holds its 16-row weight tile in registers across every
  16-row token tile where it fits (``DrafterLayout.holds_weights``), so its 8-bit weights stream from HBM once;
  else it loads them again for each token tile, nontemporal, so from HBM each time; each token tile's 8-bit
  operand rows are read from L2 by every G block; the down projection's bf16 act rows are read once per
  (output tile, token tile), quantised chunk by chunk as they are read; all against the MFMA cycles of the
  16x16 tiles on the busiest CU;
* attention: the KV cache of every request's window (bf16 K and V) streamed by the request's
  ``cpr = W_NA // requests`` chunk blocks, so a request on one block is bound by one CU's bandwidth; the
  merge reads every chunk's partial (float32 O, max and sum per head and row) from global memory once;
* the reduce-scatters of o_proj's and down's partial sums and the all-gathers of the normed rows,
  over the xGMI link to each peer, and ``ROUND_TRIPS_PER_LAYER`` flag round trips.

What it ignores (README, "The drafter's cost model"): the Infinity Cache (an operand read that misses L2 is
counted as an L2 hit), the attention's MFMA, softmax and LDS time (taken as hidden under its KV stream) and
the barriers between its tile pairs, instruction issue and latency inside a block, the norms' arithmetic,
clock throttling, and contention between the G blocks' and the attention blocks' streams.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from . import indexing as ix
from .layout import TAG_BYTES, TP, DrafterLayout

KV_BYTES = 2  # bf16 K and V in the paged cache
SCALE_BYTES = 4  # one float32 scale per 8-bit weight row


@dataclass(frozen=True)
class ArchFigures:
    """Published peak figures of one GPU (sources beside each)."""

    product: str
    cus: int
    clock_hz: float
    hbm_bytes_per_s: float
    fp8_flops_per_clock_per_cu: int
    xgmi_bytes_per_s: float  # one link, one direction; each TP4 peer sits on its own link
    l2_bytes_per_s: float  # every XCD's L2 together, read

    @property
    def bytes_per_s_per_cu(self) -> float:
        """What one CU pulls at most from HBM: ``CU_SHARE`` times its even share."""
        return CU_SHARE * self.hbm_bytes_per_s / self.cus

    @property
    def l2_bytes_per_s_per_cu(self) -> float:
        return CU_SHARE * self.l2_bytes_per_s / self.cus


ARCHS = {
    # AMD Instinct MI300X data sheet: 304 CUs, 2100 MHz peak engine clock, 5.3 TB/s HBM3, 2614.9 TFLOPS FP8
    # dense (= 304 x 4096 FLOPs/clock x 2.1 GHz), 7 Infinity Fabric links of 128 GB/s peak (both directions).
    # AMD CDNA 3 white paper: each of the 8 XCDs' 4 MB L2 has 16 channels of 128 bytes a clock.
    "gfx942": ArchFigures("MI300X", 304, 2.1e9, 5.3e12, 4096, 64e9, 8 * 16 * 128 * 2.1e9),
    # AMD Instinct MI355X data sheet and AMD's ISSCC 2026 paper: 256 CUs (8 XCDs x 32), 2400 MHz peak,
    # 8 TB/s HBM3E, 8192 FP8 FLOPs/clock/CU (about 5 PFLOPS dense), Infinity Fabric links of 153.6 GB/s
    # (both directions). The L2 taken as CDNA 3's per XCD (an assumption: 8 x 16 channels x 128 bytes a clock).
    "gfx950": ArchFigures("MI355X", 256, 2.4e9, 8.0e12, 8192, 76.8e9, 8 * 16 * 128 * 2.4e9),
}

# Assumptions, not published figures (README): one CU pulls at most twice its even share of the HBM
# bandwidth, so a stream needs at least half the CUs to reach the peak; a flag round trip (a store that
# crosses xGMI, then a poll that sees it) costs 2 us; blocks are placed on CUs round-robin.
CU_SHARE = 2.0
FLAG_ROUND_TRIP_S = 2e-6
# Sequence points per layer: x8 gathered, qkv written, attention partials, merged rows, o_proj
# reduce-scattered, h8 gathered, act written, down reduce-scattered.
ROUND_TRIPS_PER_LAYER = 8


def floor_us(weight_bytes_per_rank: int, arch: str) -> float:
    """The time to stream one rank's 8-bit weights once at the vendor's peak HBM bandwidth."""
    return weight_bytes_per_rank / ARCHS[arch].hbm_bytes_per_s * 1e6


@dataclass(frozen=True)
class Modelled:
    """One layer's modelled time and where it goes; ``score`` ranks layouts (lower is better)."""

    us_per_layer: float
    floor_us_per_layer: float  # the 8-bit weights streamed once at the HBM peak
    phases_us: dict[str, float]
    hbm_bytes: int
    l2_bytes: int  # operand rows, the down projection's act passes, the merge's partials
    xgmi_bytes_per_peer: int
    mfma_cycles_busiest_cu: float

    @property
    def fraction_of_floor(self) -> float:
        return self.floor_us_per_layer / self.us_per_layer

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fraction_of_floor": self.fraction_of_floor, "modelled": True}


def model(layout: DrafterLayout, arch: str, requests: int, context: int) -> Modelled:
    """One layer of a step of ``requests`` x ``layout.qpr`` rows after ``context`` cached tokens each."""
    a = ARCHS[arch]
    m = layout.model
    n = requests * layout.qpr
    nt = math.ceil(n / ix.TILE)  # token tiles: each G block runs its weight tile once per token tile
    g_per_cu = math.ceil(layout.ng / a.cus)  # G blocks sharing the busiest CU

    def stream(nbytes: float, aggregate: float, per_cu: float) -> float:
        """Seconds to move ``nbytes`` spread evenly over the G blocks: the aggregate rate or the busiest CU's."""
        return max(nbytes / aggregate, nbytes / layout.ng * g_per_cu / per_cu)

    def gemv(rows: int, k: int, l2: float) -> tuple[float, int, int, float]:
        """(seconds, weight bytes, HBM bytes, MFMA cycles on the busiest CU) of one GEMV over every token tile,
        ``l2`` bytes of it read from L2."""
        weight = rows * (k + SCALE_BYTES)
        streamed = weight if layout.holds_weights else nt * weight
        t = stream(streamed, a.hbm_bytes_per_s, a.bytes_per_s_per_cu) + stream(l2, a.l2_bytes_per_s,
                                                                                a.l2_bytes_per_s_per_cu)
        cycles = 2 * ix.TILE * nt * rows * k / layout.ng * g_per_cu / a.fp8_flops_per_clock_per_cu
        return max(t, cycles / a.clock_hz), weight, streamed, cycles

    def operands(k: int, tiles_per_block: int) -> float:
        """Each G block reads each token tile's 16 8-bit rows of ``k`` once per weight tile it owns."""
        return layout.ng * tiles_per_block * nt * ix.TILE * (k + SCALE_BYTES)

    down_act = layout.ng * (layout.D_R // ix.TILE) * nt * ix.TILE * m.intermediate * KV_BYTES  # quantised as read
    phases: dict[str, float] = {}
    weights, hbm, l2, cycles = 0, 0, 0.0, 0.0
    for name, rows, k, extra in (
            ("qkv", m.qkv_rows, m.hidden, operands(m.hidden, 1)),
            ("o_proj", m.hidden, m.o_in, operands(m.o_in, layout.O_R // ix.TILE)),
            ("gate_up", 2 * m.intermediate, m.hidden, operands(m.hidden, 1)),  # one read serves gate and up
            ("down", m.hidden, m.intermediate, down_act)):
        phases[name], weight, streamed, c = gemv(rows, k, extra)
        weights, hbm, l2, cycles = weights + weight, hbm + streamed, l2 + extra, cycles + c
    floor = floor_us(weights, arch)

    keys = min(context + layout.qpr, m.window)
    kv_request = keys * m.head_dim * m.kv_heads * 2 * KV_BYTES
    cpr = max(ix.chunks_per_request(layout, n), 1)
    chunk_per_cu = math.ceil(requests * cpr / a.cus)
    merge = requests * cpr * layout.qpr * m.q_heads * (m.head_dim + 2) * 4  # each partial read once
    phases["attention"] = max(requests * kv_request / a.hbm_bytes_per_s,
                              kv_request / cpr * chunk_per_cu / a.bytes_per_s_per_cu) + merge / a.l2_bytes_per_s
    hbm += requests * kv_request
    l2 += merge

    rows_per_owner = math.ceil(n / TP)
    rs = rows_per_owner * layout.ROW_PAIRS * (4 + TAG_BYTES)  # to each peer: its rows' bf16 pairs, tagged
    ag = rows_per_owner * (m.hidden + 4 + TAG_BYTES)  # to each peer: the owner's 8-bit rows, scale, tag
    phases["reduce_scatter"] = 2 * rs / a.xgmi_bytes_per_s
    phases["all_gather"] = 2 * ag / a.xgmi_bytes_per_s
    phases["flags"] = ROUND_TRIPS_PER_LAYER * FLAG_ROUND_TRIP_S
    total = sum(phases.values())
    return Modelled(total * 1e6, floor, {k: v * 1e6 for k, v in phases.items()}, hbm, round(l2), 2 * (rs + ag),
                    cycles)
