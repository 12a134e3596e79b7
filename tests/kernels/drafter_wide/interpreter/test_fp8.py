"""The interpreter's 8-bit encode (NumPy casts) against torch's, which the reference's quantisation uses."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter import fp8


@pytest.mark.parametrize("arch", sorted(fp8.FORMAT))
def test_encode_gives_torchs_bits_for_every_class_of_float32(arch):
    rng = np.random.default_rng(3)
    every_bit_pattern = rng.integers(0, 2 ** 32, size=400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448, 449, 464, 465, 480, -464, -465, 240, 241,
                      247, 248, 1e-10, -1e-10, 2 ** -10, 2 ** -9, 3 * 2 ** -11, 2 ** -12, 1.0625, 1.1875], np.float32)
    # the midpoints between neighbouring codes (ties, rounded to even), and a hair either side
    table = np.sort(np.unique(fp8.decode_table(fp8.FORMAT[arch])[np.isfinite(fp8.decode_table(fp8.FORMAT[arch]))]))
    mids = ((table[1:].astype(np.float64) + table[:-1]) / 2).astype(np.float32)
    x = np.concatenate([every_bit_pattern, edges, mids, np.nextafter(mids, np.float32(np.inf)),
                        np.nextafter(mids, np.float32(-np.inf)), rng.normal(size=100_000).astype(np.float32) * 100])
    got, want = fp8.encode(x, arch), fp8.encode_torch(x, arch)
    differ = np.nonzero(got != want)[0]
    first = differ[:5]
    assert differ.size == 0, f"{differ.size} values differ, first {x[first]}: {got[first]} vs {want[first]}"


def test_a_check_that_cannot_fail_is_not_one():
    """torch's cast saturates e4m3fn's overflow where a plain NumPy cast gives NaN: the comparison above sees it."""
    import ml_dtypes

    x = np.array([1000.0, -1e9], np.float32)
    assert (x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8) != fp8.encode_torch(x, "gfx950")).all()
