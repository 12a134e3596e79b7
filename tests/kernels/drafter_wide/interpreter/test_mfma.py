"""MFMA lane layouts against the concrete lanes the CDNA3 ISA guide's matrix tables give (lane = 16 *
K-group + row for A, 16 * K-group + column for B; D rows 4 * (lane // 16) + i of column lane % 16),
written out lane by lane here, independently of the reshapes in ``mfma.py``."""

import numpy as np

from kerneltune.kernels.drafter_wide.interpreter import fp8, mfma


def _bf16(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_bf16_16x16x16_one_product_lands_where_the_guide_says():
    a, b = np.zeros((64, 4), np.uint16), np.zeros((64, 4), np.uint16)
    a[17, 1] = _bf16(np.float32(2.0))  # lane 17, register half 1: A[row 1][k 4 + 1 = 5]
    b[19, 1] = _bf16(np.float32(3.0))  # lane 19: B[k 5][column 3]
    d = mfma.mfma_16x16x16_bf16(a, b, np.zeros((64, 4), np.float32))
    expect = np.zeros((64, 4), np.float32)
    expect[3, 1] = 6.0  # D[row 1][column 3]: lane 3 (rows 0..3), value 1
    np.testing.assert_array_equal(d, expect)


def test_bf16_16x16x16_full_product_and_accumulator():
    rng = np.random.default_rng(0)
    A, B = rng.integers(-4, 5, (16, 16)).astype(np.float32), rng.integers(-4, 5, (16, 16)).astype(np.float32)
    C = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    a = np.array([[A[lane % 16, 4 * (lane // 16) + j] for j in range(4)] for lane in range(64)])
    b = np.array([[B[4 * (lane // 16) + j, lane % 16] for j in range(4)] for lane in range(64)])
    c = np.array([[C[4 * (lane // 16) + i, lane % 16] for i in range(4)] for lane in range(64)], np.float32)
    d = mfma.mfma_16x16x16_bf16(_bf16(a), _bf16(b), c)
    D = A @ B + C
    np.testing.assert_array_equal(d, [[D[4 * (lane // 16) + i, lane % 16] for i in range(4)] for lane in range(64)])


def test_fp8_16x16x32_bytes_low_first_and_two_waves_apart():
    rng = np.random.default_rng(1)
    A, B = rng.integers(-3, 4, (2, 16, 32)), rng.integers(-3, 4, (2, 16 * 2, 16))
    B = B[:, :32, :]
    enc = {v: int(np.nonzero(fp8.decode_table("e4m3fnuz") == v)[0][0]) for v in range(-3, 4)}

    def word(vals: list[int]) -> int:
        return int(np.array([enc[int(v)] for v in vals], np.uint8).view(np.int64)[0])

    a = np.array([word([A[w, lane % 16, 8 * (lane // 16) + j] for j in range(8)]) for w in range(2)
                  for lane in range(64)], np.int64)
    b = np.array([word([B[w, 8 * (lane // 16) + j, lane % 16] for j in range(8)]) for w in range(2)
                  for lane in range(64)], np.int64)
    d = mfma.mfma_16x16x32_fp8(a, b, np.zeros((128, 4), np.float32), "gfx942")
    for w in range(2):
        D = A[w] @ B[w]
        np.testing.assert_array_equal(d[64 * w:64 * (w + 1)],
                                      [[D[4 * (lane // 16) + i, lane % 16] for i in range(4)] for lane in range(64)])


def test_fp8_formats_per_arch():
    fnuz, fn = fp8.decode_table("e4m3fnuz"), fp8.decode_table("e4m3fn")
    assert fnuz[0x7F] == 240 and fn[0x7E] == 448
    assert np.isnan(fnuz[0x80]) and np.isnan(fn[0x7F]) and np.isnan(fn[0xFF]) and fn[0x80] == 0
    assert fnuz[0x08] == 2.0 ** -7 and fn[0x08] == 2.0 ** -6  # smallest normals
    assert fnuz[0x01] == 2.0 ** -10 and fn[0x01] == 2.0 ** -9  # smallest subnormals
    values = np.array([1.0, 1.0625, 1.125, 1.1875, -240.0], np.float32)  # 1.0625: a tie, to even (1.0)
    assert fp8.decode(fp8.encode(values, "gfx942"), "gfx942").tolist() == [1.0, 1.0, 1.125, 1.25, -240.0]
    codes = fp8.encode(np.array([448.0, 1.0], np.float32), "gfx950")
    assert fp8.decode(codes, "gfx950").tolist() == [448.0, 1.0]
