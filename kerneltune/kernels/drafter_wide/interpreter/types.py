"""MLIR types as the interpreter stores their values: one NumPy array per SSA value, lanes first."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_INT = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


@dataclass(frozen=True)
class VType:
    """``kind``: int, float, bf16 (stored as its 16 bits), ptr, struct; ``shape``: () or a vector's;
    ``space``: a pointer's address space (1 global, 3 LDS); ``fields``: a struct's field types."""

    kind: str
    bits: int
    dtype: type
    shape: tuple[int, ...] = ()
    space: int = 0
    fields: tuple[VType, ...] = ()

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * (self.bits // 8)



class UnknownType(ValueError):
    pass


def parse_type(text: str) -> VType:
    """The storage of an MLIR type's values (``text``: the type as MLIR prints it)."""
    s = text.strip()
    if m := re.fullmatch(r"vector<([0-9x]+)x([^>]+)>", s):
        base = parse_type(m.group(2))
        return VType(base.kind, base.bits, base.dtype, tuple(int(d) for d in m.group(1).split("x")))
    if m := re.fullmatch(r"i(\d+)", s):
        bits = int(m.group(1))
        if bits not in _INT:
            raise UnknownType(f"integer type {s}")
        return VType("int", max(bits, 8) if bits == 1 else bits, _INT[bits])
    if s == "index":
        return VType("int", 64, np.int64)
    if s in _FLOAT:
        return VType("float", int(s[1:]), _FLOAT[s])
    if s == "bf16":
        return VType("bf16", 16, np.uint16)
    if m := re.fullmatch(r"!llvm\.ptr(?:<(\d+)>)?", s):
        return VType("ptr", 64, np.int64, space=int(m.group(1) or 0))
    if m := re.fullmatch(r"!llvm\.struct<\((.*)\)>", s):
        return VType("struct", 0, object, fields=tuple(parse_type(f) for f in _split(m.group(1))))
    if s == "!gpu.async.token":
        return VType("token", 0, object)
    raise UnknownType(f"type {s}")


def _split(fields: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in fields:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch in "<("
        depth -= ch in ">)"
        cur += ch
    return [f for f in ([*out, cur]) if f.strip()]
