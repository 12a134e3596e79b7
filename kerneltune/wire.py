"""What the engine asks a worker process and what it answers: one JSON line each way.

A ``Request`` is built in one place for a candidate (``candidate_request``: the sweep's, verify's and the
compile-ahead's) and checked where it enters the worker (``Request.from_json``); a reply's ``status`` is one of
``Status``, checked where it comes back (``reply_status``). The rest of a reply is the measurement a journal
record keeps (``journal.make_record``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class WireError(ValueError):
    """A request or reply that breaks the protocol."""


class Op(StrEnum):
    STAMPS = "stamps"  # the worker's system stamps and ceilings
    MEASURE = "measure"  # build (or take the compiled-ahead build), check, time
    PREFETCH = "prefetch"  # start compiling a candidate; no answer
    EXPORT = "export"  # a compile worker's job: the build as bytes
    COMPILE_CHECK = "compile_check"  # a compile worker's job: what a problem's check compiles, into the build cache
    STATIC = "static"  # the kernel's offline compile and static ranking
    CHECK_SMALL = "check_small"  # the kernel's small-shape check on the CPU
    PLAYOFF = "playoff"  # a bucket's leaders (``rivals``) timed in interleaved rounds on the same inputs


class Status(StrEnum):
    OK = "ok"
    PRUNED = "pruned"  # checked, and its first timings already slower than the bound
    COMPILE = "compile"
    RUNTIME = "runtime"
    TIMEOUT = "timeout"
    CORRECTNESS = "correctness"
    UNSUPPORTED = "unsupported"
    CONSTRAINT = "constraint"  # a static ranking's refusal: the layout spills or its grid cannot be resident


_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Request:
    op: Op
    kernel: str
    problem: Mapping[str, Any] = _EMPTY
    tiles: Mapping[str, Any] = _EMPTY
    bucket: str = ""
    inputs: Mapping[str, Any] = _EMPTY  # the bucket's input spec, with its timing seed
    seed: int = 0  # the check's inputs
    settings: Mapping[str, Any] = _EMPTY  # ``measure.MeasureSettings`` as a dict
    prune_above_us: float | None = None
    ceilings: tuple[Mapping[str, Any], ...] = field(default=())  # stamps: ceilings measured before
    rivals: tuple[Mapping[str, Any], ...] = field(default=())  # a playoff's configs, ``tiles`` the first

    def as_op(self, op: Op) -> Request:
        return dataclasses.replace(self, op=op)

    def to_json(self) -> dict[str, Any]:
        out = {"op": str(self.op), "kernel": self.kernel, "problem": dict(self.problem), "tiles": dict(self.tiles),
               "bucket": self.bucket, "inputs": dict(self.inputs), "seed": self.seed, "settings": dict(self.settings)}
        if self.prune_above_us is not None:
            out["prune_above_us"] = self.prune_above_us
        if self.ceilings:
            out["ceilings"] = [dict(c) for c in self.ceilings]
        if self.rivals:
            out["rivals"] = [dict(c) for c in self.rivals]
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Request:
        """A request as a worker receives it, every field checked; a WireError names what is wrong."""
        if not isinstance(obj, Mapping):
            raise WireError(f"a request is a JSON object, not {type(obj).__name__}")
        try:
            op = Op(obj.get("op", Op.MEASURE))
        except ValueError:
            raise WireError(f"op {obj.get('op')!r} is not one of {', '.join(Op)}") from None
        for name in ("problem", "tiles", "inputs", "settings"):
            if not isinstance(obj.get(name, {}), Mapping):
                raise WireError(f"{name}: {obj[name]!r} is not an object")
        if not isinstance(obj.get("kernel"), str) or type(obj.get("seed", 0)) is not int:
            raise WireError("kernel must be a string and seed an integer")
        prune = obj.get("prune_above_us")
        if prune is not None and type(prune) not in (int, float):
            raise WireError(f"prune_above_us: {prune!r} is not a number")
        known = obj.get("ceilings") or ()
        ceilings = (known,) if isinstance(known, Mapping) else tuple(c for c in known if isinstance(c, Mapping))
        rivals = obj.get("rivals") or []
        if not isinstance(rivals, list) or not all(isinstance(c, Mapping) for c in rivals):
            raise WireError("rivals: a list of configs is required")
        return cls(op, obj["kernel"], dict(obj.get("problem", {})), dict(obj.get("tiles", {})),
                   str(obj.get("bucket", "")), dict(obj.get("inputs", {})), obj.get("seed", 0),
                   dict(obj.get("settings", {})), None if prune is None else float(prune), ceilings,
                   tuple(dict(c) for c in rivals))


def candidate_request(kernel: str, bucket: str, problem: Mapping[str, Any], tiles: Mapping[str, Any],
                      inputs: Mapping[str, Any], seed: int, settings: Mapping[str, Any],
                      op: Op = Op.MEASURE) -> Request:
    """The request that measures (or statically ranks) one candidate: the only place one is built."""
    return Request(op, kernel, dict(problem), dict(tiles), bucket, dict(inputs), seed, dict(settings))


def reply_status(reply: Mapping[str, Any]) -> Status:
    """The reply's status, checked where it comes back from a worker."""
    try:
        return Status(reply.get("status"))
    except ValueError:
        raise WireError(f"a reply's status {reply.get('status')!r} is not one of {', '.join(Status)}") from None
