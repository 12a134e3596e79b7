"""The typed seams of kerneltune: what a kernel, a backend, a runner and a strategy must offer.

This module imports nothing of kerneltune, so kernels, backends and the engine can all depend on
it without depending on each other. A kernel says what it can do beyond the core protocol in
``capabilities``; the engine and the CLI read that set and never probe for a method.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # the worker protocol's request (``wire.py``), named in annotations only
    from kerneltune.seams.wire import Reply, Request


@dataclass(frozen=True)
class CheckResult:
    """Outcome of running a built candidate on fresh inputs against the reference."""

    error: str | None
    rel_error: float | None = None
    # Measured error figures a kernel's accuracy contract is judged on at launch (kept in the journal
    # and the table entry as ``accuracy``); empty for kernels with no such contract.
    accuracy: Mapping[str, float] = MappingProxyType({})
    # Seconds of the check spent computing or loading its references (once per bucket and worker, then
    # memoised): the worker books them as the "reference" phase, apart from the check itself.
    reference_s: float = 0.0


class Capability(StrEnum):
    """What a kernel may offer beyond the core protocol; each one names the protocol it implements."""

    CHECK_SMALL = "check_small"  # SmallCheck: correctness without its hardware (interpret mode, small shapes)
    STATIC_RANK = "static_rank"  # StaticRanking: an offline compile ranks candidates where none can be timed
    EMULATE = "emulate"  # Emulation: the whole launch emulated on the CPU against a float64 model
    INTERPRET = "interpret"  # Interpretation: the compiled program itself run lane by lane on the CPU
    BENCH = "bench"  # Benchmarks: standard shapes and the baselines a user could pick instead
    REPORT_VIEW = "report_view"  # ReportView: a kernel's own section of a bucket in the HTML report
    PROGRAM_DIGEST = "program_digest"  # ProgramDigest: what a config compiles to, blind to the source text
    PORTABLE_BUILD = "portable_build"  # PortableBuild: a build that leaves the process that compiled it
    CHECK_PROGRAMS = "check_programs"  # CheckPrograms: what a check compiles besides the candidate, compiled ahead
    OWN_SPACE = "own_space"  # OwnSpace: the kernel carries its space, so a sweep needs no --space
    VOID_TIMINGS = "void_timings"  # VoidTimings: where its timings say nothing of its speed (an interpreter)


@runtime_checkable
class Kernel(Protocol):
    """What the engine needs of a kernel; everything else stays inside its folder. Runtime-checkable: an import
    path may name anything, and the registry asks ``isinstance(obj, Kernel)`` before the engine uses it."""

    name: str
    backend: str  # the registered backend (or an import path) that discovers its device and times it
    devices: int  # GPUs one launch spans: 1, or a launch group's size
    capabilities: frozenset[Capability]
    tunables: frozenset[str]
    problem_fields: frozenset[str]
    hard_bucket_fields: tuple[str, ...]
    # The value a tunable had before it became one: a journal recorded before a tunable existed
    # still answers, in a replay, for configs at that value.
    config_defaults: Mapping[str, Any]
    # Tunables that some problems of one bucket refuse (a cap's value, say): a table entry keeps the
    # best measured config for each other setting of them.
    gated_params: tuple[str, ...]

    def problem(self, fields: Mapping[str, Any]) -> Any: ...
    def problem_dict(self, problem: Any) -> dict[str, Any]: ...
    def infeasibility(self, problem: Any, config: Mapping[str, Any]) -> str | None: ...
    def heuristic(self, problem: Any) -> dict[str, Any]: ...
    def bucket(self, problem: Any) -> dict[str, Any]: ...
    def source_hash(self) -> str: ...
    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        """None if candidates can be timed on the system these stamps describe, else the hardware needed."""
        ...

    # In worker processes only: these may import the kernel's framework.
    def build(self, problem: Any, config: Mapping[str, Any]) -> Any: ...
    def make_inputs(self, problem: Any, inputs_spec: Mapping[str, Any], seed: int) -> Any: ...
    def check(self, built: Any, problem: Any, inputs: Any) -> CheckResult: ...
    def timed_call(self, built: Any, inputs: Any) -> tuple[Any, tuple[Any, ...]]:
        """What the backend times: a callable and its arguments (or a backend's own handle)."""
        ...
    def flops(self, problem: Any, inputs: Any) -> float: ...
    def release(self, built: Any) -> None:
        """Free what ``build`` holds beyond memory (a launch group's processes); called once per candidate."""
        ...


class SmallCheck(Protocol):
    def check_small(self, problem: Any, config: Mapping[str, Any]) -> CheckResult: ...


class StaticRanking(Protocol):
    def static_rank(self, problem: Any, config: Mapping[str, Any]) -> dict[str, Any]:
        """A ``wire.MeasureReply``'s fields: status, ``score`` (the kernel's modelled µs per call, lower is better:
        the CLI and progress show it as such) and the ``static`` metrics."""
        ...


@dataclass(frozen=True)
class EmulationCheck:
    layout: str
    shape: str
    worst_error: float
    blocks: int
    resumes: int
    error: str | None = None
    tolerance: float = 1e-12
    schedule: str = "fixed"  # the order the blocks ran in: "fixed", or "seed N" (a seeded interleaving)
    # "float64": nothing rounded, worst_error the largest error over the largest magnitude; else the
    # kernel's formats on an arch ("gfx942 8-bit"), worst_error the relative Frobenius error.
    numbers: str = "float64"

    @property
    def ok(self) -> bool:
        return self.error is None and self.worst_error < self.tolerance


class Emulation(Protocol):
    def emulate(self) -> list[EmulationCheck]: ...


class Interpretation(Protocol):
    def interpret(self, interleavings: int | None = None) -> list[EmulationCheck]:
        """The compiled program's checks on the CPU, each arch in ``interleavings`` schedules (the fixed order
        first; None: the kernel's default)."""
        ...

    def interpret_plan(self, interleavings: int | None = None) -> str:
        """What ``interpret`` will hold in memory at its peak, in one line said before it starts; a ValueError (one
        line, exit 3) where this machine has less."""
        ...


class Benchmarks(Protocol):
    baselines: tuple[str, ...]  # every baseline the kernel can be benched against, by name
    bench_columns: tuple[tuple[str, str, str], ...]  # (row key, header, format spec) of the CLI's table

    def bench_shapes(self) -> str:
        """The standard shapes file's name under ``search_spaces/``."""
        ...

    def run_bench(self, shapes: Any, baselines: tuple[str, ...], out: Any,
                  resume: bool = False) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
        """(result path, rows, target verdicts); each row has ``shape``, ``impl`` and ``median_ms``. With
        ``resume``, the day's result file is continued where it was measured on this system and source."""
        ...


class ProgramDigest(Protocol):
    digest_stamps: tuple[str, ...]  # the stamps (framework versions) a digest depends on: compared only if equal

    def program_digest(self, problem: Any, config: Mapping[str, Any], stamps: Mapping[str, Any]) -> str:
        """A digest of the program a launch at ``config`` runs for ``problem`` on the system ``stamps`` describe,
        computed on this host without its GPU: equal digests under two kernel sources mean the same program
        (under the same framework versions), whatever changed in the source's text."""
        ...


class PortableBuild(Protocol):
    """A build as bytes that another process on the same machine loads and runs: compiles then run in
    processes of their own, in parallel, while the timing worker checks and times (a compile that holds
    its interpreter would otherwise stall the timing beside it). The bytes travel from a compile worker to the
    timing worker that started it and are kept in the user's build cache (``build_cache``), never in a journal or
    a table: they hold the compiled program and no pickle, so loading them runs nothing but that program."""

    def export_build(self, built: Any) -> bytes: ...
    def import_build(self, data: bytes) -> Any: ...


class CheckPrograms(Protocol):
    """What checking a problem's candidates compiles besides them (the ranker: its float32 references and the
    no-cap kernel it is measured beside). The engine has a compile worker compile them ahead, on the first
    candidate of the problem handed over to compile, into the user's build cache (``build_cache``), where the
    timing worker's check then loads them instead of compiling them while the GPU waits."""

    def compile_check(self, problem: Any) -> None:
        """Compile what checking any candidate of ``problem`` compiles, kept where its check looks first."""
        ...


class OwnSpace(Protocol):
    def own_space(self) -> tuple[str, Mapping[str, Any]]:
        """(where it is written, for messages; the space's tables: ``kernel``, ``params``, ``constraints``,
        ``buckets``, as a space file holds them)."""
        ...


class VoidTimings(Protocol):
    def void_timings(self, stamps: Mapping[str, Any]) -> str | None:
        """Why times taken on the system these stamps describe say nothing of the kernel's speed (it runs there in
        an interpreter: Triton's, Pallas'), or None where they do. ``verify`` then judges correctness only."""
        ...


class ReportView(Protocol):
    def report_view(self, rows: Any, bucket: str) -> Any:
        """A Plotly figure of one bucket of the report (``rows``: a frame of its candidates), or None. A
        heat map's values are "% slower than the bucket's best"; the report gives it its fixed colour scale,
        layout and size, and embeds it."""
        ...


# ----------------------------------------------------------------------------- backends

TakeBatch = Callable[[int], list[float]]


@runtime_checkable
class Backend(Protocol):
    """What a platform brings: its device, the stamps a table is matched on, its timer and clocks."""

    name: str
    matched_stamps: tuple[str, ...]  # the stamps an entry must share with the running system

    def stamps(self) -> dict[str, Any]:
        """The running system: ``device`` (a model name), ``device_kind`` (the table folder) and the matched stamps."""
        ...

    def ceilings(self) -> dict[str, float]:
        """Measured rates candidates are judged against ({} where the backend measures none)."""
        ...

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        """``take(n)``: n device times of ``fn(*args)`` in milliseconds."""
        ...

    def worker_env(self, devices: str | None) -> dict[str, str]:
        """Environment of a timing worker bound to ``devices`` (a GPU index or a launch group's, None: the
        default): the framework's device-visibility and memory settings."""
        ...

    def prepare_worker(self, compile_cache: str | None) -> None:
        """In a worker, before its first build: the framework's compile cache in ``compile_cache``, if it has one."""
        ...

    def is_sticky(self, error: BaseException) -> bool:
        """Whether ``error`` leaves the device unusable for the next candidate (the worker is then replaced)."""
        ...

    def clocks(self) -> dict[str, Any]:
        """Clock and throttle readings, taken before and after each candidate ({} if none)."""
        ...


# ----------------------------------------------------------------------------- runners and strategies

class Runner(Protocol):
    """Answers the sweep's requests: worker processes on devices, a recorded journal, ..."""

    parallel_measures: int
    compiles_ahead: int  # candidates per route compiling ahead while another is measured (0: none)
    queues_ahead: int  # candidates per route handed over ahead for a strategy that does not learn (a queue)

    def stamps(self) -> dict[str, Any]: ...
    def prefetch(self, req: Request, route: int) -> None:
        """Start compiling a candidate ahead on ``route`` (0 <= route < parallel_measures), where it
        will be measured; a runner that cannot compile ahead does nothing."""
        ...
    def measure(self, req: Request, route: int = 0) -> cf.Future[Reply]: ...
    def request(self, req: Request) -> Reply:
        """Any other request (a small check, a static rank), answered synchronously."""
        ...
    def close(self) -> None: ...


class Strategy(Protocol):
    """Proposes configs of one bucket and learns from what was measured."""

    # Whether a proposal depends on the values observed before it. A sweep proposes a strategy that learns no
    # further ahead than its compile workers take (a proposal made before a result cannot learn from it), one
    # that does not as far as the runner queues (``Runner.queues_ahead``).
    learns: bool

    def propose(self) -> dict[str, Any] | None: ...
    def observe(self, config: Mapping[str, Any], value: float | None) -> None: ...


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy is built from: the bucket's feasible configs (None where the space is searched
    without enumerating it: ``check`` then says why a config is not feasible) and what the journal holds."""

    bucket: str
    params: Mapping[str, list[Any]]
    feasible: list[dict[str, Any]] | None
    check: Callable[[dict[str, Any]], str | None]
    known: Mapping[str, float | None]
    seed: int
    start: Mapping[str, Any] | None
    study_name: str
    storage: Callable[[], Any]  # an Optuna storage, made only by the strategies that need one
    # Configs to measure first, best guess first (the nearest tuned buckets' winners and runner-ups,
    # ``tuning/warm_start.py``); every one of them is feasible for the bucket.
    warm: tuple[dict[str, Any], ...] = ()


StrategyFactory = Callable[[StrategyContext], Strategy]
