"""The ranker's semantics written a second time, plainly, for the tests: no code shared with the kernel,
its caps or its references. Loops over every (row, head, query, key); only for tiny shapes."""

from __future__ import annotations

import math

import numpy as np


def cap(x: float, method: str, c: float | None) -> float:
    if method == "none":
        return x
    if method in ("tanh", "tanh_approx"):
        return c * math.tanh(x / c)
    if method == "softsign":
        return x / (1 + abs(x) / c)
    if method == "clamp":
        return min(max(x, -c), c)
    raise ValueError(method)


def keeps(query: int, key: int, hl: int, hu: int, cl: int, cu: int) -> bool:
    """History and candidate queries see every history key; a candidate also sees itself."""
    in_history, in_candidates = hl <= query < hu, cl <= query < cu
    if not (in_history or in_candidates):
        return False
    return hl <= key < hu or (in_candidates and key == query)


def attention(q, k, v, bounds, scale: float, method: str, c: float | None):
    """(out [B, T, Hq, D], lse [B, Hq, T]) in float64; padding rows give 0 and -inf."""
    b_, t_, hq, d = q.shape
    group = hq // k.shape[2]
    out = np.zeros((b_, t_, hq, d))
    lse = np.full((b_, hq, t_), -np.inf)
    for b in range(b_):
        hl, hu, cl, cu = (int(x) for x in bounds[b])
        for h in range(hq):
            for i in range(t_):
                keys = [j for j in range(t_) if keeps(i, j, hl, hu, cl, cu)]
                if not keys:
                    continue
                logits = [cap(scale * float(np.dot(q[b, i, h], k[b, j, h // group])), method, c) for j in keys]
                m = max(logits)
                weights = [math.exp(x - m) for x in logits]
                total = sum(weights)
                out[b, i, h] = sum(w * v[b, j, h // group] for w, j in zip(weights, keys, strict=True)) / total
                lse[b, h, i] = m + math.log(total)
    return out, lse
