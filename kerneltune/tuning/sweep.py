"""One sweep: for each bucket, propose candidates, compile ahead, verify and time, journal, table.

Observers (progress display, logs) get ``on_*`` calls; the sweep itself prints nothing. The sweep's
process waits on the runner's futures and never polls: while a candidate is measured it sleeps.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from filelock import Timeout

from kerneltune.files.paths import SPACES
from kerneltune.files.records import Entry, Record, config_key
from kerneltune.files.trust import SAFE_FOLDERS_ENV, why_untrusted
from kerneltune.seams.limits import RUN_TIMEOUT_S
from kerneltune.seams.measure import MeasureSettings
from kerneltune.seams.protocols import Capability, Kernel, OwnSpace, Runner, StrategyContext
from kerneltune.seams.registry import load_kernel, module_file
from kerneltune.seams.wire import MeasureReply, Op, PlayoffReply, Reply, Request, Status, candidate_request
from kerneltune.tables.locations import table_roots
from kerneltune.tables.stamps import now_stamp

from .compile_ahead import default_compile_workers
from .contenders import held_for, is_contender, load_contenders, table_buckets
from .journal import Journal, make_record
from .phases import BucketPhases
from .playoff import MAX_ROUNDS, Playoff, batch_for, decide, leaders, undecided
from .pruning import EarlyStop, Pruner
from .space import PROVED_CONFIGS, Bucket, Space, SpaceError, load_space, space_from_data
from .strategies import make_strategy
from .table_writer import void_timings, write_bucket_table
from .warm_start import warm_start

FAILURES = (Status.COMPILE, Status.RUNTIME, Status.TIMEOUT, Status.CORRECTNESS, Status.UNSUPPORTED)
FEW_CONTENDERS = 3  # a bucket --contenders holds fewer configs for is said to get no search to speak of


class Observer(Protocol):
    def on_prior(self, bucket: str, lines: list[str]) -> None:
        """Where the bucket's prior knowledge comes from (warm-start tables and entries, contenders), before its
        first candidate."""
        ...
    def on_bucket_start(self, bucket: str, total: int, done: int) -> None: ...
    def on_record(self, bucket: str, record: Record, failures: Counter) -> None: ...
    def on_bucket_end(self, bucket: str, entry: Entry | None) -> None: ...


@dataclass(frozen=True)
class SearchOptions:
    strategy: str = "exhaustive"
    budget: int | None = None  # candidates measured per bucket (default: all feasible)
    seed: int = 0
    # Asked, per candidate, when its timing may stop early (``pruning``; ``NoPruning``: ``--no-early-stop``).
    pruner: Pruner = field(default_factory=EarlyStop)
    contenders: Path | None = None  # a tuned table: time only the configs it holds per bucket (``contenders``)
    warm_start: bool = True  # measure the nearest tuned buckets' winners and runner-ups first (``warm_start``)
    playoff: bool = True  # time the bucket's leaders again head to head before its entry is written (``playoff``)

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"budget: must be at least 1, got {self.budget}")
        if not 0 <= self.seed < 2**32:  # Optuna's samplers and NumPy take seeds in [0, 2**32)
            raise ValueError(f"seed: must be in [0, 2**32), got {self.seed}")
        if self.contenders is not None and self.strategy != "exhaustive":
            raise ValueError(f"contenders: re-measures the table's configs exhaustively; strategy "
                             f"{self.strategy!r} samples the space instead")


@dataclass(frozen=True)
class WorkerOptions:
    gpus: tuple[str, ...] = ()  # default: the first GPUs, as many as one launch spans
    compile_workers: int = field(default_factory=default_compile_workers)  # per timing worker
    run_timeout: float = RUN_TIMEOUT_S

    def __post_init__(self) -> None:
        if bad := [g for g in self.gpus if not g.isdigit()]:
            raise ValueError(f"gpus: {', '.join(map(repr, bad))} is not a GPU index (give e.g. --gpus 0,1)")
        if self.compile_workers < 0:
            raise ValueError(f"compile_workers: must be 0 (compile when timed) or more, got {self.compile_workers}")
        if not (math.isfinite(self.run_timeout) and self.run_timeout > 0):
            raise ValueError(f"run_timeout: must be a positive number of seconds, got {self.run_timeout}")


@dataclass(frozen=True)
class ReplayOptions:
    journal: Path  # one journal, or a folder of per-worker journals
    seconds: float = 0.0  # pause per candidate, as a run would (demos, shared-study tests)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError(f"replay_seconds: must be 0 or more seconds, got {self.seconds}")


@dataclass(frozen=True)
class SharedOptions:
    storage: str  # an Optuna RDB URL: an exhaustive sweep becomes a queue shared by many workers
    study: str | None = None
    heartbeat: float = 10.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.heartbeat) and self.heartbeat > 0):
            raise ValueError(f"heartbeat: must be a positive number of seconds, got {self.heartbeat}")


@dataclass(frozen=True)
class SweepOptions:
    kernel: str
    space_path: Path | None  # None: the kernel's own space, or its default (``load_kernel_space``)
    out: Path
    buckets: tuple[str, ...] = ()
    search: SearchOptions = field(default_factory=SearchOptions)
    workers: WorkerOptions = field(default_factory=WorkerOptions)
    settings: MeasureSettings = field(default_factory=MeasureSettings)
    replay: ReplayOptions | None = None
    shared: SharedOptions | None = None
    compile_only: bool = False  # rank by the kernel's offline compile where it cannot be timed
    resume: bool = True
    journal: Path | None = None
    worker: str | None = None  # this worker's name: its journal is KERNEL-MODE-WORKER.jsonl
    from_ledger: bool = False  # sweep the problems the miss ledger recorded (``ledger_buckets``)
    ledger: Path | None = None  # the ledger file or folder (default: the user's, ``tables.ledger.ledger_folder``)
    top: int | None = None  # with ``from_ledger``: only the most called buckets

    def __post_init__(self) -> None:
        if self.top is not None and self.top < 1:
            raise ValueError(f"top: must be at least 1, got {self.top}")
        if self.top is not None and not self.from_ledger:
            raise ValueError("top: takes the N most called problems the ledger recorded; add --from-ledger")
        if self.ledger is not None and not self.from_ledger and not any("=" in b for b in self.buckets):
            raise ValueError("ledger-path: names the ledger --from-ledger (or --bucket key=value) reads; give one")

    @property
    def journal_path(self) -> Path:
        """``--journal``, else ``OUT/journals/NAME-MODE[-WORKER].jsonl`` after the kernel's own name (two kernels
        given by path never share a journal for sharing an attribute's name)."""
        if self.journal is not None:
            return self.journal
        mode = "replay" if self.replay else "live"
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", load_kernel(self.kernel).name if ":" in self.kernel
                      or self.kernel.endswith(".py") else self.kernel)
        worker = f"-{re.sub(r'[^A-Za-z0-9_.]+', '_', self.worker)}" if self.worker else ""
        return self.out / "journals" / f"{name}-{mode}{worker}.jsonl"


