"""A ``kerneltune bench`` result file as the report reads it: its rows and the target verdicts it recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class BenchResult:
    data: dict[str, Any]
    targets: list[dict[str, Any]]
    source: str  # where the verdicts come from, for the report's heading


def read_bench_result(path: Path) -> BenchResult:
    """The result at ``path``; ValueError naming the file when it is no bench result."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("it has no rows")
        targets = data.get("targets")
        if targets is not None and not isinstance(targets, list):
            raise ValueError("its targets are not a list")
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable `kerneltune bench` result ({e})") from None
    if targets is None:
        return BenchResult(data, [], "no targets: the run recorded none")
    return BenchResult(data, list(targets), "recorded by the run")
