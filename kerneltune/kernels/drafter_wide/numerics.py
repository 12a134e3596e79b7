"""The megakernel's number formats, for the emulation, and the error they allow against float64.

``Formats(arch)`` rounds where the kernel rounds: 8-bit rows with a float32 scale (``amax`` over the
row, head quarter or, for the down projection's input, 128-value chunk of the row; codes
``v · f8_max / amax`` by round-to-nearest-even, as ``v_cvt_pk_fp8_f32``), bf16 where the kernel stores bf16
(qkv, act, the reduce-scatter pairs, the K/V cache and the attention's LDS tiles, the norm weights, h_out)
or feeds a bf16 MFMA (the attention's q and P), and float32 everywhere else. ``Formats(None)`` keeps float64
and rounds nothing.

The bound (``error_bound``) on h_out's relative Frobenius error against the float64 model, written
down before it was measured and not adjusted after:

- A rounding to a format with ``p`` mantissa bits errs by a relative ``δ``, ``|δ| ≤ u = 2**-(p+1)``:
  ``u8 = 2**-4`` for e4m3 (e4m3fnuz on gfx942 and e4m3fn on gfx950 have the same 3 bits), ``u16 = 2**-8``
  for bf16. float32 (``2**-24``, accumulation included) is left out.
- Errors of different roundings are independent with mean zero, so they add in quadrature. Each is
  given its largest possible variance, ``u²`` (the whole mass at ``±u``), not the ``u²/3`` of a
  uniform spread: the bound holds for any distribution of the rounded values.
- A GEMV of two 8-bit operands then errs by ``√2·u8`` relative to its output (per-term errors over K
  terms of random sign add as the output's own terms do), plus its store's rounding.
- Gains of the steps between (first order): attention passes the relative errors of q, k and v each
  with gain 1 (normed heads: logits of order 1). The attention's MFMAs take q, k and v as bf16 (one more
  rounding each, counted for cached keys too) and P as bf16: ``o = Σ p v / Σ p`` with each ``p`` off by
  ``δ`` errs like a GEMV's terms, ``u16`` relative (added 2026-12-01 with the MFMA attention, before its
  error was measured). The clamped SwiGLU passes g's with gain 2
  (``d ln(g·σ(1.702 g)) / d ln g ≤ 1 + 1.702·g·σ(-1.702 g) < 2``) and u's with gain 1; RMSNorm passes
  the relative error of its input at most with gain 1.
- Branch sizes come from the float64 model on the same inputs (``forward_f64(..., norms=)``): the
  residual update's error is ``r_o·‖o‖`` and ``r_d·‖d‖``, each layer's input carries the error so far
  relative to ``‖x‖``, and h_out's relative error is the final residual's, plus the final bf16 stores.

This global bound is the emulation's check. The interpreted kernel is judged per element by the same model
carried element by element (``error_model.py``): h_out and every K/V cache row the step writes, and the kernel
against the emulation at the difference their tie-breaking makes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .reference import F8_DTYPE, F8_MAX, Dims, StepInputs, Weights, forward_f64

U8 = 2.0 ** -4  # e4m3: 3 mantissa bits, round to nearest
U16 = 2.0 ** -8  # bf16: 7 mantissa bits


class Formats:
    """Where the kernel rounds and to what; ``arch`` None: float64, nothing rounded."""

    def __init__(self, arch: str | None):
        if arch is not None and arch not in F8_MAX:
            raise ValueError(f"numbers: {arch!r} is not one of {sorted(F8_MAX)} (or None for float64)")
        self.arch = arch
        self.exact = arch is None
        self.dtype = np.float64 if arch is None else np.float32

    @property
    def name(self) -> str:
        return "float64" if self.arch is None else f"{self.arch} 8-bit"

    def f32(self, a: Any) -> np.ndarray:
        """``a`` in the working precision: float32 in the kernel's formats, float64 in float64 mode."""
        return np.asarray(a, dtype=self.dtype)

    def bf16(self, a: Any) -> np.ndarray:
        if self.exact:
            return np.asarray(a, dtype=np.float64)
        import torch

        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(torch.bfloat16).float().numpy()

    def f8(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """8-bit codes (decoded) of each row of ``a`` and the row's scale ``amax / f8_max``, as the kernel
        makes them: codes of ``v · (f8_max / amax)`` in float32; codes times scale give the values back."""
        if self.exact:
            return np.asarray(a, dtype=np.float64), np.ones(a.shape[:-1])
        import torch

        f8_max = np.float32(F8_MAX[self.arch])
        rows = np.asarray(a, dtype=np.float32)
        amax = np.maximum(np.abs(rows).max(axis=-1), np.float32(1e-12))
        codes = torch.from_numpy(rows * (f8_max / amax)[..., None]).to(F8_DTYPE[self.arch]).float().numpy()
        return codes, amax / f8_max

    def f8_chunks(self, a: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """``f8`` of each ``chunk`` aligned values of each row of ``a`` [n, k], as the kernel quantises the down
        projection's input while it reads it: codes [n, k / chunk, chunk], a scale per chunk [n, k / chunk]."""
        return self.f8(np.asarray(a).reshape(a.shape[0], -1, chunk))


def error_bound(norms: list[dict[str, float]], final: float) -> float:
    """The bound on h_out's relative Frobenius error (module docstring), from each layer's branch sizes
    ``{"x": ‖x‖, "o": ‖o‖, "h": ‖x + o‖, "d": ‖d‖}`` and the final residual's ``‖x‖`` in the float64 model."""
    gemv = 2 * U8 ** 2 + U16 ** 2  # two 8-bit operands, a bf16 store
    carried = 0.0  # squared error of the residual so far, absolute
    for n in norms:
        into = carried / n["x"] ** 2  # the layer input's relative error, squared (RMSNorm: gain 1)
        r_qkv = into + gemv
        r_o = 3 * (r_qkv + U16 ** 2) + U16 ** 2 + gemv  # bf16 q, k, v (gain 1) and P; the 8-bit a8 and W_o
        r_gu = (carried + r_o * n["o"] ** 2) / n["h"] ** 2 + gemv
        r_d = (4 + 1) * r_gu + U16 ** 2 + gemv  # g with gain 2, u with 1; act stored bf16; then W_d
        carried += r_o * n["o"] ** 2 + r_d * n["d"] ** 2
    return math.sqrt(carried / final ** 2 + 2 * U16 ** 2)  # the final norm's bf16 weights and h_out


def bounded_reference(d: Dims, weights: Weights, inputs: StepInputs) -> tuple[Any, float]:
    """The float64 model's h_out and the bound on the formats' error against it (its branch sizes)."""
    norms: list[dict[str, float]] = []
    ref = forward_f64(d, weights, inputs, norms)
    return ref, error_bound(norms[:-1], norms[-1]["x"])


def frobenius_error(h_out: np.ndarray, reference: np.ndarray) -> float:
    """‖h_out - reference‖ / ‖reference‖ (NaN counts as infinite)."""
    diff = h_out - reference
    return math.inf if np.isnan(diff).any() else float(np.linalg.norm(diff) / np.linalg.norm(reference))
