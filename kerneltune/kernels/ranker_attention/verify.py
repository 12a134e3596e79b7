"""Checking a kernel's outputs against a reference: tolerances and exact padding rules."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
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


def compare(out: Any, lse: Any, ref_out: Any, ref_lse: Any, bounds: np.ndarray, dtype: str,
            cap_method: CapMethod) -> Comparison:
    """Compare kernel outputs (out [B,T,H,D], lse [B,H,T]) with a reference.

    Valid rows must be within tolerance and finite; padding rows must be
    exactly 0 with lse = -inf. NaN (e.g. a poisoned element never written)
    never passes. The arrays may live on the device: every element is judged there in float32 (the
    outputs are bf16/f16, the reference float32, so each difference is exact to 2**-24 of itself) and
    only the figures come back, so a check costs what its kernel does, not a copy of the output.
    """
    atol, rtol, fro = _TOLERANCE[dtype]
    atol += CAP_TOLERANCE[cap_method]
    lse_atol = LSE_ATOL + CAP_TOLERANCE[cap_method]
    figures = _figures(out, lse, ref_out, ref_lse, np.asarray(bounds, np.int32), atol, rtol)
    f = {k: np.asarray(v).item() for k, v in jax.device_get(figures).items()}  # one transfer of scalars
    errors: list[str] = []
    if f["nan_out"] or f["nan_lse"]:
        errors.append(f"{f['nan_out']} NaN in out, {f['nan_lse']} NaN in lse (unwritten or invalid)")
    if f["pad_out"]:
        errors.append(f"padding rows: {f['pad_out']} elements of out are not exactly 0")
    if f["pad_lse"]:
        errors.append("padding rows: lse is not -inf")
    ref_norm = math.sqrt(f["ref_sq"])
    rel_fro = math.sqrt(f["diff_sq"]) / ref_norm if ref_norm else 0.0
    if f["bad"]:
        idx = list(np.unravel_index(f["first_bad"], np.shape(out)))
        errors.append(f"out: {f['bad']} elements beyond atol={atol:g} + rtol={rtol:g}*|ref|; "
                      f"first at [b,t,h,d]={[int(i) for i in idx]}: {f['first_out']:.5g} vs {f['first_ref']:.5g}")
    if rel_fro > fro:
        errors.append(f"out: relative Frobenius error {rel_fro:.3g} > {fro:g}")
    if f["lse_nonfinite"] or f["lse_max"] > np.float32(lse_atol):  # judged in float32, as each element is
        errors.append(f"lse: max error {f['lse_max']:.3g} > {lse_atol:g} (or not finite) on valid rows")
    return Comparison(f["max_abs"], rel_fro, f["lse_max"], tuple(errors))


@functools.partial(jax.jit, static_argnames=("atol", "rtol"))
def _figures(out: Any, lse: Any, ref_out: Any, ref_lse: Any, bounds: Any, atol: float,
             rtol: float) -> dict[str, Any]:
    """Counts, sums and maxima of one comparison, computed where the arrays live."""
    f32 = jnp.float32
    out, lse, ref_out, ref_lse = (jnp.asarray(x).astype(f32) for x in (out, lse, ref_out, ref_lse))
    ids = jnp.arange(out.shape[1])[None, :]
    hl, hu, cl, cu = (bounds[:, i][:, None] for i in range(4))
    valid = ((ids >= hl) & (ids < hu)) | ((ids >= cl) & (ids < cu))  # [B, T]
    v_out = jnp.broadcast_to(valid[:, :, None, None], out.shape)
    v_lse = jnp.broadcast_to(valid[:, None, :], lse.shape)
    diff = jnp.where(v_out, jnp.abs(out - ref_out), 0.0)
    bad = v_out & ((diff > atol + rtol * jnp.abs(ref_out)) | ~jnp.isfinite(out))
    first = jnp.argmax(bad.ravel()) if bad.size else jnp.int32(0)
    lse_diff = jnp.where(v_lse, jnp.abs(lse - ref_lse), 0.0)

    def nanmax(x: Any) -> Any:
        return jnp.nanmax(x) if x.size else f32(0.0)

    return {
        "nan_out": jnp.isnan(out).sum(), "nan_lse": jnp.isnan(lse).sum(),
        "pad_out": jnp.count_nonzero(jnp.where(v_out, 0.0, out)),
        "pad_lse": jnp.sum(~v_lse & ~jnp.isneginf(lse)),
        "bad": bad.sum(), "first_bad": first,
        "first_out": out.ravel()[first] if out.size else f32(0.0),
        "first_ref": ref_out.ravel()[first] if out.size else f32(0.0),
        "max_abs": nanmax(diff),
        "diff_sq": jnp.sum(jnp.square(jnp.nan_to_num(diff, nan=jnp.inf))),
        "ref_sq": jnp.sum(jnp.square(jnp.where(v_out, ref_out, 0.0))),
        "lse_max": nanmax(lse_diff),
        "lse_nonfinite": jnp.sum(v_lse & ~jnp.isfinite(lse)),
    }


def poisoned_outputs(q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """NaN-filled out [B, T, Hq, D] and lse [B, Hq, T] buffers for the poisoned entry point, which writes into
    them: a row it leaves unwritten stays NaN."""
    b, t, hq, _ = q.shape
    return jnp.full(q.shape, jnp.nan, q.dtype), jnp.full((b, hq, t), jnp.nan, jnp.float32)


def check_interpret(problem, config, bounds: np.ndarray, seed: int) -> Comparison:
    """Run the kernel in Mosaic GPU's CPU interpret mode on fresh inputs, outputs poisoned with NaN,
    and compare it with the float64 oracle."""
    from .inputs import make_tensors
    from .interpret_callbacks import install as fast_interpret_callbacks
    from .kernel import build_forward
    from .reference import reference_f64

    fast_interpret_callbacks()
    q, k, v = (jnp.asarray(x, problem.dtype) for x in make_tensors(problem, seed))
    out, lse = build_forward(problem, config, interpret=True, poisoned=True)(q, k, v, jnp.asarray(bounds),
                                                                               *poisoned_outputs(q))
    f = [np.asarray(x.astype(jnp.float32)) for x in (q, k, v)]
    ro, rl = reference_f64(*f, bounds, sm_scale=problem.scale, cap_method=problem.cap_method, cap=problem.cap)
    return compare(out, lse, ro, rl, bounds, problem.dtype, problem.cap_method)
