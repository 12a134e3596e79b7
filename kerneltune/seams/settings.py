"""How one candidate is measured: the settings a request carries to the timing worker, typed on both sides of
the pipe (``wire.Request``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kerneltune.seams.json_fields import unknown_or_mistyped
from kerneltune.seams.limits import CANDIDATE_MAX_SECONDS, COMPILE_TIMEOUT_S


@dataclass(frozen=True)
class MeasureSettings:
    rel_noise: float = 0.01  # sampling stops once the median's 95% interval is this narrow
    max_seconds: float = CANDIDATE_MAX_SECONDS  # ... or after this long
    min_samples: int = 10
    batch: int = 10
    warmup: int = 3
    cold_l2: bool = False  # the L2 flushed before each sample
    compile_timeout: float = COMPILE_TIMEOUT_S  # a compile worker's build of the candidate is killed past this

    def __post_init__(self) -> None:
        if not 0 < self.rel_noise < 1:  # NaN fails this too
            raise ValueError(f"rel_noise: must be in (0, 1), got {self.rel_noise}")
        for name in ("max_seconds", "compile_timeout"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"{name}: must be a positive number of seconds, got {seconds}")
        if self.min_samples < 3 or self.batch < 1 or self.warmup < 0:
            raise ValueError("min_samples >= 3, batch >= 1 and warmup >= 0 are required")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MeasureSettings:
        """Settings as a worker receives them: unknown names and wrong types are errors, not defaults."""
        if (why := unknown_or_mistyped(cls, obj)) is not None:
            raise ValueError(f"settings: {why}")
        return cls(**obj)
