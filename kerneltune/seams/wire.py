"""What the engine asks a worker process and what it answers: one JSON line each way, typed on both sides.

A ``Request`` is built in one place for a candidate (``candidate_request``: the sweep's, verify's and the
compile-ahead's) and checked where it enters the worker (``Request.from_json``); its settings travel as
``MeasureSettings``. Each op has its reply type (``REPLIES``), checked where it comes back
(``Reply.from_json``); a measurement's reply is what a journal record keeps (``journal.make_record``).

Before its reply, a worker may write interim lines (``Progress``): a measurement says ``compiled`` once its
build is in hand, so that the parent bounds the check and timing by the run timeout from then on, and a hang
in the compile by the compile timeout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Self

from kerneltune.seams.json_fields import unknown_or_mistyped
from kerneltune.seams.settings import MeasureSettings


class WireError(ValueError):
    """A request or reply that breaks the protocol."""


class Op(StrEnum):
    STAMPS = "stamps"  # the worker's system stamps and ceilings
    MEASURE = "measure"  # build (or take the compiled-ahead build), check, time
    CHECK = "check"  # build and check as ``measure`` does, without timing (where timings would mean nothing)
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


class Progress(StrEnum):
    """An interim line's event: ``{"progress": "compiled"}`` before a measurement's reply."""

    COMPILED = "compiled"  # the candidate's build is in hand: its check and timing start (the run timeout's clock)


def progress_line(event: Progress) -> dict[str, str]:
    """The interim line that announces ``event``."""
    return {"progress": str(event)}


def progress_of(obj: Any) -> Progress | None:
    """The event an interim line announces, or None where the line is a reply (it has a status)."""
    if not isinstance(obj, Mapping) or "progress" not in obj or "status" in obj:
        return None
    try:
        return Progress(obj["progress"])
    except ValueError:
        raise WireError(f"progress {obj['progress']!r} is not one of {', '.join(Progress)}") from None


_EMPTY: Mapping[str, Any] = MappingProxyType({})
_DEFAULT_SETTINGS = MeasureSettings()


@dataclass(frozen=True)
class Request:
    op: Op
    kernel: str
    problem: Mapping[str, Any] = _EMPTY
    config: Mapping[str, Any] = _EMPTY
    bucket: str = ""
    inputs: Mapping[str, Any] = _EMPTY  # the bucket's input spec, with its timing seed
    seed: int = 0  # the check's inputs
    settings: MeasureSettings = _DEFAULT_SETTINGS
    prune_above_us: float | None = None
    ceilings: tuple[Mapping[str, Any], ...] = field(default=())  # stamps: ceilings measured before
    rivals: tuple[Mapping[str, Any], ...] = field(default=())  # a playoff's configs, ``config`` the first

    def as_op(self, op: Op) -> Request:
        return dataclasses.replace(self, op=op)

    def to_json(self) -> dict[str, Any]:
        out = {"op": str(self.op), "kernel": self.kernel, "problem": dict(self.problem), "config": dict(self.config),
               "bucket": self.bucket, "inputs": dict(self.inputs), "seed": self.seed,
               "settings": self.settings.to_json()}
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
        for name in ("problem", "config", "inputs", "settings"):
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
        try:
            settings = MeasureSettings.from_json(obj.get("settings", {}))
        except (TypeError, ValueError) as e:
            raise WireError(str(e)) from None
        return cls(op, obj["kernel"], dict(obj.get("problem", {})), dict(obj.get("config", {})),
                   str(obj.get("bucket", "")), dict(obj.get("inputs", {})), obj.get("seed", 0),
                   settings, None if prune is None else float(prune), ceilings, tuple(dict(c) for c in rivals))


def candidate_request(kernel: str, bucket: str, problem: Mapping[str, Any], config: Mapping[str, Any],
                      inputs: Mapping[str, Any], seed: int, settings: MeasureSettings,
                      op: Op = Op.MEASURE) -> Request:
    """The request that measures (or statically ranks) one candidate: the only place one is built."""
    return Request(op, kernel, dict(problem), dict(config), bucket, dict(inputs), seed, settings)


@dataclass(frozen=True)
class Reply:
    """A worker's answer: its status and, when it is not ``ok``, why. ``restart``: the worker ends after
    answering (a sticky device error), so the next request starts a fresh one."""

    status: Status
    error: str | None = None
    restart: bool = False

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def to_json(self) -> dict[str, Any]:
        """The fields that say something (a default says nothing), the status as its word."""
        out: dict[str, Any] = {"status": str(self.status)}
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value is not None and value is not f.default and value != f.default:
                out[f.name] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Self:
        """A reply as it comes back from a worker: an object, a status of ``Status``, each field of this reply's
        type (numbers as numbers, texts as texts); names this reply does not have break the protocol."""
        if not isinstance(obj, Mapping):
            raise WireError(f"a reply is a JSON object, not {type(obj).__name__}")
        try:
            status = Status(obj.get("status"))
        except ValueError:
            raise WireError(f"a reply's status {obj.get('status')!r} is not one of {', '.join(Status)}") from None
        if (why := unknown_or_mistyped(cls, obj, skip=("status",))) is not None:
            raise WireError(why if why.startswith("a ") else f"a reply's {why}")
        return cls(**{**obj, "status": status})


@dataclass(frozen=True)
class StampsReply(Reply):
    stamps: Mapping[str, Any] = _EMPTY  # the backend's stamps, with its ceilings


@dataclass(frozen=True)
class BuildReply(Reply):
    """A compile worker's build of one candidate, as bytes for the timing worker that asked for it."""

    build: str = ""  # base64
    compile_s: float = 0.0
    cached: bool = False  # taken from the user's build cache


