"""The public launch API: validates arguments, picks a config, runs the kernel."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .accuracy import ErrorBudget, budget_for, budget_refusal
from .bounds import check_bounds
from .cap import CapMethod
from .config import SUPPORTED_HEAD_DIMS, KernelConfig, Problem, infeasibility
from .heuristics import heuristic_config
from .interpret_callbacks import install as fast_interpret_callbacks
from .kernel import Forward, build_forward
from .source import KERNEL_NAME, kernel_source_hash, tile_type_error


def problem_of(q: Any, k: Any, v: Any, bounds: Any, *, sm_scale: float | None,
               cap_method: CapMethod | str, cap: float | None) -> Problem:
    """Check the call's arguments and return the static problem they describe."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if getattr(x, "ndim", None) != 4:
            raise ValueError(f"{name}: expected rank 4 [B, T, H, D], got shape {getattr(x, 'shape', None)}")
    dtype = jnp.dtype(q.dtype)
    if dtype not in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)):
        raise ValueError(f"q: dtype {dtype} is not bfloat16 or float16")
    for name, x in (("k", k), ("v", v)):
        if jnp.dtype(x.dtype) != dtype:
            raise ValueError(f"{name}: dtype {x.dtype} differs from q's {dtype}")
    b, t, hq, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"v: shape {v.shape} differs from k's {k.shape}")
    if k.shape[0] != b or k.shape[1] != t or k.shape[3] != d:
        raise ValueError(f"k: shape {k.shape} must be [B={b}, T={t}, Hkv, D={d}] to match q")
    hkv = k.shape[2]
    if hq % hkv:
        raise ValueError(f"q: {hq} heads is not a multiple of k's {hkv} heads (GQA needs Hq % Hkv == 0)")
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"q: head_dim {d} is not one of {SUPPORTED_HEAD_DIMS}")
    if getattr(bounds, "shape", None) != (b, 4):
        raise ValueError(f"bounds: expected shape [B={b}, 4], got {getattr(bounds, 'shape', None)}")
    if jnp.dtype(bounds.dtype) != jnp.dtype(jnp.int32):
        raise ValueError(f"bounds: dtype must be int32, got {bounds.dtype}")
    if not isinstance(bounds, jax.core.Tracer):
        check_bounds(np.asarray(bounds), t)
    return Problem(batch=b, seq_len=t, q_heads=hq, kv_heads=hkv, head_dim=d, dtype=dtype.name,
                   cap_method=CapMethod.parse(cap_method), cap=cap, sm_scale=sm_scale)


@functools.cache
def _compiled(problem: Problem, config: KernelConfig, interpret: bool) -> Forward:
    if interpret:
        fast_interpret_callbacks()
    return build_forward(problem, config, interpret=interpret)


def _refusal(problem: Problem, budget: ErrorBudget, item: dict[str, Any]) -> str | None:
    """Why a tuned entry's winner or fallback cannot run this problem (a field of the wrong type, a field
    its cap forbids, a size that does not fit, measured errors over the call's budget), or None."""
    tiles = item["config"]
    if (why := tile_type_error(tiles)) is not None:
        return why
    try:
        why = infeasibility(KernelConfig.for_problem(problem, **tiles), problem)
    except (TypeError, ValueError) as e:
        return str(e)
    return why if why is not None else budget_refusal(item, budget)


# Caps that compute the same function with other instructions: the nearest proxies of each other.
_SAME_FUNCTION = {CapMethod.TANH_APPROX: CapMethod.TANH}


def _cap_kin(problem: Problem, entry_bucket: dict[str, Any]) -> int:
    """0 when an entry's cap computes the problem's function (tanh for tanh_approx), else 1: between
    equally near entries, a tanh entry serves tanh_approx better than a no-cap one (which lacks
    static_max, and was once taken by the entries' order alone)."""
    def function(m: Any) -> CapMethod:
        return _SAME_FUNCTION.get(CapMethod.parse(m), CapMethod.parse(m))
    try:
        return 0 if function(entry_bucket.get("cap_method")) == function(problem.cap_method) else 1
    except (ValueError, TypeError):  # a table's bucket that lacks or garbles its cap: the least kin, never a crash
        return 2


