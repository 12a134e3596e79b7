"""The kernel's number formats as the emulation rounds to them, and the error bound's arithmetic."""

import math

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.numerics import U8, U16, Formats, error_bound, frobenius_error


def test_float64_rounds_nothing():
    num = Formats(None)
    a = np.array([[1 + 2.0 ** -40, -3.0]])
    codes, scale = num.f8(a)
    assert num.exact and np.array_equal(num.bf16(a), a) and np.array_equal(codes * scale[:, None], a)


def test_bf16_keeps_7_mantissa_bits():
    num = Formats("gfx942")
    assert num.bf16(np.array([1 + 2.0 ** -7, 1 + 2.0 ** -9])).tolist() == [1 + 2.0 ** -7, 1.0]


@pytest.mark.parametrize(("arch", "top"), [("gfx942", 240.0), ("gfx950", 448.0)])
def test_8_bit_rows_reach_their_formats_max_and_keep_3_mantissa_bits(arch, top):
    codes, scale = Formats(arch).f8(np.array([[2.0, -1.0, 1.0 + 2.0 ** -5, 0.0]]))
    assert codes[0, 0] == top and scale[0] == np.float32(2.0 / top)
    values = codes[0] * scale[0]
    assert values[1] == -1.0 and values[2] == 1.0  # 1 + 2**-5 is under half a step of 2**-3 above 1
    assert abs(values[2] - (1 + 2.0 ** -5)) <= U8 * (1 + 2.0 ** -5)


def test_an_unknown_arch_is_named():
    with pytest.raises(ValueError, match="gfx90a"):
        Formats("gfx90a")


def test_the_bound_is_the_final_stores_alone_without_branches():
    layer = {"x": 1.0, "o": 0.0, "h": 1.0, "d": 0.0}
    assert error_bound([layer], final=1.0) == pytest.approx(math.sqrt(2) * U16)


def test_the_bound_adds_each_branchs_roundings_in_quadrature():
    gemv = 2 * U8 ** 2 + U16 ** 2
    r_o = 3 * (gemv + U16 ** 2) + U16 ** 2 + gemv  # bf16 q, k, v into the attention's MFMAs, and bf16 P
    r_gu = r_o * 4.0 / 4.0 + gemv  # ‖o‖ = 2 over ‖h‖ = 2
    r_d = 5 * r_gu + U16 ** 2 + gemv
    expected = math.sqrt((r_o * 4.0 + r_d * 9.0) / 16.0 + 2 * U16 ** 2)
    assert error_bound([{"x": 1.0, "o": 2.0, "h": 2.0, "d": 3.0}], final=4.0) == pytest.approx(expected)


def test_a_second_layer_carries_the_first_layers_error():
    layer = {"x": 1.0, "o": 1.0, "h": 1.0, "d": 1.0}
    assert error_bound([layer, layer], final=1.0) > math.sqrt(2) * error_bound([layer], final=1.0) * 0.99


def test_frobenius_error_counts_nan_as_infinite():
    ref = np.ones((2, 2))
    assert frobenius_error(ref * 1.1, ref) == pytest.approx(0.1)
    assert frobenius_error(np.full((2, 2), np.nan), ref) == math.inf


def test_the_down_input_has_a_scale_for_each_128_values_of_a_row():
    """An outlier in one chunk of 128 leaves the next chunk's values as they were (their own amax), where one
    scale for the row would take them to 8 bits of the outlier's range."""
    row = np.ones((1, 256), np.float32)
    row[0, 5] = 1000.0
    f = Formats("gfx942")
    codes, scale = f.f8_chunks(row, 128)
    assert codes.shape == (1, 2, 128) and scale.shape == (1, 2)
    decoded = (codes * scale[..., None]).reshape(1, 256)
    np.testing.assert_array_equal(decoded[0, 128:], 1.0)
    assert decoded[0, 5] == pytest.approx(1000.0, rel=2 ** -4)
    whole, row_scale = f.f8(row)
    assert not np.array_equal(whole[0, 128:] * row_scale[0], decoded[0, 128:])  # one scale: not the chunk's