@dataclass
class BucketResult:
    bucket: str
    measured: int = 0
    skipped: int = 0
    pruned_by_constraints: int = 0
    failures: Counter = field(default_factory=Counter)
    first_errors: dict[str, str] = field(default_factory=dict)  # failure kind -> the first such candidate's error
    stopped_early: int = 0  # timed only until its first batch was clearly slower than the best (``--early-stop``)
    remeasured: Counter = field(default_factory=Counter)  # journal records not resumed, by why
    best: Record | None = None
    entry: Entry | None = None
    table: Path | None = None  # the table its entry was written into
    static_only: str | None = None  # ranked by the offline compile: why no timings here (the hardware needed)
    playoff: Playoff | None = None  # the leaders timed again head to head, where they were
    playoff_s: float = 0.0  # its wall on the timing worker
    playoff_note: str | None = None  # why the leaders were not timed again, where they were not
    phases: list[BucketPhases] = field(default_factory=list)  # this run's records' bucket and phases
    timings: list[dict[str, Any]] = field(default_factory=list)  # this run's timings measured to the noise rule
    prior: list[str] = field(default_factory=list)  # where its prior knowledge came from (``Observer.on_prior``)
    void_timings: str | None = None  # why its times say nothing of speed here (an interpreter), where they do not


class HardwareMissing(RuntimeError):
    """The sweep cannot time here; the message names the hardware it needs."""


def refusal(kernel: Kernel, problem: Any, config: dict[str, Any]) -> str | None:
    """Why the kernel refuses ``config`` for ``problem``, or None; a check that raises (a block of 0, a field of the
    wrong type from a space file) is this config's refusal, named, never a traceback that ends the sweep."""
    try:
        return kernel.infeasibility(problem, config)
    except Exception as e:
        return f"{kernel.name}'s feasibility check raised {type(e).__name__}: {e}"


def inputs_seed(bucket: str, purpose: str, seed: int) -> int:
    """Fresh inputs per bucket and sweep seed, reproducible from (bucket, purpose, sweep seed)."""
    return int.from_bytes(hashlib.sha256(f"{bucket}|{purpose}|{seed}".encode()).digest()[:4], "little")


