"""The 8-bit float formats of AMD's MFMA and ``v_cvt_pk_fp8_f32``: e4m3fnuz on gfx942 (CDNA3),
OCP e4m3fn on gfx950 (CDNA4). Decoding is a 256-entry table written from the formats' definitions;
encoding rounds to nearest even and saturates e4m3fn's finite overflow to +-448, as torch's casts (which the
reference's quantisation uses) do; ml_dtypes' NumPy casts give the same bits a call faster
(``tests/kernels/drafter_wide/interpreter/test_fp8.py`` compares them over every class of float32)."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

FORMAT = {"gfx942": "e4m3fnuz", "gfx950": "e4m3fn"}


@functools.cache
def decode_table(fmt: str) -> np.ndarray:
    """float32 [256]: the value of each code. e4m3fn: bias 7, S.1111.111 NaN, no infinity; e4m3fnuz:
    bias 8, 0x80 the only NaN (no negative zero), no infinity."""
    bias = {"e4m3fn": 7, "e4m3fnuz": 8}[fmt]
    out = np.empty(256, np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> 3) & 0xF, code & 7
        value = man / 8 * 2.0 ** (1 - bias) if exp == 0 else (1 + man / 8) * 2.0 ** (exp - bias)
        out[code] = sign * value
    if fmt == "e4m3fn":
        out[0x7F] = out[0xFF] = np.nan
    else:
        out[0x80] = np.nan
    return out


def decode(codes: np.ndarray, arch: str) -> np.ndarray:
    return decode_table(FORMAT[arch])[codes.astype(np.uint8, copy=False)]


@functools.cache
def wide_table(arch: str) -> np.ndarray:
    """``decode_table`` in float64 (exact): the MFMA's operands without a conversion per instruction."""
    return decode_table(FORMAT[arch]).astype(np.float64)


_NUMPY = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz}
E4M3FN_MAX = 448.0


def encode(values: np.ndarray, arch: str) -> np.ndarray:
    """uint8 codes of float32 ``values``, rounded to nearest even (e4m3fn: finite overflow saturates)."""
    fmt = FORMAT[arch]
    v = np.asarray(values, dtype=np.float32)
    if fmt == "e4m3fn":
        v = np.clip(v, -E4M3FN_MAX, E4M3FN_MAX)  # NaN stays NaN
    return v.astype(_NUMPY[fmt]).view(np.uint8)


def encode_torch(values: np.ndarray, arch: str) -> np.ndarray:
    """``encode`` by torch's casts: what ``encode`` must equal."""
    import torch

    dtype = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}[FORMAT[arch]]
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
    return t.to(dtype).view(torch.uint8).numpy()
