"""The two records that outlive a process, typed: a journal line is a ``Record``, a table entry an ``Entry`` (its
runner-ups, rivals and fallbacks each a ``Measured``).

The bytes on disk are the schema and these types their only readers: ``from_json`` checks a JSON object field by
field (``record_defect``, ``entry_problem``: a message naming the field) and keeps the fields this version does not
declare (``extra``: a journal or table of another version keeps them through a rewrite); ``to_json`` gives the
object back, a field left out where it is None unless it is written even so (``ALWAYS``, a ``null`` on disk).
A field's name is its JSON name unless its metadata names another (``config`` is ``tiles`` in a journal line).

Adding a field is one declaration here plus its use (where it is set and where it is read): the journal, the
table's storage, install and the lookup carry it with no other edit (the guide's development page shows it;
``tests/files/test_records.py`` runs that recipe).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

from kerneltune.files.safe_io import MAX_JSON_DEPTH, brief, deeper_than
from kerneltune.seams.wire import Status

EMPTY: Mapping[str, Any] = types.MappingProxyType({})
ALWAYS = {"always": True}  # a field's metadata: written even when None (``null`` on disk), unless read without it
_NOT_JSON = ("extra", "absent")  # the fields that say how the object was read, not what it holds

# How much deeper a journal record's fields sit in a table: table > entries > entry > runner_ups > item > field.
TABLE_LEVELS = 4
# A record's fields become a table entry's, which sits TABLE_LEVELS deeper in its table: a record nested deeper than
# this would make a table past ``MAX_JSON_DEPTH``, which no reader takes (install refused it, and every later sweep
# into that --out tripped on it).
MAX_RECORD_DEPTH = MAX_JSON_DEPTH - TABLE_LEVELS
_STATUSES = frozenset(s.value for s in Status)

# A device kind or kernel name becomes a folder and a file name under a table root, and both may come from a
# file (a journal's stamps, a table's fields): only these names, so that none climbs out of the root.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class RecordError(ValueError):
    """A JSON object that is no record or entry: the message names the field."""


def is_plain_name(value: object) -> bool:
    """Whether ``value`` may name a table's folder or file (``NAME``, and no ``..``)."""
    return isinstance(value, str) and NAME.fullmatch(value) is not None and ".." not in value


def _number(x: Any) -> bool:
    return type(x) in (int, float)


