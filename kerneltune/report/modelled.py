"""A compile-only sweep's candidates ranked by the kernel's cost model, beside the rank its older static score
(``static.isa_score``) gave each: modelled figures, never measurements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltune.files.records import Record
from kerneltune.seams.wire import Status
from kerneltune.tuning.journal import Journal


@dataclass(frozen=True)
class ModelledRow:
    rank: int
    config: dict[str, Any]
    us_per_layer: float
    fraction_of_floor: float
    static_rank: int
    static_score: float


def modelled_ranking(journal: Path, bucket: str, top: int = 10) -> list[ModelledRow]:
    """The ``top`` candidates of ``bucket`` by modelled time (the journal's ``score``); [] if none was modelled."""
    ranked = sorted((r for r in Journal(journal).records()
                     if r.status == Status.OK and r.modelled is not None and r.bucket == bucket),
                    key=lambda r: r.score or 0.0)

    def isa_score(r: Record) -> float:
        return float((r.static or {})["isa_score"])

    by_isa = {r.key: i + 1 for i, r in enumerate(sorted(ranked, key=isa_score))}
    return [ModelledRow(i + 1, dict(r.config), float(r.modelled["us_per_layer"]),
                        float(r.modelled["fraction_of_floor"]), by_isa[r.key], isa_score(r))
            for i, r in enumerate(ranked[:top]) if r.modelled is not None]