@dataclass(frozen=True)
class BucketFields:
    """What every record of a bucket shares in this sweep (``journal.make_record`` adds each candidate's own)."""

    kernel: str
    bucket: str
    problem: dict[str, Any]
    inputs: dict[str, Any]
    stamps: dict[str, Any]
    kernel_hash: str
    strategy: str
    seed: int
    cold_l2: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CheckedOptions:
    """What a sweep's options name, loaded and checked before anything starts."""

    kernel: Kernel
    space: Space
    buckets: list[Bucket]
    held: dict[str, list[dict[str, Any]]] | None  # bucket name -> the configs --contenders holds for it
    notes: tuple[str, ...] = ()  # where the buckets came from, where not the space (a ledger)


def load_kernel_space(kernel: Kernel, given: Path | None) -> Space:
    """The space a sweep searches: the file given, else the kernel's own (a kernel written with
    ``kerneltune.Kernel``), else ``search_spaces/NAME.toml`` of a registered kernel or a ``NAME.toml`` beside
    the module of a kernel given by path."""
    fields = (set(kernel.tunables), set(kernel.problem_fields), kernel.name)
    if given is not None:
        return load_space(given, *fields)
    if Capability.OWN_SPACE in kernel.capabilities:
        where, data = cast(OwnSpace, kernel).own_space()
        return space_from_data(data, Path(where), *fields)
    tried = [SPACES / f"{kernel.name}.toml"]
    if (module := module_file(kernel)) is not None:
        tried.insert(0, module.parent / f"{kernel.name}.toml")
    for path in tried:
        if path.is_file():
            return load_space(path, *fields)
    raise SpaceError(f"{kernel.name}: no space at {' or '.join(str(p) for p in tried)}; pass --space FILE "
                     f"(the guide's space-file page says what one holds)")


