"""Per-row segment bounds: the history and candidate ranges of each batch row."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

BOUND_FIELDS = ("history_lower", "history_upper", "candidate_lower", "candidate_upper")


class SegmentBounds(NamedTuple):
    """Half-open ranges ``[history_lower, history_upper)`` and
    ``[candidate_lower, candidate_upper)`` of one batch row.

    The fields are whatever the caller holds: Python ints, NumPy scalars or
    traced device scalars inside the kernel.
    """

    history_lower: Any
    history_upper: Any
    candidate_lower: Any
    candidate_upper: Any

    def query_in_history(self, ids: Any) -> Any:
        return (ids >= self.history_lower) & (ids < self.history_upper)

    def query_in_candidates(self, ids: Any) -> Any:
        return (ids >= self.candidate_lower) & (ids < self.candidate_upper)


def check_bounds(bounds: np.ndarray, seq_len: int) -> None:
    """Raise ``ValueError`` naming the first row and rule that concrete bounds break."""
    b = np.asarray(bounds)
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"bounds: expected shape [B, 4], got {list(b.shape)}")
    for row, (hl, hu, cl, cu) in enumerate(b.tolist()):
        where = f"bounds[{row}] = {[hl, hu, cl, cu]}"
        for name, value in zip(BOUND_FIELDS, (hl, hu, cl, cu), strict=True):
            if not 0 <= value <= seq_len:
                raise ValueError(f"{where}: {name} must be in [0, T={seq_len}]")
        if hl > hu:
            raise ValueError(f"{where}: history_lower must be <= history_upper")
        if cl > cu:
            raise ValueError(f"{where}: candidate_lower must be <= candidate_upper")
        if hl < hu and cl < cu and hl < cu and cl < hu:
            raise ValueError(f"{where}: the history and candidate ranges overlap")
