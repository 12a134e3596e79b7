"""A cost model of one drafter step per arch: how layouts rank where none can be timed (compile-only).

Its figures are modelled, never measured: a compile-only sweep journals them under ``modelled`` and
writes no table, so a measured entry always outranks them (only timed records become entries,
``tuning/table_writer.py``). Per layer and rank (the four ranks are symmetric), the phases run one after
another, each ending in a flag round trip:

* the QKV, o_proj, gate/up and down GEMVs: their 8-bit weights streamed from HBM, split over the NG
  G blocks, against the MFMA cycles of their 16x16 tiles on the busiest CU;
* attention: the KV cache of every request's window (bf16 K and V) streamed by the request's
  ``cpr = W_NA // requests`` chunk blocks, so a request on one block is bound by one CU's bandwidth;
* the reduce-scatters of o_proj's and down's partial sums and the all-gathers of the normed rows,
  over the xGMI link to each peer.

What it ignores (README, "The drafter's cost model"): caches (weights are streamed once per step, so
there is little to reuse; Infinity Cache is not modelled), the attention's MFMA, softmax and LDS time
(taken as hidden under its KV stream) and the barriers between its tile pairs, instruction issue and
latency inside a block, the norms' arithmetic, clock throttling, and contention between the G blocks'
and the attention blocks' streams.
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


ARCHS = {
    # AMD Instinct MI300X data sheet: 304 CUs, 2100 MHz peak engine clock, 5.3 TB/s HBM3, 2614.9 TFLOPS FP8
    # dense (= 304 x 4096 FLOPs/clock x 2.1 GHz), 7 Infinity Fabric links of 128 GB/s peak (both directions).
    "gfx942": ArchFigures("MI300X", 304, 2.1e9, 5.3e12, 4096, 64e9),
    # AMD Instinct MI355X data sheet and AMD's ISSCC 2026 paper: 256 CUs (8 XCDs x 32), 2400 MHz peak,
    # 8 TB/s HBM3E, 8192 FP8 FLOPs/clock/CU (about 5 PFLOPS dense), Infinity Fabric links of 153.6 GB/s
    # (both directions).
    "gfx950": ArchFigures("MI355X", 256, 2.4e9, 8.0e12, 8192, 76.8e9),
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
    n_tiles = ix.TILE * math.ceil(n / ix.TILE)  # token rows padded to whole MFMA tiles
    per_cu_bw = CU_SHARE * a.hbm_bytes_per_s / a.cus
    g_per_cu = math.ceil(layout.ng / a.cus)  # G blocks sharing the busiest CU

    def gemv(rows: int, k: int) -> tuple[float, int, float]:
        weight = rows * (k + SCALE_BYTES)
        stream = max(weight / a.hbm_bytes_per_s, weight / layout.ng * g_per_cu / per_cu_bw)
        cycles = 2 * n_tiles * rows * k / layout.ng * g_per_cu / a.fp8_flops_per_clock_per_cu
        return max(stream, cycles / a.clock_hz), weight, cycles

    phases: dict[str, float] = {}
    hbm, cycles = 0, 0.0
    for name, rows, k in (("qkv", m.qkv_rows, m.hidden), ("o_proj", m.hidden, m.o_in),
                          ("gate_up", 2 * m.intermediate, m.hidden), ("down", m.hidden, m.intermediate)):
        t, weight, c = gemv(rows, k)
        phases[name], hbm, cycles = t, hbm + weight, cycles + c
    floor = floor_us(hbm, arch)

    keys = min(context + layout.qpr, m.window)
    kv_request = keys * m.head_dim * m.kv_heads * 2 * KV_BYTES
    cpr = max(ix.chunks_per_request(layout, n), 1)
    chunk_per_cu = math.ceil(requests * cpr / a.cus)
    phases["attention"] = max(requests * kv_request / a.hbm_bytes_per_s,
                              kv_request / cpr * chunk_per_cu / per_cu_bw)
    hbm += requests * kv_request

    rows_per_owner = math.ceil(n / TP)
    rs = rows_per_owner * layout.ROW_PAIRS * (4 + TAG_BYTES)  # to each peer: its rows' bf16 pairs, tagged
    ag = rows_per_owner * (m.hidden + 4 + TAG_BYTES)  # to each peer: the owner's 8-bit rows, scale, tag
    phases["reduce_scatter"] = 2 * rs / a.xgmi_bytes_per_s
    phases["all_gather"] = 2 * ag / a.xgmi_bytes_per_s
    phases["flags"] = ROUND_TRIPS_PER_LAYER * FLAG_ROUND_TRIP_S
    total = sum(phases.values())
    return Modelled(total * 1e6, floor, {k: v * 1e6 for k, v in phases.items()}, hbm, 2 * (rs + ag),
                    cycles)
