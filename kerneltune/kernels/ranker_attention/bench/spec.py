"""A bench file (shapes, caps, targets) and the target verdicts of a bench result."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltune.files.paths import SPACES

from .targets import Target, evaluate, parse_targets


@dataclass(frozen=True)
class BenchShape:
    name: str
    problem: dict[str, Any]
    history: tuple[int, int]
    candidates: int
    ragged: bool = False  # each row draws its own history length (else one length for every row)


@dataclass(frozen=True)
class BenchSpec:
    """A bench file: the shapes, the caps each runs with, and the targets the run is checked against."""

    shapes: list[BenchShape]
    caps: dict[str, float]
    targets: list[Target]

    def verdicts(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return evaluate(self.targets, rows, {s.name: int(s.problem["head_dim"]) for s in self.shapes})


def load_spec(path: Path) -> BenchSpec:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    shapes = []
    for i, s in enumerate(data.get("shapes", [])):
        try:
            shapes.append(BenchShape(s["name"], dict(s["problem"]), tuple(s["bounds"]["history"]),
                                     int(s["bounds"]["candidates"]), bool(s["bounds"].get("ragged", False))))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: shapes[{i}]: missing or malformed field {e}") from None
    caps = dict(data.get("caps", {"none": 0.0}))
    return BenchSpec(shapes, caps, parse_targets(data.get("targets", []), str(path)))



def result_verdicts(result: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A bench result's target verdicts and where they come from: as recorded by the run, or (for
    results from before runs recorded them) the run's rows checked now against the targets of its
    bench file, found where the run read it or by name in this checkout's search_spaces/."""
    if "targets" in result:
        return list(result["targets"]), "recorded by the run"
    recorded = Path(result.get("shapes", ""))
    for path in (recorded, SPACES / recorded.name):
        if recorded.name and path.is_file():
            return load_spec(path).verdicts(result["rows"]), f"evaluated now against {path}"
    return [], "no targets: the run recorded none and its bench file is not here"
