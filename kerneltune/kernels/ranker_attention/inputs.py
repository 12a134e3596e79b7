"""Inputs for ranker attention: random tensors and random or adversarial segment bounds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .config import Problem

BoundsCase = Callable[[int, np.random.Generator], tuple[int, int, int, int]]


def _random_split(t: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    hl = int(rng.integers(0, t // 8 + 1))
    hu = int(rng.integers(hl + 1, max(hl + 2, t - t // 8)))
    cl = hu
    cu = int(rng.integers(cl, t + 1))
    return hl, hu, cl, cu


def _odd(t: int, rng: np.random.Generator) -> int:
    """A position that is not a multiple of 8, so it starts mid-block for any block size."""
    return int(rng.integers(0, t // 8)) * 8 + int(rng.integers(1, 8))


ADVERSARIAL_CASES: dict[str, BoundsCase] = {
    # history from 0, candidates touching it, ending at T
    "touching_full": lambda t, rng: (0, t // 2 + 3, t // 2 + 3, t),
    # both segments start and end mid-block, a padding gap between them
    "mid_block_gap": lambda t, rng: (5, t // 2 - 9, t // 2 + 7, t - 13),
    # history_lower > 0, a segment straddling a 64-row block edge
    "straddle_edge": lambda t, rng: (t // 4 - 3, t // 4 + 67, t // 4 + 67, t // 4 + 70),
    "candidates_before_history": lambda t, rng: (t // 2 + 1, t - 2, 3, t // 2 + 1),
    "empty_history": lambda t, rng: (t // 3, t // 3, t // 3 + 1, t - 1),
    "empty_candidates": lambda t, rng: (1, t - 30, t - 30, t - 30),
    "single_key_history": lambda t, rng: (7, 8, 8, 40),
    # one candidate row in a tile that is otherwise padding
    "lone_candidate": lambda t, rng: (0, 9, t - 5, t - 4),
    "all_padding": lambda t, rng: (0, 0, 0, 0),
    "random_mid_block": lambda t, rng: (
        (lambda a, b: (min(a, b), max(a, b), max(a, b), min(t, max(a, b) + 37)))(_odd(t, rng), _odd(t, rng))
    ),
}


def random_bounds(batch: int, seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """Realistic rows: a history from near 0, candidates right after it."""
    return np.array([_random_split(seq_len, rng) for _ in range(batch)], dtype=np.int32)


def ranker_bounds(batch: int, seq_len: int, history: int | tuple[int, int], candidates: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Rows of a serving batch: a history of ``history`` keys (or a length drawn from
    the range), then ``candidates`` candidates, then padding."""
    rows = []
    for _ in range(batch):
        h = history if isinstance(history, int) else int(rng.integers(history[0], history[1] + 1))
        if h + candidates > seq_len:
            raise ValueError(f"history {h} + candidates {candidates} exceed seq_len {seq_len}")
        rows.append((0, h, h, h + candidates))
    return np.array(rows, dtype=np.int32)


def adversarial_bounds(seq_len: int, rng: np.random.Generator,
                       cases: list[str] | None = None) -> np.ndarray:
    """One row per adversarial case, in the order of ``cases`` (all by default)."""
    if seq_len < 128:
        raise ValueError(f"seq_len: adversarial cases need T >= 128, got {seq_len}")
    names = cases if cases is not None else list(ADVERSARIAL_CASES)
    return np.array([ADVERSARIAL_CASES[n](seq_len, rng) for n in names], dtype=np.int32)


def make_tensors(problem: Problem, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as float32 arrays with unit-variance entries; callers cast to the problem dtype."""
    rng = np.random.default_rng(seed)
    b, t, d = problem.batch, problem.seq_len, problem.head_dim
    q = rng.standard_normal((b, t, problem.q_heads, d), dtype=np.float32)
    k = rng.standard_normal((b, t, problem.kv_heads, d), dtype=np.float32)
    v = rng.standard_normal((b, t, problem.kv_heads, d), dtype=np.float32)
    return q, k, v


def make_device_tensors(problem: Problem, seed: int) -> tuple[Any, Any, Any]:
    """q, k, v drawn on the default JAX device in the problem dtype (fast at sweep sizes)."""
    import jax

    keys = jax.random.split(jax.random.key(seed), 3)
    b, t, d = problem.batch, problem.seq_len, problem.head_dim
    shapes = ((b, t, problem.q_heads, d), (b, t, problem.kv_heads, d), (b, t, problem.kv_heads, d))
    return tuple(jax.random.normal(key, shape, problem.dtype) for key, shape in zip(keys, shapes, strict=True))


def check_inputs(problem: Problem, inputs_spec: dict[str, Any], seed: int
                 ) -> tuple[Any, Any, Any, np.ndarray, tuple[np.ndarray, ...]]:
    """q, k, v on the device, the timing bounds and the check's bounds cases (the timing bounds, random
    rows, the adversarial rows). Timing bounds are the bucket's (same work for every candidate, so times
    compare); tensors and the other check bounds come from the seed (a sweep's is per bucket and sweep
    seed, verify's its own)."""
    rng = np.random.default_rng(seed)
    hist = inputs_spec.get("history", [problem.seq_len // 2, problem.seq_len // 2])
    cands = int(inputs_spec.get("candidates", problem.seq_len // 8))
    timing_rng = np.random.default_rng(inputs_spec.get("timing_seed", seed))
    timing = ranker_bounds(problem.batch, problem.seq_len, tuple(hist), cands, timing_rng)
    checks = [timing, ranker_bounds(problem.batch, problem.seq_len, tuple(hist), cands, rng)]
    if problem.seq_len >= 128:
        adv = adversarial_bounds(problem.seq_len, rng)
        reps = -(-problem.batch // len(adv))
        checks.append(np.tile(adv, (reps, 1))[: problem.batch])
    q, k, v = make_device_tensors(problem, seed)
    return q, k, v, timing, tuple(checks)


def kept_pairs(bounds: np.ndarray) -> int:
    """(query, key) pairs the mask keeps, per head: the work a kernel must do."""
    total = 0
    for hl, hu, cl, cu in np.asarray(bounds).tolist():
        hist = max(hu - hl, 0)
        cand = max(cu - cl, 0)
        total += (hist + cand) * hist + cand
    return total


def varlen_pairs(bounds: np.ndarray) -> int:
    """(query, key) pairs per head of attention with sequence lengths over a ranker batch (queries
    ``[0, candidate_upper)`` against keys ``[0, history_upper)``): the history work, which a vendor's
    ragged kernel does without the candidates' own keys (``baselines.cudnn_varlen``)."""
    b = np.asarray(bounds, dtype=np.int64)
    return int((b[:, 3] * b[:, 1]).sum())


def flops_of_pairs(problem: Problem, pairs: int) -> int:
    """FLOPs of QK^T and PV over ``pairs`` (query, key) pairs a head (2 * 2 * D a pair a head)."""
    return 4 * problem.head_dim * problem.q_heads * pairs


def useful_flops(problem: Problem, bounds: np.ndarray) -> int:
    """FLOPs over the pairs the mask keeps: the work any kernel must do."""
    return flops_of_pairs(problem, kept_pairs(bounds))


def on_history_rows(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """``x`` [B, T, H, D] with every row outside its batch row's history zeroed: the rows on which a
    vendor's ragged call (``baselines.cudnn_varlen``) and the ranker compute the same function."""
    ids = np.arange(x.shape[1])[None, :]
    b = np.asarray(bounds)
    history = (ids >= b[:, 0:1]) & (ids < b[:, 1:2])
    return np.where(history[:, :, None, None], x, 0.0)
