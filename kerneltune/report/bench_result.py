"""A ``kerneltune bench`` result file as the report reads it: its rows and the target verdicts it recorded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltune.files.safe_io import MAX_BENCH_BYTES, BadJson, loads_bounded_json, read_regular_bytes


@dataclass(frozen=True)
class BenchResult:
    data: dict[str, Any]
    targets: list[dict[str, Any]]
    source: str  # where the verdicts come from, for the report's heading


def read_bench_result(path: Path) -> BenchResult:
    """The result at ``path``; ValueError naming the file when it is no bench result, whatever the file is or holds
    (a FIFO, a device, over ``MAX_BENCH_BYTES``, JSON past ``safe_io``'s bounds): the report reads it as data."""
    try:
        data = loads_bounded_json(read_regular_bytes(path, MAX_BENCH_BYTES, "bench result").decode("utf-8"), str(path))
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("it has no rows")
        targets = data.get("targets")
        if targets is not None and not isinstance(targets, list):
            raise ValueError("its targets are not a list")
        if not all(isinstance(item, dict) for item in (*data["rows"], *(targets or ()))):
            raise ValueError("a row or a target is not an object")
    except BadJson as e:
        raise ValueError(f"{path}: not a readable `kerneltune bench` result ({e.why})") from None
    except OSError as e:  # absent, a folder, a FIFO, a device, too big: as the system or safe_io words it
        raise ValueError(f"{path}: not a readable `kerneltune bench` result ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a readable `kerneltune bench` result (not a text file: "
                         f"it is not UTF-8)") from None
    except ValueError as e:
        raise ValueError(f"{path}: not a readable `kerneltune bench` result ({e})") from None
    if targets is None:
        return BenchResult(data, [], "no targets: the run recorded none")
    return BenchResult(data, list(targets), "recorded by the run")
