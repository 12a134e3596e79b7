"""Checking a kernel's outputs against a reference: tolerances and exact padding rules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cap import CAP_TOLERANCE, CapMethod

# Per output dtype: absolute and relative error allowed per element, and the
# relative Frobenius error of the whole output. bf16 keeps 8 mantissa bits
# (rounding 2**-9 relative), and P is rounded to it before P.V; f16 keeps 11.
_TOLERANCE = {
    "bfloat16": (2e-2, 2e-2, 1e-2),
    "float16": (4e-3, 4e-3, 2e-3),
}
LSE_ATOL = 1e-3


@dataclass(frozen=True)
class Comparison:
    max_abs: float
    rel_fro: float
    lse_max_abs: float
    errors: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


def row_validity(bounds: np.ndarray, seq_len: int) -> np.ndarray:
    """[B, T] True for rows in the history or the candidates."""
    ids = np.arange(seq_len)[None, :]
    b = np.asarray(bounds)
    hl, hu, cl, cu = (b[:, i][:, None] for i in range(4))
    return ((ids >= hl) & (ids < hu)) | ((ids >= cl) & (ids < cu))


def compare(out: np.ndarray, lse: np.ndarray, ref_out: np.ndarray, ref_lse: np.ndarray,
            bounds: np.ndarray, dtype: str, cap_method: CapMethod) -> Comparison:
    """Compare kernel outputs (out [B,T,H,D], lse [B,H,T]) with a reference.

    Valid rows must be within tolerance and finite; padding rows must be
    exactly 0 with lse = -inf. NaN (e.g. a poisoned element never written)
    never passes.
    """
    out = np.asarray(out, np.float64)
    lse = np.asarray(lse, np.float64)
    ref_out = np.asarray(ref_out, np.float64)
    ref_lse = np.asarray(ref_lse, np.float64)
    atol, rtol, fro = _TOLERANCE[dtype]
    atol += CAP_TOLERANCE[cap_method]
    lse_atol = LSE_ATOL + CAP_TOLERANCE[cap_method]
    errors: list[str] = []
    valid = row_validity(bounds, out.shape[1])  # [B, T]
    v_out = valid[:, :, None, None]
    v_lse = valid[:, None, :]

    nan_out = int(np.isnan(out).sum())
    nan_lse = int(np.isnan(lse).sum())
    if nan_out or nan_lse:
        errors.append(f"{nan_out} NaN in out, {nan_lse} NaN in lse (unwritten or invalid)")
    pad_out = np.where(v_out, 0.0, out)
    if np.any(pad_out != 0):
        errors.append(f"padding rows: {int(np.count_nonzero(pad_out))} elements of out are not exactly 0")
    pad_lse = lse[~np.broadcast_to(v_lse, lse.shape)]
    if pad_lse.size and not np.all(np.isneginf(pad_lse)):
        errors.append("padding rows: lse is not -inf")

    diff = np.where(v_out, np.abs(out - ref_out), 0.0)
    limit = atol + rtol * np.abs(ref_out)
    bad = np.where(v_out, diff > limit, False) | np.where(v_out, ~np.isfinite(out), False)
    max_abs = float(np.nanmax(diff)) if diff.size else 0.0
    ref_norm = float(np.linalg.norm(np.where(v_out, ref_out, 0.0)))
    rel_fro = float(np.linalg.norm(np.nan_to_num(diff, nan=np.inf))) / ref_norm if ref_norm else 0.0
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        errors.append(f"out: {int(bad.sum())} elements beyond atol={atol:g} + rtol={rtol:g}*|ref|; "
                      f"first at [b,t,h,d]={list(idx)}: {out[idx]:.5g} vs {ref_out[idx]:.5g}")
    if rel_fro > fro:
        errors.append(f"out: relative Frobenius error {rel_fro:.3g} > {fro:g}")

    with np.errstate(invalid="ignore"):  # -inf - -inf on padding rows, masked out
        lse_diff = np.where(v_lse, np.abs(lse - ref_lse), 0.0)
    lse_max = float(np.nanmax(lse_diff)) if lse_diff.size else 0.0
    if not np.all(np.isfinite(np.where(v_lse, lse, 0.0))) or lse_max > lse_atol:
        errors.append(f"lse: max error {lse_max:.3g} > {lse_atol:g} (or not finite) on valid rows")
    return Comparison(max_abs, rel_fro, lse_max, tuple(errors))


def check_interpret(problem, config, bounds: np.ndarray, seed: int) -> Comparison:
    """Run the kernel in Mosaic GPU's CPU interpret mode on fresh inputs, outputs poisoned with NaN,
    and compare it with the float64 oracle."""
    import jax.numpy as jnp

    from .inputs import make_tensors
    from .kernel import build_forward
    from .reference import reference_f64

    q, k, v = (jnp.asarray(x, problem.dtype) for x in make_tensors(problem, seed))
    out0 = jnp.full(q.shape, jnp.nan, q.dtype)
    lse0 = jnp.full((problem.batch, problem.q_heads, problem.seq_len), jnp.nan, jnp.float32)
    out, lse = build_forward(problem, config, interpret=True, poisoned=True)(q, k, v, jnp.asarray(bounds), out0, lse0)
    f = [np.asarray(x.astype(jnp.float32)) for x in (q, k, v)]
    ro, rl = reference_f64(*f, bounds, sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
    return compare(np.asarray(out.astype(jnp.float32)), np.asarray(lse), ro, rl, bounds, problem.dtype,
                   problem.cap_method)