def finite(x: Any) -> bool:
    """A number float arithmetic can take: not NaN, not an infinity, not an integer past a float's range (one of
    4,000 digits is valid JSON, and ``math.isfinite`` of it raises OverflowError)."""
    if not _number(x):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def positive_time(x: Any) -> bool:
    """A measured time: a number, finite and above zero (NaN, infinities, zero and negatives are not)."""
    return finite(x) and x > 0


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a config: sorted JSON, the identity of a candidate in a bucket."""
    return json.dumps(dict(config), sort_keys=True, separators=(",", ":"))


class _Json(Mapping[str, Any]):
    """A frozen dataclass read from and written to one JSON object. It also reads as that object (a read-only
    ``Mapping`` over ``to_json()``), for what takes JSON as it is: a test's assertion, a frame's row. The package's
    own code reads the attributes (``tests/test_architecture.py`` counts string-keyed reads)."""

    extra: Mapping[str, Any]
    absent: frozenset[str]  # the ``ALWAYS`` fields the JSON read lacked: written back without them
    _JSON_NAMES: ClassVar[Mapping[str, str]] = EMPTY  # attribute -> JSON name, where they differ

    @classmethod
    def _json_name(cls, name: str) -> str:
        return cls._JSON_NAMES.get(name, name)

    @classmethod
    def _declared(cls) -> dict[str, str]:
        """JSON name -> attribute, of every declared field but ``extra`` and ``absent``."""
        return _layout(cls).declared

    @classmethod
    def build(cls, obj: Mapping[str, Any]) -> Self:
        """The object's fields as they are (no check: ``from_json`` checks first)."""
        layout = _layout(cls)
        known, extra = {}, {}
        for k, v in obj.items():
            if (name := layout.declared.get(k)) is None:
                extra[k] = v
            else:
                known[name] = _typed(cls, name, v)
        absent = frozenset(name for name, key in layout.always if key not in obj)
        return cls(**known, extra=extra, absent=absent)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        always = _layout(type(self)).always_names
        for name, key in _layout(type(self)).written:
            value = getattr(self, name)
            if value is None and (name not in always or name in self.absent):
                continue
            out[key] = _plain(value)
        out.update(self.extra)
        return out

    @functools.cached_property
    def _view(self) -> dict[str, Any]:
        return self.to_json()

    def __getitem__(self, name: str) -> Any:
        return self._view[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def __eq__(self, other: object) -> bool:
        """Equal to the same record, or to its JSON object."""
        if isinstance(other, _Json):
            return type(self) is type(other) and self._view == other._view
        if isinstance(other, Mapping):
            return self._view == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # it holds dicts

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@dataclass(frozen=True)
class _Layout:
    """A record type's fields as JSON sees them, worked out once per type (a journal is read a line at a time)."""

    declared: dict[str, str]  # JSON name -> attribute
    written: tuple[tuple[str, str], ...]  # (attribute, JSON name), in declaration order
    always: tuple[tuple[str, str], ...]  # the ``ALWAYS`` ones
    always_names: frozenset[str]


@functools.cache
def _layout(cls: type[_Json]) -> _Layout:
    written = tuple((f.name, cls._json_name(f.name)) for f in fields(cls)  # type: ignore[arg-type]
                    if f.name not in _NOT_JSON)
    always = tuple((f.name, cls._json_name(f.name)) for f in fields(cls)  # type: ignore[arg-type]
                   if f.metadata.get("always"))
    return _Layout({key: name for name, key in written}, written, always, frozenset(n for n, _ in always))


def _typed(cls: type, name: str, value: Any) -> Any:
    """A JSON value as the field holds it: a status as ``Status``, a list of measured items as ``Measured``s."""
    if name == "status" and cls is Record:
        return Status(value)
    if name in _MEASURED_LISTS and cls is Entry:
        return tuple(m if isinstance(m, Measured) else Measured.build(m) for m in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, _Json):
        return value.to_json()
    if isinstance(value, Status):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return value if isinstance(value, dict) else dict(value)  # the object itself: JSON as it was read
    return value


# ---------------------------------------------------------------------------------------------- a journal line

_NUMBERS = ("tflops", "flops", "rel_error", "pct_ceiling", "compile_s", "score", "seed")
_TIMING_NUMBERS = ("median_us", "spread", "noise", "samples", "min_us")


def record_defect(rec: Any) -> str | None:
    """What makes a journal line unusable as a record, or None: the fields the sweep, a replay, the table
    writer and the report read, with their types; a time must be positive and finite; a device kind or kernel
    name is a plain name (it names a table's folder and file)."""
    if not isinstance(rec, Mapping):
        return f"a JSON {type(rec).__name__}, not an object"
    for name in ("bucket", "key"):
        if not isinstance(rec.get(name), str):
            return f"field {name!r} is missing or not a string"
    for name in ("status", "kernel", "strategy", "error", "time"):
        if name in rec and rec[name] is not None and not isinstance(rec[name], str):
            return f"field {name!r}: {brief(rec[name])} is not a string"
    for name in ("tiles", "problem", "stamps", "timing", "phases", "accuracy", "inputs"):
        if name in rec and not isinstance(rec[name], Mapping):
            return f"field {name!r} is not an object"
    if any(isinstance(v, Mapping | list) for v in rec.get("tiles", {}).values()):
        return "field 'tiles' holds a value that is not a string, number or bool"
    numbers = [(name, rec[name]) for name in _NUMBERS if rec.get(name) is not None]
    numbers += [(f"timing.{k}", v) for k, v in rec.get("timing", {}).items() if k in _TIMING_NUMBERS]
    numbers += [(f"stamps.{k}", v) for k, v in rec.get("stamps", {}).items() if k.endswith("_ceiling")]
    for name, value in numbers:
        if type(value) not in (int, float):
            return f"field {brief(name)}: {brief(value)} is not a number"
        if type(value) is int and not finite(value):  # a ratio or a mean of it would raise OverflowError
            return f"field {brief(name)}: an integer of {len(str(value))} digits, past a float's range"
    timing = rec.get("timing", {})
    if "median_us" in timing and not positive_time(timing["median_us"]):
        return f"timing.median_us: {brief(timing['median_us'])} is not a positive finite time"
    if rec.get("status") in (Status.OK, Status.PRUNED) and "score" not in rec and "median_us" not in timing:
        return f"status {brief(rec['status'])} without a timing's median_us"
    # What a table entry keeps of a timing: one such record would block its bucket's table.
    if "spread" in timing and not (math.isfinite(timing["spread"]) and timing["spread"] >= 0):
        return f"timing.spread: {brief(timing['spread'])} is not a spread (a finite number, 0 or more)"
    if "samples" in timing and (type(timing["samples"]) is not int or timing["samples"] < 1):
        return f"timing.samples: {brief(timing['samples'])} is not a count of samples"
    kind = rec.get("stamps", {}).get("device_kind")
    if kind is not None and not is_plain_name(kind):
        return f"stamps.device_kind {brief(kind)} is not a plain name"
    if rec.get("status") not in _STATUSES:  # a status of another version is no "done": measured again
        return f"status {brief(rec.get('status'))} is none this kerneltune knows ({', '.join(sorted(_STATUSES))})"
    if deeper_than(dict(rec), MAX_RECORD_DEPTH):
        return f"nested more than {MAX_RECORD_DEPTH} levels (its table entry would pass a table's {MAX_JSON_DEPTH})"
    return None


@dataclass(frozen=True, eq=False)
class Record(_Json):
    """One finished candidate as its journal line holds it: the bucket's fields, the config, what the worker
    answered (``wire.MeasureReply``) and when. Fields another version wrote stay in ``extra``."""

    bucket: str
    key: str  # ``config_key(config)``: the candidate's identity in its bucket
    status: Status
    config: Mapping[str, Any] = field(default=EMPTY, metadata=ALWAYS)  # ``tiles`` on disk
    kernel: str | None = None
    problem: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None  # the bucket's input spec
    stamps: Mapping[str, Any] | None = None
    kernel_hash: str | None = None
    strategy: str | None = None
    seed: int | None = None
    cold_l2: bool | None = None
    trial: int | None = None  # a shared study's trial number
    time: str | None = None
    error: str | None = None
    timing: Mapping[str, Any] | None = None  # ``measure.Timing`` as a dict
    phases: Mapping[str, Any] | None = None
    compile_s: float | None = None
    compile_wait_s: float | None = None
    flops: float | None = None
    tflops: float | None = None
    rel_error: float | None = None
    pct_ceiling: float | None = None
    accuracy: Mapping[str, Any] | None = None
    static: Mapping[str, Any] | None = None  # a static ranking's metrics
    score: float | None = None  # a static ranking's modelled µs per call
    modelled: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = EMPTY
    absent: frozenset[str] = field(default=frozenset(), repr=False)

    _JSON_NAMES: ClassVar[Mapping[str, str]] = types.MappingProxyType({"config": "tiles"})

    @classmethod
    def from_json(cls, obj: Any) -> Record:
        """A journal line's object, checked (``record_defect``); a RecordError names what is wrong."""
        if (why := record_defect(obj)) is not None:
            raise RecordError(why)
        return cls.build(obj)

    @property
    def timed(self) -> Mapping[str, Any]:
        return self.timing or EMPTY

    @property
    def median_us(self) -> float | None:
        return self.timed.get("median_us")

    @property
    def spread(self) -> float | None:
        return self.timed.get("spread")

    @property
    def noise(self) -> float:
        return float(self.timed.get("noise", 0.0))

    @property
    def samples(self) -> int | None:
        return self.timed.get("samples")

    @property
    def settled(self) -> bool:
        """Whether its timing met the noise rule before its time cap (a record of before that was said: yes)."""
        return bool(self.timed.get("converged", True))

    @property
    def value(self) -> float | None:
        """What a strategy minimises: the median time, or the static score of a compile-only sweep."""
        if self.status not in (Status.OK, Status.PRUNED):
            return None
        return self.median_us if self.timing is not None else self.score

    @property
    def stamped(self) -> Mapping[str, Any]:
        return self.stamps or EMPTY

    @property
    def replayed_from(self) -> str | None:
        """The journal a replay answered from, where this record was replayed."""
        return self.stamped.get("replayed_from")

    def pct_of_ceiling(self) -> float | None:
        """Useful TFLOP/s as % of the bf16 matmul ceiling measured on the same GPU (in the stamps)."""
        ceiling = self.stamped.get("bf16_tflops_ceiling")
        return 100.0 * self.tflops / ceiling if self.tflops and ceiling else None


# ---------------------------------------------------------------------------------------------- a table entry

_SCALARS = (str, int, float, bool)
_MEASURED_LISTS = ("runner_ups", "rivals", "fallbacks")


def _scalars(name: str, d: Any) -> str | None:
    if not isinstance(d, Mapping) or not d:
        return f"field {name!r} is missing, empty or not an object"
    for k, v in d.items():
        if type(v) not in _SCALARS:
            return f"{name}.{k}: {brief(v)} is not a string, number or bool"
    return None


def _measured(name: str, items: Any) -> str | None:
    if not isinstance(items, list | tuple):
        return f"field {name!r} is not a list"
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            return f"{name}[{i}] is not an object"
        if (why := _scalars(f"{name}[{i}].config", item.get("config"))) is not None:
            return why
        if not positive_time(item.get("median_us")):
            return f"{name}[{i}].median_us: {brief(item.get('median_us'))} is not a positive finite time"
    return None


def entry_problem(entry: Any) -> str | None:
    """What makes an entry unusable, or None: the schema of what the lookup, a launch and verify read,
    with exact types (a bool is not a number, a string is not a bool, null is nothing)."""
    if not isinstance(entry, Mapping):
        return "not an object"
    for name in ("bucket", "config"):
        if (why := _scalars(name, entry.get(name))) is not None:
            return why
    if "median_us" in entry and not positive_time(entry["median_us"]):
        return f"median_us: {brief(entry['median_us'])} is not a positive finite time"
    if "spread" in entry and not (finite(entry["spread"]) and entry["spread"] >= 0):
        return f"spread: {brief(entry['spread'])} is not a finite number at or above 0"
    if not isinstance(stamps := entry.get("stamps", {}), Mapping):
        return "field 'stamps' is not an object"
    if not isinstance(entry.get("void_timings", ""), str):  # the runtime's log and verify print it
        return f"void_timings: {brief(entry['void_timings'])} is not a string"
    if not isinstance(stamps.get("rekeyed_from", []), list):  # the lookup names its first item: a list, as rekey writes
        return f"stamps.rekeyed_from: {brief(stamps['rekeyed_from'])} is not a list"
    for name in _MEASURED_LISTS:
        if (why := _measured(name, entry.get(name, []))) is not None:
            return why
    for i, rival in enumerate(entry.get("rivals", [])):  # verify prints their margins
        for k in ("margin", "margin_low", "margin_high"):
            if k in rival and not finite(rival[k]):
                return f"rivals[{i}].{k}: {brief(rival[k])} is not a finite number"
    return None


@dataclass(frozen=True, eq=False)
class Measured(_Json):
    """A runner-up's, rival's or fallback's config with what was measured of it (time, and errors where the
    kernel's check reports them: the runtime holds them against a launch's error budget). A rival keeps its margin
    to the winner: its time over the winner's, less one, and ``by`` which measure (``playoff``: the paired ratio with
    its 95% interval; ``medians``: the ratio of the two medians)."""

    config: Mapping[str, Any] = field(metadata=ALWAYS)
    median_us: float = field(metadata=ALWAYS)
    spread: float | None = None
    accuracy: Mapping[str, Any] | None = None
    program_digest: str | None = None  # what ``rekey`` found the config compiles to
    margin: float | None = None
    margin_low: float | None = None
    margin_high: float | None = None
    by: str | None = None
    extra: Mapping[str, Any] = EMPTY
    absent: frozenset[str] = field(default=frozenset(), repr=False)


@dataclass(frozen=True, eq=False)
class Entry(_Json):
    """A bucket's tuned entry: its winner's config, time and stamps, the runner-ups within noise, the nearest
    rivals with their margins, a measured fallback per other gated setting, and how the winner was decided."""

    bucket: Mapping[str, Any] = field(default=EMPTY, metadata=ALWAYS)  # ``kernel.bucket(problem)``: the lookup's key
    config: Mapping[str, Any] = field(default=EMPTY, metadata=ALWAYS)
    stamps: Mapping[str, Any] = field(default=EMPTY, metadata=ALWAYS)
    bucket_name: str | None = None
    problem: Mapping[str, Any] | None = None
    inputs: Mapping[str, Any] | None = None
    median_us: float | None = None
    spread: float | None = None
    samples: int | None = None
    tflops: float | None = field(default=None, metadata=ALWAYS)
    pct_ceiling: float | None = field(default=None, metadata=ALWAYS)
    runner_ups: tuple[Measured, ...] | None = None
    rivals: tuple[Measured, ...] | None = None
    decided_by: str | None = None  # ``playoff`` (paired ratios over interleaved rounds) or ``medians``
    fallbacks: tuple[Measured, ...] | None = None
    candidates_ok: int | None = None
    settled: bool | None = None  # whether the winner's timing met the noise rule before its time cap
    playoff: Mapping[str, Any] | None = None
    accuracy: Mapping[str, Any] | None = None
    program_digest: str | None = None  # what ``rekey`` found the winner compiles to
    # Why its times say nothing of the kernel's speed (it was timed in an interpreter: ``VoidTimings``), or None.
    void_timings: str | None = None
    extra: Mapping[str, Any] = EMPTY
    absent: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def from_json(cls, obj: Any) -> Entry:
        """A table entry's object, checked (``entry_problem``); a RecordError names what is wrong."""
        if isinstance(obj, Entry):
            return obj
        if (why := entry_problem(obj)) is not None:
            raise RecordError(why)
        return cls.build(obj)

    @property
    def name(self) -> str | None:
        return self.bucket_name

    @property
    def stamp_hash(self) -> str | None:
        """The kernel source it was measured (or rekeyed) for."""
        return self.stamps.get("kernel_hash")

    @property
    def replayed_from(self) -> str | None:
        return self.stamps.get("replayed_from")

    @property
    def rekeyed_from(self) -> tuple[str, ...]:
        return tuple(self.stamps.get("rekeyed_from", ()))

    def measured(self) -> tuple[Measured, ...]:
        """Every other config the entry keeps: its runner-ups, rivals and fallbacks."""
        return (*(self.runner_ups or ()), *(self.rivals or ()), *(self.fallbacks or ()))
