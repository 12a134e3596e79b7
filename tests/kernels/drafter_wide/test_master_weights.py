"""The interpreted checks' weights, drawn matrix by matrix (``master_weights``): the bits of ``make_weights`` in any
order of reading, one matrix held at a time, and the packing and the emulation's shards of them unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kerneltune.kernels.drafter_wide.master_weights import GEMVS, NAMES, DrawnWeights
from kerneltune.kernels.drafter_wide.packing import pack_rank, pack_ranks
from kerneltune.kernels.drafter_wide.reference import Dims, make_weights

D = Dims(hidden=256, q_heads=8, kv_heads=4, intermediate=512, window=64, layers=3)


def test_any_order_of_reading_gives_make_weights_bits():
    eager, drawn = make_weights(D, 5), DrawnWeights(D, 5)
    assert torch.equal(drawn.final_ln, eager.final_ln)  # the last draw first
    order = [(layer, k) for layer in reversed(range(D.layers)) for k in reversed(NAMES)]
    order += [(layer, k) for layer in range(D.layers) for k in NAMES]
    for layer, k in order:
        got = drawn.layers[layer][k]
        assert got.dtype == torch.float64 and torch.equal(got, eager.layers[layer][k]), (layer, k)
    for layer in range(D.layers):
        for k in GEMVS:
            assert torch.equal(drawn.gemv32(layer, k).double(), eager.layers[layer][k])
            assert drawn.gemv32(layer, k).dtype == torch.float32


def test_a_reader_in_draw_order_draws_each_matrix_once_and_one_going_back_draws_again():
    drawn = DrawnWeights(D, 5)
    for layer in range(D.layers):
        for k in NAMES:
            drawn.layers[layer][k]
            drawn.layers[layer][k]  # read twice: kept
    assert drawn.draws == D.layers * len(GEMVS)
    drawn.layers[0]["qkv"]
    assert drawn.draws == D.layers * len(GEMVS) + 1


def test_only_the_last_matrix_read_is_held():
    drawn = DrawnWeights(D, 5)
    first = drawn.layers[0]["gate"]
    first_id = id(first)
    del first
    drawn.layers[0]["up"]
    held = [t for t in (drawn._last[1],) if id(t) == first_id]
    assert not held and drawn._last[0] == drawn._at[(0, "up")]
    drawn.release()
    assert drawn._last is None


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_pack_ranks_of_drawn_weights_is_pack_rank_of_make_weights_bit_for_bit(arch):
    eager = make_weights(D, 7)
    packed = pack_ranks(D, DrawnWeights(D, 7), arch)
    for r in range(4):
        for k, p in pack_rank(D, eager, r, arch).items():
            assert torch.equal(packed[r][k].data, p.data) and torch.equal(packed[r][k].scale, p.scale), (r, k)


def test_the_emulations_dequantized_rows_are_the_packed_weights_values():
    from kerneltune.kernels.drafter_wide.emulation import shard_weights

    eager = make_weights(D, 7)
    shards = shard_weights(D, DrawnWeights(D, 7), "gfx950")
    p = pack_rank(D, eager, 2, "gfx950")["gu"]
    want = (p.data[1].view(torch.float8_e4m3fn).float() * p.scale[1][:, None]).numpy()
    inter = D.intermediate // 4
    np.testing.assert_array_equal(shards[2][1]["gate"][0:inter], want[:inter])
    np.testing.assert_array_equal(shards[2][1]["up"][3:9], want[inter + 3:inter + 9])