def check_options(opts: SweepOptions) -> CheckedOptions:
    """Every input a sweep reads (kernel, space, buckets, strategy, contenders, replayed journal, --out), checked
    before any worker starts: a bad one is a ValueError (or OSError) naming it."""
    kernel = load_kernel(opts.kernel)
    space = load_kernel_space(kernel, opts.space_path)
    buckets, notes = _buckets(opts, kernel, space)
    if not buckets:
        raise ValueError(f"{space.path}: no buckets to sweep (give --bucket key=value,... or --from-ledger, the "
                         f"problems your traffic met)")
    make_strategy(opts.search.strategy)
    held = None
    if opts.search.contenders is not None:
        table = load_contenders(opts.search.contenders, kernel)
        held = {b.name: held_for(table, opts.search.contenders, kernel, b.name, _bucket_problem(kernel, b))
                for b in buckets}
    if opts.replay is not None and not opts.replay.journal.exists():
        raise ValueError(f"replay: no journal at {opts.replay.journal}")
    if opts.replay is not None and opts.workers.gpus:
        raise ValueError("--gpus: a replay answers from its journal and runs on no GPU; drop --gpus")
    for folder in (opts.out, *opts.out.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(f"--out {opts.out}: {folder} is a file, not a folder")
            break
    if (why := why_untrusted(opts.out)) is not None:  # its journal would be resumed, its tables installed
        raise ValueError(f"--out {opts.out}: {why}; refused (the guide's trust page says why; "
                         f"{SAFE_FOLDERS_ENV} lists folders to trust)")
    runtime = [root for root in table_roots() if (opts.out / "tables").resolve() == root.resolve()]
    if runtime:
        raise ValueError(f"--out {opts.out}: a sweep never writes into the tables the runtime reads "
                         f"({runtime[0]}); give a working folder and install its table with `kerneltune install`")
    return CheckedOptions(kernel, space, buckets, held, tuple(notes))


def _buckets(opts: SweepOptions, kernel: Kernel, space: Space) -> tuple[list[Bucket], list[str]]:
    """The buckets a sweep's options name: the space's (all, or by name), problems given as ``key=value,...``,
    and with ``from_ledger`` the recorded ones; each once, in that order."""
    from kerneltune.tables.ledger import ledger_folder

    from .ledger_buckets import given_bucket, parse_problem, recorded_buckets

    ledger = opts.ledger or ledger_folder()
    given = [parse_problem(b) for b in opts.buckets if "=" in b]
    buckets = [space.bucket(b) for b in opts.buckets if "=" not in b]
    notes = []
    if opts.from_ledger:
        found, note = recorded_buckets(kernel, ledger, space, opts.top, given or None)
        buckets += found
        notes.append(note)
    else:
        for fields in given:
            found, note = given_bucket(kernel, fields, ledger, space)
            buckets += found
            notes += [note] if note else []
        if not opts.buckets:
            buckets = list(space.buckets)
            if opts.search.contenders is not None:  # and the table's buckets beyond the space's (a ledger's)
                held, left = table_buckets(opts.search.contenders, kernel, space)
                buckets += held
                notes += left
    unique = {b.name: b for b in reversed(buckets)}  # the first of a name stays
    return [b for b in buckets if unique[b.name] is b], notes


def run_sweep(opts: SweepOptions, observer: Observer | None = None,
              runner_factory: Callable[[SweepOptions, Kernel], Runner] | None = None,
              checked: CheckedOptions | None = None) -> list[BucketResult]:
    """``checked``: ``check_options(opts)``, where the caller has it already."""
    checked = checked or check_options(opts)
    kernel, space, buckets, held = checked.kernel, checked.space, checked.buckets, checked.held
    journal = Journal(opts.journal_path)
    writer = journal.writer_lock()
    try:
        writer.acquire()
        if not opts.resume:
            writer.start_afresh()  # the old journal set aside, a new one in its place locked before it is there
    except Timeout as e:
        writer.release()
        raise ValueError(f"{e.lock_file}: another sweep is writing this journal; give this one its own "
                         f"(--journal, --worker or --out)") from None
    try:
        started = time.perf_counter()
        runner = (runner_factory or default_runner)(opts, kernel)
        try:
            _compile_first(opts, kernel, runner, buckets[0])
            stamps = runner.stamps()
            static = _static_mode(opts, kernel, stamps)
            sweep = _Sweep(opts, kernel, space, journal, runner, stamps, observer, static, held, started)
            return [sweep.bucket(b) for b in buckets]
        finally:
            runner.close()
    finally:
        writer.release()


def _bucket_problem(kernel: Kernel, bucket: Bucket) -> Any:
    try:
        return kernel.problem(bucket.problem)
    except (TypeError, ValueError) as e:
        raise SpaceError(f"{bucket.where}: bucket {bucket.name!r}: problem: {e}") from None


def _compile_first(opts: SweepOptions, kernel: Kernel, runner: Runner, bucket: Bucket) -> None:
    """Start compiling the first bucket's heuristic config before the worker answers its stamps: the
    worker's start and its ceilings' measurement then overlap the first compile, which every strategy
    asks for first (the heuristic leads the warm start)."""
    if opts.replay is not None or opts.compile_only or opts.search.contenders is not None or not runner.compiles_ahead:
        return
    try:
        problem = kernel.problem(bucket.problem)
        config = kernel.heuristic(problem)
    except (TypeError, ValueError):
        return  # a bad bucket is reported, naming it, where the bucket is swept
    if refusal(kernel, problem, config) is None:
        runner.prefetch(candidate_request(opts.kernel, bucket.name, kernel.problem_dict(problem), config, {}, 0,
                                          opts.settings),
                        0)


def _static_mode(opts: SweepOptions, kernel: Kernel, stamps: dict[str, Any]) -> str | None:
    """The hardware timings need, when candidates are ranked by the kernel's offline compile instead."""
    if opts.replay is not None:
        return None
    can_rank = Capability.STATIC_RANK in kernel.capabilities
    if opts.compile_only and not can_rank:
        raise ValueError(f"compile_only: {kernel.name} has no offline compile to rank by")
    need = kernel.supported_on(stamps)
    if need is not None and not opts.compile_only:
        hint = "; --compile-only ranks the candidates by their offline compile" if can_rank else ""
        raise HardwareMissing(f"timing {kernel.name} needs {need}{hint}")
    return (need or "no device (--compile-only)") if opts.compile_only else None


def default_runner(opts: SweepOptions, kernel: Kernel) -> Runner:
    if opts.replay is not None:
        from .replay import ReplayRunner

        return ReplayRunner(opts.replay.journal, opts.replay.seconds, kernel.config_defaults, kernel.name)
    from .runners import LiveRunner, device_groups

    w = opts.workers
    gpus = w.gpus or tuple(str(i) for i in range(kernel.devices))
    return LiveRunner(opts.kernel, device_groups(gpus, kernel.devices), w.compile_workers, opts.out / "logs",
                      opts.out / "compile-cache", w.run_timeout, opts.out / "references")


class _Sweep:
    """The state one sweep shares across its buckets."""

    def __init__(self, opts: SweepOptions, kernel: Kernel, space: Space, journal: Journal, runner: Runner,
                 stamps: dict[str, Any], observer: Observer | None, static: str | None,
                 held: dict[str, list[dict[str, Any]]] | None = None, started: float | None = None):
        self.opts, self.kernel, self.space, self.journal, self.runner = opts, kernel, space, journal, runner
        self.stamps, self.observer, self.static, self.held = stamps, observer, static, held
        self.started = time.perf_counter() if started is None else started
        self._mark = self.started  # when the last record's write began: each record's wall runs from there
        self._journal_s = 0.0  # the last record's write, booked in the next record

    def request(self, bucket: Bucket, fields: dict[str, Any], config: dict[str, Any]) -> Request:
        """A worker request for one candidate. Every candidate of a bucket is checked and timed on the same
        inputs, fresh per bucket and sweep seed: a worker computes the bucket's references (and the ranker's
        no-cap twin) once, not once per candidate (most of a D=128 candidate's 26 s,
        results/ranker_attention/2026-12-02-h200-run-p/), and the candidates' error figures compare like with
        like. `verify` checks the winners on other inputs."""
        seed = self.opts.search.seed
        return candidate_request(self.opts.kernel, bucket.name, fields, config,
                                 {**bucket.bounds, "timing_seed": inputs_seed(bucket.name, "timing inputs", seed)},
                                 inputs_seed(bucket.name, "check inputs", seed), self.opts.settings,
                                 Op.STATIC if self.static else Op.MEASURE)

    def bucket(self, bucket: Bucket) -> BucketResult:
        """``static``: no device to time on; candidates are compiled and ranked by the kernel's static
        metrics, and no table is written."""
        kernel = self.kernel
        problem = _bucket_problem(kernel, bucket)
        fields = kernel.problem_dict(problem)
        result = BucketResult(bucket.name, static_only=self.static,
                              void_timings=None if self.static else void_timings(kernel, self.stamps))
        base = BucketFields(kernel.name, bucket.name, fields, bucket.bounds, self.stamps, kernel.source_hash(),
                            self.opts.search.strategy, self.opts.search.seed, self.opts.settings.cold_l2)
        done = self._resumable(bucket, base, result)
        search = self.opts.search
        held = None if self.held is None else self.held[bucket.name]
        feasible: list[dict[str, Any]] | None = None
        if search.strategy == "exhaustive" or search.budget is None:  # else sampled without enumerating
            if (size := self.space.size) > PROVED_CONFIGS and held is None:
                raise ValueError(f"{self.space.path}: bucket {bucket.name!r}: the space holds {size:,} configs; a "
                                 f"sweep enumerates at most {PROVED_CONFIGS:,} (--strategy tpe --budget N searches "
                                 f"it without enumerating)")
            feasible = []
            allowed = 0  # configs the space's constraints let through: the rest are counted as refused
            for config in self.space.configs(fields):
                allowed += 1
                if held is not None and not is_contender(config, held):
                    continue
                key = config_key(config)
                why = refusal(kernel, problem, config)
                if why is None:
                    feasible.append(config)
                    continue
                result.pruned_by_constraints += 1
                if key not in done:
                    rec = Record(**base.to_json(), key=key, config=config, status=Status.CONSTRAINT, error=why,
                                 time=now_stamp())
                    self.journal.append(rec)
                    done[key] = rec
            if not feasible and held is not None:
                raise ValueError(f"contenders {search.contenders}: none of the {len(held)} configs it holds for "
                                 f"bucket {bucket.name!r} is a feasible config of {self.space.path}")
            if not feasible:
                whys = Counter(r.error for r in done.values() if r.status == Status.CONSTRAINT)
                commonest = f"; the commonest refusal: {whys.most_common(1)[0][0]}" if whys else ""
                raise ValueError(f"{self.space.path}: bucket {bucket.name!r}: no feasible config (every config "
                                 f"breaks a constraint of the space or is refused by the kernel{commonest})")
            if held is None:
                result.pruned_by_constraints += size - allowed
            else:
                result.prior.append(self._contenders_line(bucket, len(held), len(feasible), allowed))
        queued = self.opts.shared is not None and search.strategy == "exhaustive"  # a queue shared by workers
        if queued:
            self._shared(bucket, base, feasible, result)
        else:
            self._local(bucket, base, feasible, done, result)
        if not self.static:
            if queued:
                from .shared_study import merged_records

                records = merged_records(self.journal.path.parent, kernel.name, bucket.name)
            else:
                records = list(self.journal.records())
            if not queued:
                self._playoff(bucket, base, records, result)
            try:
                written = write_bucket_table(self.opts.out, kernel, bucket.name, records,
                                             self.opts.settings.rel_noise, result.playoff)
            except OSError as e:
                raise OSError(e.errno, f"{e.strerror}; the table of bucket {bucket.name!r} was not written, the "
                                       f"journal {self.journal.path} keeps every measurement and a rerun with a "
                                       f"writable --out resumes from it", e.filename) from None
            if written is not None:
                result.entry, result.table = written.entry, written.table
        if self.observer:
            self.observer.on_bucket_end(bucket.name, result.entry)
        return result

    def _contenders_line(self, bucket: Bucket, held: int, feasible: int, allowed: int) -> str:
        """What --contenders gave this bucket, and what a full sweep would time: a table with one config per bucket
        once re-measured only the old winner and wrote a table, with no word that no search happened."""
        given = (f"{bucket.name}: --contenders {self.opts.search.contenders} holds {held} config"
                 f"{'s' * (held != 1)} for it ({feasible} feasible here), and only those are timed")
        if held < FEW_CONTENDERS:
            return (f"{given}: fewer than {FEW_CONTENDERS}, so this is a re-measure, not a search; a full sweep "
                    f"(without --contenders) times up to {allowed} configs the space allows")
        return f"{given}; a full sweep times up to {allowed}"

    def _playoff(self, bucket: Bucket, base: BucketFields, records: list[Record],
                 result: BucketResult) -> None:
        """The bucket's leaders (``playoff.leaders``, of this source's records) timed again in interleaved rounds
        on the timing worker; the decision in ``result.playoff``, or why there was none in ``playoff_note``."""
        if self.opts.replay is not None or not self.opts.search.playoff:
            return
        latest = {r.key: r for r in records if r.bucket == bucket.name and r.kernel == self.kernel.name
                  and r.kernel_hash == base.kernel_hash}
        top = leaders(list(latest.values()))
        if not top:
            return
        settings = dataclasses.replace(self.opts.settings, batch=batch_for(top[0].median_us))
        req = dataclasses.replace(self.request(bucket, base.problem, top[0].config), op=Op.PLAYOFF,
                                  settings=settings, rivals=tuple(r.config for r in top))
        started = time.perf_counter()
        rows: list[list[float]] = [[] for _ in top]
        while True:  # ROUNDS at a time while a leader is undecided (``playoff.undecided``), MAX_ROUNDS at most
            reply = self.runner.request(req)
            times = reply.times if isinstance(reply, PlayoffReply) else ()
            if not reply.ok or len(times) != len(top):
                result.playoff_s = time.perf_counter() - started
                result.playoff_note = f"{bucket.name}: leaders not timed again ({reply.error or reply.status})"
                return
            for row, t in zip(rows, times, strict=True):
                row.extend(t)
            try:
                decided = decide({r.key: row for r, row in zip(top, rows, strict=True)}, settings.batch)
            except ValueError as e:
                result.playoff_note = f"{bucket.name}: {e}"
                return
            if len(rows[0]) >= MAX_ROUNDS or not undecided(decided, 2 * settings.rel_noise):
                break
        result.playoff_s = time.perf_counter() - started
        # top[0]: the fastest sequential median, kept unless another leader beats it beyond doubt
        result.playoff = dataclasses.replace(decided.kept_for(top[0].key), seconds=result.playoff_s)

    def _resumable(self, bucket: Bucket, base: BucketFields, result: BucketResult) -> dict[str, Record]:
        """The journal's records of this bucket that a resumed sweep may keep: measured under this kernel source,
        on this bucket's problem and inputs, with the same cold-L2 setting, and none stopped early where this sweep
        times every candidate fully. The others are measured again (the journal keeps both) and counted, by why, in
        ``result.remeasured``."""
        done = {}
        for (b, key), rec in self.journal.done().items():
            if b != bucket.name:
                continue
            why = self._not_resumed(rec, base)
            if why is None:
                done[key] = rec
            elif rec.status != Status.CONSTRAINT:
                result.remeasured[why] += 1
        return done

    def _not_resumed(self, rec: Record, base: BucketFields) -> str | None:
        """Why a journal record does not stand for this sweep's measurement of its config, or None."""
        if rec.kernel_hash != base.kernel_hash and self.opts.replay is None:
            return "another kernel source"
        if (rec.problem, rec.inputs if rec.inputs is not None else {}) != (base.problem, base.inputs):
            return "another problem or inputs"
        if bool(rec.cold_l2) != base.cold_l2:
            return "another cold-L2 setting"
        if rec.status == Status.PRUNED and not self.opts.search.pruner.stops_early:
            return "a candidate stopped early, now timed fully (--no-early-stop)"
        return None

    def _strategy(self, bucket: Bucket, problem: Any, feasible: list[dict[str, Any]] | None,
                  done: dict[str, Record], result: BucketResult) -> Any:
        heuristic = self.kernel.heuristic(problem)
        fields = self.kernel.problem_dict(problem)

        def check(config: dict[str, Any]) -> str | None:
            if not self.space.allows(config, fields):
                return "excluded by a constraint of the space"
            return refusal(self.kernel, problem, config)

        warm: tuple[dict[str, Any], ...] = ()
        if self.opts.search.warm_start and self.held is None:
            found = warm_start(self.kernel, problem, str(self.stamps.get("device_kind", "")), self.opts.out,
                               self.space.params, check)
            warm = found.configs
            if found.sources:
                result.prior.append(f"{bucket.name}: warm start from {len(found.sources)} tuned entr"
                                    f"{'ies' if len(found.sources) > 1 else 'y'}, measured first: "
                                    f"{'; '.join(s.text() for s in found.sources)} (--no-warm-start: an independent "
                                    f"sweep)")
        ctx = StrategyContext(
            bucket=bucket.name, params=self.space.params, feasible=feasible, check=check,
            known={k: r.value for k, r in done.items()}, seed=self.opts.search.seed,
            start={n: heuristic.get(n, values[0]) for n, values in self.space.params.items()},
            study_name=f"{self.kernel.name}:{bucket.name}:{self.opts.search.strategy}:{self.opts.search.seed}",
            storage=self._optuna_storage, warm=warm)
        return make_strategy(self.opts.search.strategy)(ctx)

    def _optuna_storage(self) -> Any:
        import optuna

        from .optuna_log import follow_kerneltune_logging, usable_study_log

        if self.opts.shared is not None:
            from .shared_study import make_storage

            return make_storage(self.opts.shared.storage, self.opts.shared.heartbeat)  # sets the log level too
        follow_kerneltune_logging()
        if self.opts.replay is not None:
            # A replay answers from recorded journals in seconds and is simply run again if killed; the file
            # storage's fsync and lock per trial would be half of its time.
            return optuna.storages.InMemoryStorage()
        path = self.journal.path.with_suffix(".optuna.log")
        # Only the sweep holding the journal's writer lock uses this study log, so a lock file found here was
        # left by a sweep killed while it wrote: without this, the resumed sweep would wait out Optuna's
        # 30 s grace period before taking the lock over.
        Path(f"{path}.lock").unlink(missing_ok=True)
        usable_study_log(path)
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))

    def _local(self, bucket: Bucket, base: BucketFields, feasible: list[dict[str, Any]] | None,
               done: dict[str, Record], result: BucketResult) -> None:
        """Propose, compile ahead and measure on every route, one candidate in flight per route."""
        strategy = self._strategy(bucket, self.kernel.problem(bucket.problem), feasible, done, result)
        ok = [r.value for r in done.values() if r.status == Status.OK]
        best = min((v for v in ok if v is not None), default=None)
        search = self.opts.search
        if feasible is not None:
            budget = search.budget if search.budget is not None else len(feasible)
            already = sum(1 for c in feasible if config_key(c) in done)
            total = min(budget, len(feasible))
        else:  # a budgeted search: every candidate the journal holds counts against the budget
            assert search.budget is not None
            budget = total = search.budget
            already = sum(1 for r in done.values() if r.status != Status.CONSTRAINT)
        result.skipped = already
        if self.observer:
            if result.prior:
                self.observer.on_prior(bucket.name, result.prior)
            self.observer.on_bucket_start(bucket.name, total, min(already, budget))
        remaining = max(budget - already, 0)
        routes = self.runner.parallel_measures
        # One candidate measuring per route and as many compiling ahead as the runner's compile workers take, or
        # for a strategy that learns nothing from a result, as many as the runner queues (limits.COMPILE_QUEUE).
        ahead = self.runner.compiles_ahead if strategy.learns else self.runner.queues_ahead
        in_flight = routes * (1 + ahead)
        waiting: list[tuple[dict[str, Any], int, float]] = []  # proposed and compiling ahead, not yet measured
        busy: dict[int, tuple[cf.Future[Reply], dict[str, Any], float]] = {}
        exhausted = False
        self._mark = max(self._mark, time.perf_counter())  # the bucket's enumeration is its first record's wall

        def request(config: dict[str, Any]) -> Request:
            req = self.request(bucket, base.problem, config)
            if not self.static and (bound := self.opts.search.pruner.bound_us(best)) is not None:
                req = dataclasses.replace(req, prune_above_us=bound)
            return req

        while True:
            while not exhausted and remaining > 0 and len(waiting) + len(busy) < in_flight:
                asked = time.perf_counter()
                config = strategy.propose()
                ask_s = time.perf_counter() - asked
                if config is None:
                    exhausted = True
                    break
                remaining -= 1
                load = Counter(r for _, r, _ in waiting) + Counter(busy)
                route = min(range(routes), key=lambda r: load[r])
                self.runner.prefetch(request(config), route)
                waiting.append((config, route, ask_s))
            for item in list(waiting):
                config, route, ask_s = item
                if route not in busy:
                    busy[route] = (self.runner.measure(request(config), route), config, ask_s)
                    waiting.remove(item)
            if not busy:
                return
            finished, _ = cf.wait([f for f, _, _ in busy.values()], return_when=cf.FIRST_COMPLETED)
            for route, (fut, config, ask_s) in list(busy.items()):
                if fut in finished:
                    del busy[route]
                    rec = self._finish(base, config, fut.result(), result, strategy=strategy, ask_s=ask_s)
                    v = rec.value if rec.status == Status.OK else None
                    if v is not None and (best is None or v < best):
                        best = v
                        result.best = rec

    def _shared(self, bucket: Bucket, base: BucketFields, feasible: list[dict[str, Any]],
                result: BucketResult) -> None:
        """This worker's share of an exhaustive sweep queued in a shared study."""
        from .shared_study import QueueWorker, make_storage, prepare_queue, study_name

        assert self.opts.shared is not None
        shared = self.opts.shared
        storage = make_storage(shared.storage, shared.heartbeat)
        study = prepare_queue(storage, study_name(shared.study or self.kernel.name, bucket.name), self.space,
                              feasible)
        if self.observer:
            if result.prior:
                self.observer.on_prior(bucket.name, result.prior)
            self.observer.on_bucket_start(bucket.name, len(feasible), 0)
        QueueWorker(study, storage, self.space.params, self.runner, shared.heartbeat).run(
            lambda config: self.request(bucket, base.problem, config),
            lambda config, reply, trial: self._finish(base, config, reply, result, trial=trial))

    def _finish(self, base: BucketFields, config: dict[str, Any], reply: Reply, result: BucketResult,
                strategy: Any = None, ask_s: float | None = None, **extra: Any) -> Record:
        """Journal one candidate with its phases (``phases.py``), after telling the strategy: a kill between
        the two costs one re-measured candidate on resume, never a record the strategy was not told."""
        now = time.perf_counter()
        engine = {"journal_s": self._journal_s, "wall_s": now - self._mark, "since_start_s": now - self.started}
        if ask_s is not None:
            engine["ask_s"] = ask_s
        measured = reply.phases if isinstance(reply, MeasureReply) else None
        phases = {**(measured or {}), **{k: round(v, 6) for k, v in engine.items()}}
        rec = make_record(base.to_json(), config, {**reply.to_json(), "phases": phases}, **extra)
        if strategy is not None:
            told = time.perf_counter()
            try:
                strategy.observe(config, rec.value)
            except OSError as e:  # the sampler's study log (a full disk): named, the measurement journaled first
                self.journal.append(rec)
                log = e.filename or self.journal.path.with_suffix(".optuna.log")
                raise OSError(e.errno, f"{e.strerror or e}; the study log could not be written; the journal "
                                       f"{self.journal.path} keeps every measurement, this one included", str(log)
                              ) from None
            rec = rec.replace(phases={**phases, "tell_s": round(time.perf_counter() - told, 6)})
        self._mark = time.perf_counter()
        self.journal.append(rec)
        self._journal_s = time.perf_counter() - self._mark
        result.phases.append(BucketPhases(rec.bucket, rec.phases or {}))
        result.measured += 1
        if rec.status in FAILURES:
            result.failures[rec.status] += 1
            result.first_errors.setdefault(rec.status, f"{config_key(config)}: {rec.error or '?'}")
        elif rec.status == Status.PRUNED:
            result.stopped_early += 1
            if rec.timing is not None:  # counted in the noise line: its median is one of the sweep's
                result.timings.append({**rec.timing, "stopped_early": True})
        elif rec.status == Status.OK and rec.timing is not None:
            result.timings.append(rec.timing)
        if self.observer:
            self.observer.on_record(result.bucket, rec, result.failures)
        return rec
