"""The untuned choice: tiles that fit every supported head_dim on Hopper."""

from __future__ import annotations

from .config import KernelConfig, Problem, infeasibility

# Tried in order; the first that fits the problem wins.
_PREFERENCES: dict[int, list[dict[str, object]]] = {
    64: [dict(block_q=64, block_kv=128, num_stages=3), dict(block_q=64, block_kv=64, num_stages=2)],
    128: [dict(block_q=64, block_kv=128, num_stages=2), dict(block_q=64, block_kv=64, num_stages=2)],
    256: [dict(block_q=64, block_kv=64, num_stages=2)],
}


def heuristic_config(problem: Problem) -> dict[str, object]:
    """Every tile field of the first preferred config that fits ``problem``."""
    reasons = []
    for tiles in _PREFERENCES[problem.head_dim]:
        config = KernelConfig.for_problem(problem, **tiles)
        why = infeasibility(config, problem)
        if why is None:
            return config.tile()
        reasons.append(why)
    raise ValueError(f"q: no kernel tile fits this problem ({'; '.join(reasons)})")
