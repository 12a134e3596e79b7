"""Dense references of ranker attention: float32 JAX and a float64 NumPy oracle.

Both build the full [T, T] mask from the bounds, so they share no code path
with the kernel's block skipping and phase splitting; only the capping
function (``cap_forward``) is common.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from .cap import CapMethod, CapParams, cap_forward


def ranker_mask(bounds: np.ndarray, seq_len: int, xp: ModuleType = np):
    """Boolean mask [B, T_q, T_k]: history keys for every row of either segment,
    plus each candidate's own key."""
    b = xp.asarray(bounds)
    hl, hu, cl, cu = (b[:, i][:, None] for i in range(4))
    ids = xp.arange(seq_len)[None, :]
    in_hist = (ids >= hl) & (ids < hu)
    in_cand = (ids >= cl) & (ids < cu)
    q_valid = (in_hist | in_cand)[:, :, None]
    hist_keys = in_hist[:, None, :]
    self_pairs = (in_cand[:, :, None] & in_cand[:, None, :]) & xp.eye(seq_len, dtype=bool)[None]
    return (q_valid & hist_keys) | self_pairs


def _attention(q, k, v, bounds, scale, method, params, xp, dtype):
    q = xp.asarray(q, dtype=dtype)
    k = xp.asarray(k, dtype=dtype)
    v = xp.asarray(v, dtype=dtype)
    _, t, hq, _ = q.shape
    group = hq // k.shape[2]
    k = xp.repeat(k, group, axis=2)
    v = xp.repeat(v, group, axis=2)
    logits = xp.einsum("bqhd,bkhd->bhqk", q, k)
    s = cap_forward(logits, method, params, pre=scale, xp=xp)
    mask = ranker_mask(bounds, t, xp)[:, None]
    s = xp.where(mask, s, -xp.inf)
    m = xp.max(s, axis=-1, keepdims=True)
    m_safe = xp.where(xp.isfinite(m), m, 0.0)
    p = xp.exp(s - m_safe)
    denom = xp.sum(p, axis=-1, keepdims=True)
    any_key = denom > 0
    out = xp.einsum("bhqk,bkhd->bqhd", p / xp.where(any_key, denom, 1.0), v)
    lse = xp.where(any_key, xp.log(xp.where(any_key, denom, 1.0)) + m_safe, -xp.inf)[..., 0]
    return out, lse


def reference_f64(q, k, v, bounds, *, sm_scale: float, cap_method: CapMethod = CapMethod.NONE,
                  cap: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The oracle: float64 NumPy, out [B, T, Hq, D] and natural-log lse [B, Hq, T]."""
    method = CapMethod.parse(cap_method)
    params = CapParams(cap)
    return _attention(q, k, v, np.asarray(bounds), sm_scale, method, params, np, np.float64)


def reference_f32(q, k, v, bounds, *, sm_scale: float, cap_method: CapMethod = CapMethod.NONE,
                  cap: float | None = None):
    """float32 JAX on whatever device the inputs live on (for GPU-side checks)."""
    import jax.numpy as jnp

    method = CapMethod.parse(cap_method)
    return _attention(q, k, v, bounds, sm_scale, method, CapParams(cap), jnp, jnp.float32)