@dataclass(frozen=True)
class CompiledReply(Reply):
    compile_s: float = 0.0


@dataclass(frozen=True)
class MeasureReply(Reply):
    """One candidate measured (or statically ranked): what its journal record keeps. A replayed journal answers
    with the record's own ``time``, ``kernel_hash`` and ``stamps``."""

    compile_s: float | None = None
    compile_wait_s: float | None = None  # what the timing worker waited for the build (less when compiled ahead)
    phases: Mapping[str, Any] | None = None
    timing: Mapping[str, Any] | None = None  # ``measure.Timing`` as a dict
    tflops: float | None = None
    flops: float | None = None
    rel_error: float | None = None
    accuracy: Mapping[str, Any] | None = None
    static: Mapping[str, Any] | None = None  # a static ranking's metrics
    score: float | None = None  # a static ranking's modelled µs per call
    modelled: Mapping[str, Any] | None = None
    pct_ceiling: float | None = None
    stamps: Mapping[str, Any] | None = None
    kernel_hash: str | None = None
    time: str | None = None

    @property
    def median_us(self) -> float | None:
        return None if self.timing is None else self.timing.get("median_us")

    @property
    def spread(self) -> float | None:
        return None if self.timing is None else self.timing.get("spread")

    @property
    def settled(self) -> bool:
        """Whether its timing met the noise rule before its time cap."""
        return self.timing is None or bool(self.timing.get("converged", True))


@dataclass(frozen=True)
class PlayoffReply(Reply):
    rounds: int = 0
    batch: int = 0
    times: tuple[tuple[float, ...], ...] = ()  # each leader's median per round, in µs

    def __post_init__(self) -> None:
        if not isinstance(self.times, list | tuple) or not all(isinstance(t, list | tuple) for t in self.times):
            raise WireError(f"a playoff's times {self.times!r} are not lists of numbers")
        object.__setattr__(self, "times", tuple(tuple(float(x) for x in t) for t in self.times))


REPLIES: Mapping[Op, type[Reply]] = MappingProxyType({
    Op.STAMPS: StampsReply, Op.MEASURE: MeasureReply, Op.CHECK: MeasureReply, Op.STATIC: MeasureReply,
    Op.CHECK_SMALL: Reply,
    Op.EXPORT: BuildReply, Op.COMPILE_CHECK: CompiledReply, Op.PLAYOFF: PlayoffReply, Op.PREFETCH: Reply})


def failed(op: Op, status: Status, error: str, restart: bool = False) -> Reply:
    """The reply of ``op``'s type that says it failed, and why."""
    return REPLIES[op](status, error, restart)
