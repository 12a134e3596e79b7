"""The drafter's cost model: the weight-streaming floor from the published HBM figures, attention split
over more chunks is faster (the static score preferred one block per request), every phase counted."""

import pytest

from kerneltune.kernels.drafter_wide.cost_model import ARCHS, FLAG_ROUND_TRIP_S, ROUND_TRIPS_PER_LAYER, model
from kerneltune.kernels.drafter_wide.layout import DrafterLayout


@pytest.mark.parametrize(("arch", "floor_us"), [("gfx942", 15.7), ("gfx950", 10.4)])
def test_the_floor_is_one_ranks_8_bit_weights_at_the_hbm_peak(arch, floor_us):
    m = model(DrafterLayout(qpr=4), arch, requests=4, context=8192)
    # QKV 2304 x 6144, o 6144 x 2048, gate/up 6144 x 6144, down 6144 x 3072, plus a scale per row.
    weights = 2304 * 6148 + 6144 * 2052 + 6144 * 6148 + 6144 * 3076
    assert m.floor_us_per_layer == pytest.approx(weights / ARCHS[arch].hbm_bytes_per_s * 1e6)
    assert m.floor_us_per_layer == pytest.approx(floor_us, rel=0.01)
    assert 0 < m.fraction_of_floor < 1 and m.to_dict()["modelled"] is True


def test_more_attention_chunks_per_request_are_faster_at_long_context():
    one = model(DrafterLayout(qpr=4, w_na=16), "gfx942", requests=16, context=32768)  # one block per request
    six = model(DrafterLayout(qpr=4, w_na=96), "gfx942", requests=16, context=32768)  # six per request
    assert six.phases_us["attention"] < one.phases_us["attention"] / 4
    assert six.us_per_layer < one.us_per_layer


def test_each_phase_is_counted_once():
    m = model(DrafterLayout(qpr=4), "gfx950", requests=4, context=100)
    assert set(m.phases_us) == {"qkv", "o_proj", "gate_up", "down", "attention", "reduce_scatter", "all_gather",
                                "flags"}
    assert m.us_per_layer == pytest.approx(sum(m.phases_us.values()))
    assert m.phases_us["flags"] == pytest.approx(ROUND_TRIPS_PER_LAYER * FLAG_ROUND_TRIP_S * 1e6)
    # A short context: the KV cache is (100 + 4) keys of K and V in bf16 per request, one KV head of 128.
    assert m.hbm_bytes - m.floor_us_per_layer * 1e-6 * ARCHS["gfx950"].hbm_bytes_per_s == pytest.approx(
        4 * 104 * 128 * 2 * 2)


def test_the_gemvs_are_bound_by_the_stream_not_the_mfma_at_64_rows():
    m = model(DrafterLayout(qpr=1), "gfx942", requests=64, context=0)
    a = ARCHS["gfx942"]
    assert m.mfma_cycles_busiest_cu / a.clock_hz * 1e6 < m.floor_us_per_layer


def test_what_the_kernel_reads_again_is_counted_from_l2():
    """A G block holds its weight tile across the token tiles, so weights come from HBM once at any row count;
    each token tile's operand rows are read by every block; the down projection's act rows once per output and
    token tile (quantised as read); the merge reads each partial once (its maxima again from LDS)."""
    layout = DrafterLayout(qpr=4)
    m = layout.model

    def l2(requests):
        nt = -(-requests * 4 // 16)
        operands = layout.ng * nt * 16 * ((m.hidden + 4) + (layout.O_R // 16) * (m.o_in + 4) + (m.hidden + 4))
        down_act = layout.ng * (layout.D_R // 16) * nt * 16 * m.intermediate * 2
        cpr = layout.W_NA // requests
        merge = requests * cpr * 4 * m.q_heads * (m.head_dim + 2) * 4
        return operands + down_act + merge

    for requests in (4, 16):
        got = model(layout, "gfx942", requests=requests, context=8192).l2_bytes
        assert got == pytest.approx(l2(requests), rel=1e-9)
    one_tile, four_tiles = (model(layout, "gfx942", requests=r, context=8192) for r in (4, 16))
    assert four_tiles.phases_us["down"] > 1.5 * one_tile.phases_us["down"]  # the act reads grow with the tiles
    # Only the KV cache grows: 12 more requests, each a full window of K and V; the weights stream once.
    assert four_tiles.hbm_bytes - one_tile.hbm_bytes == 12 * m.window * 128 * 2 * 2


def test_weights_not_held_stream_from_hbm_for_every_token_tile():
    """With 256 threads a weight row is 12 chunks a lane, too many to hold (``HELD_CHUNKS``): the kernel loads
    them again, nontemporal, for each token tile."""
    held, reread = DrafterLayout(qpr=4), DrafterLayout(qpr=4, threads=256)
    assert held.holds_weights and not reread.holds_weights
    a, b = (model(layout, "gfx942", requests=16, context=0) for layout in (held, reread))
    kv = 16 * 4 * 128 * 2 * 2
    assert a.floor_us_per_layer == b.floor_us_per_layer
    assert b.hbm_bytes - kv == 4 * (a.hbm_bytes - kv)  # 64 rows: 4 token tiles, the weights read 4 times
    assert b.phases_us["gate_up"] > 2 * a.phases_us["gate_up"]