def choose_config(problem: Problem, config: KernelConfig | None, budget: ErrorBudget | None = None) -> KernelConfig:
    """The caller's tiles if given, else the tuned table's entry whose measured errors meet ``budget``
    (by default the one for a call that returns only ``out``), else the heuristic; always with the
    problem's cap and scale."""
    if config is None:
        budget = budget or budget_for(problem.cap_method, return_lse=False)
        from kerneltune.backends.cuda_jax import system_stamps
        from kerneltune.tables.lookup import tuned_config

        tiles = tuned_config(KERNEL_NAME, problem.bucket(), kernel_source_hash(),
                             Problem.HARD_BUCKET_FIELDS, system_stamps(),
                             refuses=functools.partial(_refusal, problem, budget),
                             kin=functools.partial(_cap_kin, problem))
        return KernelConfig.for_problem(problem, **(tiles or heuristic_config(problem)))
    chosen = KernelConfig.for_problem(problem, **config.tile())
    why = infeasibility(chosen, problem)
    if why is not None:
        raise ValueError(f"config: {why}")
    return chosen


def clamp_bounds(bounds: jax.Array, seq_len: int) -> jax.Array:
    """What traced bounds mean (concrete ones that break a rule raise ``ValueError`` instead): each value
    clipped into [0, T]; an inverted range empty; where the ranges overlap, history keeps the overlap and
    the candidates keep only their part before the history (if they start before it) or after it."""
    hl, hu, cl, cu = (jnp.clip(bounds[:, i], 0, seq_len) for i in range(4))
    hu, cu = jnp.maximum(hu, hl), jnp.maximum(cu, cl)
    overlap = (hl < hu) & (cl < cu) & (hl < cu) & (cl < hu)
    before = cl < hl
    cl2 = jnp.where(overlap & ~before, hu, cl)
    cu2 = jnp.where(overlap & before, hl, jnp.maximum(cu, cl2))
    return jnp.stack([hl, hu, cl2, cu2], axis=1).astype(bounds.dtype)


def ranker_attention(q: jax.Array, k: jax.Array, v: jax.Array, bounds: jax.Array, *,
                     sm_scale: float | None = None, cap_method: CapMethod | str = "none",
                     cap: float | None = None, config: KernelConfig | None = None,
                     return_lse: bool = False, error_budget: ErrorBudget | None = None, interpret: bool = False):
    """Ranker attention forward on Hopper (or the CPU with ``interpret=True``).

    q ``[B, T, Hq, D]``, k and v ``[B, T, Hkv, D]``, bounds ``[B, 4]`` int32 as
    (history_lower, history_upper, candidate_lower, candidate_upper). Returns
    ``out`` ``[B, T, Hq, D]`` or ``(out, lse)`` with lse ``[B, Hq, T]`` float32
    (natural log; -inf and out = 0 for rows in neither segment). Concrete bounds that break a rule
    raise ``ValueError``; traced bounds (under ``jax.jit``) mean what ``clamp_bounds`` makes of them.

    ``error_budget`` bounds the errors of the tuned config the call may launch, as multiples of the
    no-cap kernel's (``accuracy``); by default 2x on ``out``, and 1x on the LSE when it is returned and
    the cap is ``tanh`` (``tanh_approx`` is tanh without the LSE bound). A ``config`` given is used as is.
    """
    problem = problem_of(q, k, v, bounds, sm_scale=sm_scale, cap_method=cap_method, cap=cap)
    if not interpret and jax.default_backend() != "gpu":
        raise RuntimeError(f"ranker_attention: the kernel runs on an NVIDIA Hopper GPU (sm_90), and JAX's "
                           f"default backend here is {jax.default_backend()}; pass interpret=True to run it "
                           "in Mosaic GPU's CPU interpreter (slow, for tests)")
    if isinstance(bounds, jax.core.Tracer):  # not checkable here: given the defined meaning instead
        bounds = clamp_bounds(bounds, problem.seq_len)
    chosen = choose_config(problem, config, budget_for(problem.cap_method, return_lse, error_budget))
    out, lse = _compiled(problem, chosen, interpret)(q, k, v, bounds)
    return (out, lse) if return_lse else out
