"""AMD's MFMA instructions as the interpreter runs them: a wave's 64 lanes of operands gathered into
matrices, multiplied, and scattered back, in the lane layouts of the AMD Instinct MI300 (CDNA3) ISA
reference's matrix-core chapter (the layouts AMD's matrix instruction calculator prints):

- ``v_mfma_f32_16x16x16_bf16`` (``mfma.f32.16x16x16bf16.1k``): A is 16x16 (M x K), lane ``l`` holds
  ``A[l % 16][4 (l // 16) + j]`` for ``j < 4``; B is 16x16 (K x N), lane ``l`` holds
  ``B[4 (l // 16) + j][l % 16]``.
- ``v_mfma_f32_16x16x32_fp8_fp8``: the same with 8 values a lane, ``A[l % 16][8 (l // 16) + j]`` and
  ``B[8 (l // 16) + j][l % 16]`` for ``j < 8``, one byte each, low byte first.
- Both accumulate into D (16x16 float32): lane ``l`` holds ``D[4 (l // 16) + i][l % 16]`` for ``i < 4``.

TVM's and tilelang's AMD MFMA intrinsics use the same maps (``shared_16x16_to_local_64x4_layout_A``: lane
``i + 16 (j // 4)``, value ``j % 4`` for ``A[i][j]``; ``_B`` and ``_C``: lane ``j + 16 (i // 4)``, value ``i % 4``).

Products are exact and summed in float64, then added to C and rounded to float32 once (the hardware
adds in float32 with its own internal order; the difference is below the formats' tolerance)."""

from __future__ import annotations

import numpy as np

from . import fp8

WAVE = 64


def _a_matrix(lanes: np.ndarray) -> np.ndarray:
    """[waves, 64, j] lane values -> A [waves, 16, 4 j]."""
    w, _, j = lanes.shape
    return lanes.reshape(w, 4, 16, j).transpose(0, 2, 1, 3).reshape(w, 16, 4 * j)


def _b_matrix(lanes: np.ndarray) -> np.ndarray:
    """[waves, 64, j] lane values -> B [waves, 4 j, 16]."""
    w, _, j = lanes.shape
    return lanes.reshape(w, 4, 16, j).transpose(0, 1, 3, 2).reshape(w, 4 * j, 16)


def _d_lanes(d: np.ndarray) -> np.ndarray:
    """D [waves, 16, 16] -> [waves * 64, 4] lane values."""
    w = d.shape[0]
    return d.reshape(w, 4, 4, 16).transpose(0, 1, 3, 2).reshape(w * WAVE, 4)


def _multiply(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    waves = a.shape[0] // WAVE
    prod = np.matmul(_a_matrix(a.reshape(waves, WAVE, -1)), _b_matrix(b.reshape(waves, WAVE, -1)))
    return (_d_lanes(prod) + c.astype(np.float64)).astype(np.float32)


def mfma_16x16x16_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a``, ``b``: [lanes, 4] bf16 bits (uint16 or int16); ``c``: [lanes, 4] float32."""
    def wide(x: np.ndarray) -> np.ndarray:
        return (x.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    return _multiply(wide(a), wide(b), c)


def mfma_16x16x32_fp8(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str) -> np.ndarray:
    """``a``, ``b``: [lanes] int64, 8 codes each, low byte first; ``c``: [lanes, 4] float32."""
    def values(x: np.ndarray) -> np.ndarray:
        codes = np.ascontiguousarray(x, dtype=np.int64).view(np.uint8).reshape(-1, 8)
        return fp8.wide_table(arch)[codes]

    return _multiply(values(a), values(b), c)
