"""The TP4 computation against the float64 unsharded model.

Exact mode (no rounding) must agree to float64 precision: the sharding, the reduce-scatter sums
and the gathers are then the only difference. With 8-bit weights and activations, e4m3 keeps 3
mantissa bits: rounding to nearest errs by up to 2**-4 = 6.3%; h_out's relative Frobenius error
must stay within the bound the formats allow (``numerics.error_bound``; measured: 5.9% on gfx942,
5.8% on gfx950 for the case below).
"""

import dataclasses

import pytest
import torch

from kerneltune.kernels.drafter_wide.numerics import bounded_reference
from kerneltune.kernels.drafter_wide.reference import (
    Dims,
    forward_tp4,
    make_inputs,
    make_weights,
    quantize_rows,
)

D = Dims(hidden=256, q_heads=8, kv_heads=4, head_dim=32, intermediate=512, layers=2, window=48, kv_block=16)
CONTEXT = [5, 40, 70]  # under the window, straddling a page edge, past the window


def rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


@pytest.fixture(scope="module")
def case():
    w = make_weights(D, seed=0)
    inputs = make_inputs(D, requests=3, qpr=2, context=CONTEXT, seed=1)
    return w, inputs, *bounded_reference(D, w, inputs)


def test_exact_tp4_equals_the_unsharded_model(case):
    w, inputs, ref, _ = case
    assert rel(forward_tp4(D, w, inputs, None), ref) < 1e-12


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_quantized_tp4_within_the_8_bit_bound(case, arch):
    w, inputs, ref, bound = case
    err = rel(forward_tp4(D, w, inputs, arch), ref)
    assert 1e-3 < err < bound, (err, bound)  # rounding happened, and stays within the bound


@pytest.mark.parametrize("change", [dict(window=47), dict(rope_theta=500.0)])
def test_a_wrong_window_or_rope_is_caught(case, change):
    w, inputs, ref, _ = case
    assert rel(forward_tp4(dataclasses.replace(D, **change), w, inputs, None), ref) > 1e-6


def test_a_wrong_block_table_is_caught(case):
    w, inputs, ref, _ = case
    swapped = dataclasses.replace(inputs, block_table=inputs.block_table.flip(0))
    assert rel(forward_tp4(D, w, swapped, None), ref) > 1e-6


def test_row_quantization_respects_each_format():
    t = torch.tensor([[1000.0, -3.0, 0.5], [0.0, 0.0, 0.0]], dtype=torch.float64)
    for arch, top in (("gfx942", 240.0), ("gfx950", 448.0)):
        q, s = quantize_rows(t, arch)
        assert float(q.abs().max()) == top and torch.all(torch.isfinite(q * s))
