"""Re-check a tuned table on this machine: stamps, correctness on fresh inputs, and time.

Each entry's fallbacks are checked like its winner: a launch whose problem refuses the
winner runs them.

"Slower" is judged within this run, as the sweep's playoff judges its leaders: the winner, its recorded rivals (the
next best configs of its bucket, else its runner-ups) and the heuristic are checked, then timed in interleaved rounds
on the same inputs (``playoff.py``), and each rival's per-round ratio of the winner's time to its own gives a 95%
interval. A winner is slower when a rival's interval lies wholly above 1 + ``2 × --rel-noise``; undecided after
``PAIRED_ROUNDS`` rounds, its speed is unsettled. Its drift from the recorded time, measured on another GPU or day,
is a warning.

Verdicts: "ok" (correct, and not slower than any rival timed beside it; "a tie" where a rival ran faster within
the noise), "slower", "stale", a failed check's status, and "unsettled": correct, but whether a rival beats it is
still in doubt after the rounds, so the speed is not judged either way.

Where this machine's times say nothing of the kernel's speed (it runs in an interpreter on the CPU:
``VoidTimings``), verify checks correctness only and says once why speed was not judged; ``require_timing``
times and judges it anyway.

Exit codes: 0 everything holds; 1 a correctness failure, a winner slower than a rival timed beside it,
or a stale kernel source; 2 the timing needs hardware this machine lacks, or its times here mean nothing (what
could be checked here was, and passed); 3 the table is missing, unreadable or lacks a bucket asked for; 4 correct,
but some entry's speed unsettled; 130 interrupted (the verdicts reached are kept, the rest reported as not checked).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kerneltune.files.records import Entry
from kerneltune.seams.limits import REMEASURE_MAX_SECONDS, RUN_TIMEOUT_S
from kerneltune.seams.measure import MeasureSettings
from kerneltune.seams.protocols import Capability, Kernel, Runner, VoidTimings
from kerneltune.seams.registry import load_kernel
from kerneltune.seams.wire import MeasureReply, Op, PlayoffReply, Reply, Request, candidate_request
from kerneltune.tables.locations import shipped_tables_dir, table_roots
from kerneltune.tables.stamps import mismatches
from kerneltune.tables.store import TableError, read_table
from kerneltune.tables.store import table_path as stored_table_path

from .compile_ahead import default_compile_workers
from .phases import BucketPhases
from .playoff import ROUNDS, batch_for, median_interval
from .runners import LiveRunner, device_groups
from .sweep import refusal

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN, EXIT_BAD_INPUT = 0, 1, 2, 3
EXIT_UNSETTLED = 4  # correct, but the speed could not be judged: the timings did not settle
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM (a CI job's timeout) before every item was checked
NOT_CHECKED_INTERRUPTED = "not checked: verify was interrupted before this item"
RIVALS_TIMED = 3  # the entry's rivals (else runner-ups) timed beside it, besides the heuristic
PAIRED_ROUNDS = 4 * ROUNDS  # interleaved rounds at most: 10 at a time until every rival is decided
HEURISTIC = "the heuristic"  # the rival's name in verdicts and ``rivals_us``
VERIFY_SEED = 11
# The spread of one config's median across healthy H200s and days: the same shipped entries measured
# 0.93-1.02x of their recorded times on other machines and days
# (1371b475c129:results/ranker_attention/2026-11-30-h200-run-i/).
DRIFT_SPREAD = 0.04


@dataclass
class EntryReport:
    bucket: str
    config: dict[str, Any]
    stamps: list[str] = field(default_factory=list)
    correctness: str = "not checked"
    recorded_us: float | None = None
    now_us: float | None = None
    heuristic_us: float | None = None
    heuristic_is_tuned: bool = False  # the heuristic already picks the tuned config: one timing serves both
    verdict: str = "ok"
    failed: bool = False
    unsettled: bool = False  # correct, but its timing or a close rival's did not settle: its speed not judged
    rivals_us: dict[str, float] = field(default_factory=dict)  # rivals and heuristic timed beside it
    # Each rival's per-round ratio of the item's time to its own, (low, median, high): a 95% interval over
    # ``rounds`` interleaved rounds (above 1: the item slower).
    paired: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    rounds: int = 0
    speed_judged: bool = True  # False: correctness only, its times here meaning nothing (``void_timings``)
    checked: bool = True  # False: the run was interrupted before this item


@dataclass
class VerifyReport:
    table: Path
    entries: list[EntryReport]
    exit_code: int
    notes: list[str]
    timing_absent: str | None = None  # why timing could not be checked here (the hardware it needs)
    phases: list[BucketPhases] = field(default_factory=list)  # each measurement's bucket and phases

    @property
    def interrupted(self) -> bool:
        return self.exit_code == EXIT_INTERRUPTED


class VerifyRefused(RuntimeError):
    """verify cannot start, in one line: no table to check (``EXIT_BAD_INPUT``) or no hardware to check it
    on (``EXIT_CANNOT_RUN``)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def runtime_tables(name: str, kind: str, hardware_here: bool) -> list[Path]:
    """The files the runtime reads for this device kind (the user's, then the shipped one); where the
    kernel's hardware is absent, every shipped table instead, checked as far as this machine can."""
    found = [p for p in (stored_table_path(root, kind, name) for root in table_roots()) if p.is_file()]
    if not found and not hardware_here:
        found = sorted(shipped_tables_dir().glob(f"*/{name}.json"))
    if not found:
        where = " or ".join(str(stored_table_path(root, kind, name)) for root in table_roots())
        raise VerifyRefused(f"no tuned table for {name} on {kind} at {where}", EXIT_BAD_INPUT)
    return found


@dataclass
class VerifyRun:
    tables: list[Path]  # what was to be checked, in order
    reports: list[VerifyReport]  # one per table checked (fewer where interrupted)


def verify_tables(kernel_name: str, table: Path | None, work_dir: Path,
                  on_entry: Callable[[EntryReport], None] | None = None, buckets: tuple[str, ...] = (),
                  runner_factory: Callable[[str, Kernel, Path], Runner] | None = None,
                  require_timing: bool = False) -> VerifyRun:
    """``kerneltune verify``: ``table``, or the tables the runtime reads on the device the timing worker
    reports (the worker, not this process, initialises the GPU framework), each checked by ``verify_table``
    on that one worker. Raises ``VerifyRefused`` when there is no table, or no hardware and no small check."""
    if table is not None:  # read and judged before any worker starts
        return VerifyRun([table], [verify_table(kernel_name, table, work_dir, on_entry=on_entry, buckets=buckets,
                                                runner_factory=runner_factory, require_timing=require_timing)])
    kernel = load_kernel(kernel_name)
    for path in _tables_of(kernel.name):
        with contextlib.suppress(TableError, OSError, ValueError):
            if (read := read_table(path)) is not None and _seed_ceilings(read, work_dir / "logs"):
                break
    runner = (runner_factory or _live_runner)(kernel_name, kernel, work_dir)
    try:
        stamps = runner.stamps()
        need = kernel.supported_on(stamps)
        if need is not None and Capability.CHECK_SMALL not in kernel.capabilities:
            cpu = [f"`--{c}`" for c in ("emulate", "interpret") if Capability(c) in kernel.capabilities]
            hint = f" ({' or '.join(cpu)} checks the launch on the CPU)" if cpu else ""
            raise VerifyRefused(f"verify {kernel.name}: needs {need}; this machine cannot run it{hint}",
                                EXIT_CANNOT_RUN)
        tables = runtime_tables(kernel.name, str(stamps["device_kind"]), need is None)
        reports: list[VerifyReport] = []
        for path in tables:
            reports.append(verify_table(kernel_name, path, work_dir, on_entry=on_entry, buckets=buckets,
                                        runner=runner, require_timing=require_timing))
            if reports[-1].interrupted:
                break
        return VerifyRun(tables, reports)
    finally:
        runner.close()


def _tables_of(name: str) -> list[Path]:
    """Every table of the kernel the runtime may read, any device kind (whose recorded ceilings may serve)."""
    return sorted(p for root in table_roots() for p in root.glob(f"*/{name}.json"))


def verify_table(kernel_name: str, table_path: Path, work_dir: Path, settings: MeasureSettings | None = None,
                 on_entry: Callable[[EntryReport], None] | None = None, buckets: tuple[str, ...] = (),
                 runner_factory: Callable[[str, Kernel, Path], Runner] | None = None,
                 runner: Runner | None = None, require_timing: bool = False) -> VerifyReport:
    """Check every entry of the table (only those named in ``buckets``, if any) and its fallbacks, on
    ``runner`` (kept open) or on a worker of its own. Where the kernel's times here mean nothing
    (``void_timings``), correctness only, unless ``require_timing``.

    Interrupted (``KeyboardInterrupt``: SIGINT, or SIGTERM where the CLI maps it), it returns what it checked
    and the rest as not checked, with ``EXIT_INTERRUPTED``: a CI job cut by its timeout keeps its verdicts."""
    kernel = load_kernel(kernel_name)
    settings = settings or MeasureSettings(max_seconds=REMEASURE_MAX_SECONDS)
    try:
        table = read_table(table_path)
    except TableError as e:
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [str(e)])
    if table is None:
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [f"{table_path}: no such table"])
    if table.get("kernel") != kernel.name:
        return VerifyReport(table_path, [], EXIT_BAD_INPUT,
                            [f"{table_path}: a table of kernel {table.get('kernel')!r}, not of {kernel.name!r}"])
    entries: list[Entry] = [e for e in table["entries"].values() if not buckets or e.bucket_name in buckets]
    if unmeasurable := _without_problem(kernel, entries):
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [f"{table_path}: {unmeasurable}"])
    schema_failures = [EntryReport("?", {}, correctness="not checked", verdict=why, failed=True)
                       for why in table["skipped"]]
    if missing := sorted(set(buckets) - {e.bucket_name for e in entries}):
        return VerifyReport(table_path, [], EXIT_BAD_INPUT,
                            [f"{table_path}: no entry for bucket {', '.join(missing)} (have "
                             f"{sorted(str(e.bucket_name) for e in table['entries'].values())})"])
    owned = runner is None
    if runner is None:
        _seed_ceilings(table, work_dir / "logs")
        runner = (runner_factory or _live_runner)(kernel_name, kernel, work_dir)
    try:
        items = list(_items(entries))
        timed = [_timed_configs(kernel, *item) for item in items]
        # Every config starts compiling now, in the order it is timed, while the worker starts and reads its
        # stamps; a worker whose device cannot run the kernel drops them.
        for (_, item), configs in zip(items, timed, strict=True):
            for _, config in configs:
                runner.prefetch(_measure_request(kernel_name, item, config, settings), 0)
        running = runner.stamps()
        need = kernel.supported_on(running)
        can_small = Capability.CHECK_SMALL in kernel.capabilities
        if need is not None and not can_small:
            return VerifyReport(table_path, [], EXIT_CANNOT_RUN, [f"verifying {kernel.name} needs {need}"])
        notes = [] if need is None else [f"timing not checked: it needs {need}; correctness checked on the CPU "
                                         f"at small shapes (interpret mode)"]
        void = None
        if need is None and not require_timing and Capability.VOID_TIMINGS in kernel.capabilities:
            void = cast(VoidTimings, kernel).void_timings(running)
        if void is not None:
            notes.append(f"speed not judged: {void}; correctness checked (--require-timing times and judges it "
                         f"anyway)")
        elif (tuned_void := next((e.void_timings for e in entries if e.void_timings), None)) is not None:
            notes.append(f"its entries were tuned in an interpreter ({tuned_void}): their recorded times, and the "
                         f"winners chosen on them, say nothing of its speed")
        want = {**running, "kernel_hash": kernel.source_hash()}
        measured = _Measurements(kernel_name, runner, settings)

        reports = []
        try:
            for n, (against_heuristic, checked) in enumerate(items):
                reports.append(_verify_entry(kernel, measured, checked, want, need is None, settings,
                                             against_heuristic, timed[n], table_path, void))
                if on_entry is not None:
                    on_entry(reports[-1])
        except KeyboardInterrupt:
            done = len(reports)
            reports += [EntryReport(str(checked.bucket_name or "?"), dict(checked.config),
                                    verdict=NOT_CHECKED_INTERRUPTED, checked=False) for _, checked in items[done:]]
            return VerifyReport(table_path, schema_failures + reports, EXIT_INTERRUPTED,
                                [*notes, f"interrupted after {done} of {len(items)} items"],
                                None if need is None else f"needs {need}" if void is None else void,
                                measured.phases)
    finally:
        if owned:
            runner.close()
    reports = schema_failures + reports
    code = (EXIT_FAIL if any(r.failed for r in reports) else EXIT_UNSETTLED if any(r.unsettled for r in reports)
            else EXIT_CANNOT_RUN if need is not None or void is not None else EXIT_OK)
    absent = f"needs {need}" if need is not None else void
    return VerifyReport(table_path, reports, code, notes, absent, measured.phases)


def _without_problem(kernel: Kernel, entries: list[Entry]) -> str | None:
    """Why an entry cannot be re-measured: it lacks the problem it was measured at, or the kernel refuses it."""
    for e in entries:
        name = e.bucket_name or "?"
        if not isinstance(e.problem, dict):
            return f"entry {name}: no 'problem' (the shape it was measured at), so verify cannot re-measure it"
        try:
            kernel.problem(e.problem)
        except (TypeError, ValueError) as why:
            return f"entry {name}: problem {e.problem} is not one of {kernel.name}'s ({why})"
    return None


class _Measurements:
    """The worker's measurements of one verify run, each config of a bucket measured once: an entry's rivals
    are often another item's config (the heuristic, a runner-up that is also a fallback), and all run on the
    bucket's one seed of inputs, so one check and one timing serve both. Each keeps its phases, with its wall
    from the previous measurement's answer (``phases.py``)."""

    def __init__(self, kernel_name: str, runner: Runner, settings: MeasureSettings):
        self.kernel_name, self.runner, self.settings = kernel_name, runner, settings
        self._replies: dict[str, MeasureReply] = {}
        self.phases: list[BucketPhases] = []
        self._start = self._mark = time.perf_counter()

    def __call__(self, item: Entry, config: dict[str, Any], op: Op = Op.MEASURE) -> MeasureReply:
        """``op``: ``MEASURE`` (checked, then timed), or ``CHECK`` (checked only)."""
        req = _measure_request(self.kernel_name, item, config, self.settings, op)
        key = json.dumps([str(op), dict(req.problem), dict(req.inputs), dict(req.config)], sort_keys=True)
        if key not in self._replies:
            reply = cast(MeasureReply, self.runner.measure(req).result())
            now = time.perf_counter()
            phases = {**(reply.phases or {}), "wall_s": now - self._mark, "since_start_s": now - self._start}
            self._mark = now
            self.phases.append(BucketPhases(req.bucket, phases))
            self._replies[key] = reply
        return self._replies[key]

    def request(self, req: Request) -> Reply:
        return self.runner.request(req)

    def rounds(self, item: Entry, configs: list[dict[str, Any]], median_us: float) -> PlayoffReply:
        """``configs`` (the item's first) timed in ``ROUNDS`` interleaved rounds on the item's inputs, by the
        sweep's playoff op: each config's median per round, in µs."""
        settings = dataclasses.replace(self.settings, batch=batch_for(median_us))
        req = dataclasses.replace(_measure_request(self.kernel_name, item, configs[0], settings, Op.PLAYOFF),
                                  rivals=tuple(configs))
        reply = self.runner.request(req)
        if not isinstance(reply, PlayoffReply):
            return PlayoffReply(reply.status, reply.error or f"a {reply.status} reply to a playoff")
        return reply


def _live_runner(kernel_name: str, kernel: Kernel, work_dir: Path) -> Runner:
    """Nothing kept in the run's temporary folder but its logs: one worker serves a whole verify, so its references
    stay in the worker's memory (writing a bucket's, 1-2 GB at D=128, cost about 30 of the 116-120 s the shipped
    table spent on references, for no reader: results/engine/2026-12-05-build-cache/), and builds go to the
    user's build cache, not to a framework compile cache that the folder's deletion would discard."""
    gpus = tuple(str(i) for i in range(kernel.devices))
    return LiveRunner(kernel_name, device_groups(gpus, kernel.devices), default_compile_workers(), work_dir / "logs",
                      None, RUN_TIMEOUT_S)


def _timed_configs(kernel: Kernel, against_heuristic: bool, item: Entry) -> list[tuple[str, dict[str, Any]]]:
    """What verify times for an item, in order: the item's config, then for an entry the heuristic's (where it
    differs) and its rivals' (an entry older than rivals: its first runner-ups'), ``RIVALS_TIMED`` at most, each
    named as its verdict names it."""
    timed = [("the item", dict(item.config))]
    if against_heuristic:
        heur = kernel.heuristic(kernel.problem(item.problem or {}))
        if heur != item.config:
            timed.append((HEURISTIC, heur))
        rivals = [(f"rival {i + 1}", dict(r.config)) for i, r in enumerate(item.rivals or ())]
        rivals += [(f"runner-up {i + 1}", dict(up.config)) for i, up in enumerate(item.runner_ups or ())]
        added = 0
        for name, config in rivals:
            if added < RIVALS_TIMED and config not in [c for _, c in timed]:
                timed.append((name, config))
                added += 1
    return timed


def _measure_request(kernel_name: str, item: Entry, config: dict[str, Any],
                     settings: MeasureSettings, op: Op = Op.MEASURE) -> Request:
    """The entry, its fallbacks and its rivals all run on one seed's inputs, so a kernel may keep what it
    computed for them (its references, say)."""
    return candidate_request(kernel_name, str(item.bucket_name or "?"), item.problem or {}, config,
                             item.inputs or {}, VERIFY_SEED, settings, op)


def _items(entries: list[Entry]) -> Iterator[tuple[bool, Entry]]:
    """(timed against the heuristic, item): each entry, then its fallbacks, checked as the entry is: a fallback
    is its entry with the fallback's config and what was measured of it."""
    for e in entries:
        yield True, e
        for fb in e.fallbacks or ():
            yield False, e.replace(config=fb.config, median_us=fb.median_us,
                                   spread=e.spread if fb.spread is None else fb.spread,
                                   accuracy=fb.accuracy or e.accuracy, bucket_name=f"{e.bucket_name or '?'} (fallback)")


def worst_exit_code(codes: list[int]) -> int:
    """One exit code for several tables: interrupted over bad input over a failure over unsettled timings over
    hardware absent over success."""
    for code in (EXIT_INTERRUPTED, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_UNSETTLED, EXIT_CANNOT_RUN):
        if code in codes:
            return code
    return EXIT_OK


def _seed_ceilings(table: dict[str, Any], log_dir: Path) -> bool:
    """Hand the timing worker the ceilings the table recorded: it reuses them when GPU and driver
    match (measuring them again takes ~20 s and verify reports no % of ceiling). Whether it had any."""
    for entry in table["entries"].values():
        stamps = entry.stamps
        if "bf16_tflops_ceiling" in stamps:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "ceilings.json").write_text(json.dumps(dict(stamps)))
            return True
    return False


def _verify_entry(kernel: Kernel, runner: _Measurements, entry: Entry, want: dict[str, Any],
                  on_gpu: bool, settings: MeasureSettings, against_heuristic: bool,
                  timed: list[tuple[str, dict[str, Any]]], table: Path | str = "TABLE",
                  void: str | None = None) -> EntryReport:
    """Checked and timed as any entry; one tuned for another kernel source fails as stale whatever its checks
    say, and its verdict says so first (it was once overwritten by a later "ok; warning")."""
    rep = _check_and_time(kernel, runner, entry, on_gpu, settings, against_heuristic, timed, void)
    rep.stamps = mismatches(entry.stamps, want)
    if any(s.startswith("kernel_hash") for s in rep.stamps):
        rep.failed = True
        carry = (f"`kerneltune rekey {runner.kernel_name}` carries it if its programs did not change, else "
                 if Capability.PROGRAM_DIGEST in kernel.capabilities else "")
        rep.verdict = (f"stale: tuned for another kernel source ({carry}`kerneltune sweep {runner.kernel_name} "
                       f"--contenders {table}` re-measures the table's configs, then `kerneltune install` the "
                       f"sweep's table); checks here: {rep.verdict}")
    elif rep.stamps and on_gpu:  # the runtime matches the same stamps: it never uses this entry here
        rep.failed = True
        rep.verdict = (f"stale: measured on another system ({'; '.join(rep.stamps)}), so the runtime here never "
                       f"uses it (`kerneltune sweep {runner.kernel_name} --contenders {table}` re-measures its configs "
                       f"here); checks here: {rep.verdict}")
    return rep


def _label(name: str, config: dict[str, Any]) -> str:
    """A rival as a verdict names it: ``rival 1 (block_k=64 unroll=4)``."""
    return f"{name} ({' '.join(f'{k}={v}' for k, v in config.items())})"


def _check_and_time(kernel: Kernel, runner: _Measurements, entry: Entry, on_gpu: bool,
                    settings: MeasureSettings, against_heuristic: bool,
                    timed: list[tuple[str, dict[str, Any]]], void: str | None = None) -> EntryReport:
    """``timed``: the item's config, then the rivals it is timed beside (``_timed_configs``). ``void``: why its
    times here mean nothing: it is checked only."""
    rep = EntryReport(entry.bucket_name or "?", dict(entry.config), recorded_us=entry.median_us)
    problem_fields = entry.problem or {}
    if (why := refusal(kernel, kernel.problem(problem_fields), dict(entry.config))) is not None:
        rep.failed, rep.verdict, rep.correctness = True, f"config refused by the kernel: {why}", "not run"
        return rep
    if not on_gpu:
        reply = runner.request(_measure_request(runner.kernel_name, entry, dict(entry.config), settings,
                                                Op.CHECK_SMALL))
        if reply.ok:
            rep.correctness = "ok (interpret mode, small shape)"
        else:
            rep.correctness = reply.status
            rep.failed, rep.verdict = True, f"{reply.status}: {(reply.error or '')[:200]}"
        return rep
    # One measurement: the worker checks the outputs on fresh inputs and several bound sets
    # (random and adversarial) before it times them.
    reply = runner(entry, dict(entry.config), Op.MEASURE if void is None else Op.CHECK)
    if not reply.ok:
        rep.failed, rep.verdict = True, f"{reply.status}: {(reply.error or '')[:300]}"
        rep.correctness = reply.status
        return rep
    rep.correctness = "ok"
    if void is not None:
        rep.speed_judged, rep.verdict = False, "ok; speed not judged here"
        return rep
    if reply.timing is None:
        rep.failed, rep.verdict, rep.correctness = True, f"{reply.status}: no timing came back", reply.status
        return rep
    rep.now_us = reply.median_us
    # Each rival checked and timed as the item was; one that fails its check is no rival.
    rivals: dict[str, float] = {}
    spreads = [reply.spread, settings.rel_noise]
    settled = {"the item": reply.settled}
    if against_heuristic and HEURISTIC not in dict(timed[1:]):
        rep.heuristic_us, rep.heuristic_is_tuned = rep.now_us, True
    for name, config in timed[1:]:
        r = runner(entry, config)
        if r.ok and r.timing is not None:
            rivals[name] = r.median_us
            spreads.append(r.spread)
            settled[name] = r.settled
    rep.heuristic_us = rivals.get(HEURISTIC, rep.heuristic_us)
    rep.rivals_us = dict(rivals)
    noise = max(spreads)
    if rivals:
        names = [n for n, _ in timed[1:] if n in rivals]
        paired = _paired(runner, entry, [dict(entry.config), *(dict(timed)[n] for n in names)], names, rep.now_us)
        if isinstance(paired, str):
            _by_medians(rep, rivals, settled, noise, dict(timed))
            rep.verdict += f"; {paired}"
        else:
            rep.paired, rep.rounds = paired
            _by_rounds(rep, 2 * settings.rel_noise, dict(timed))
        if rep.failed or rep.unsettled:
            return rep
    if rep.recorded_us:
        drift = rep.now_us / rep.recorded_us - 1.0
        recorded_noise = max(entry.spread or 0.0, noise, DRIFT_SPREAD)
        if abs(drift) > 2 * recorded_noise:
            rep.verdict += (f"; warning: {100 * drift:+.1f}% against the recorded time (beyond twice the "
                            f"{100 * recorded_noise:.1f}% spread across devices and runs)")
    return rep


def _paired(runner: _Measurements, entry: Entry, configs: list[dict[str, Any]], names: list[str],
            median_us: float) -> tuple[dict[str, tuple[float, float, float]], int] | str:
    """Each rival's per-round ratio of the item's time to its own, (low, median, high) over interleaved rounds:
    ``ROUNDS`` at a time, more while a rival's interval straddles the bound and rounds are left
    (``PAIRED_ROUNDS``); or why there are none (the playoff failed: the separate medians judge instead)."""
    rows: list[list[float]] = [[] for _ in configs]
    while True:
        reply = runner.rounds(entry, configs, median_us)
        if not reply.ok or len(reply.times) != len(configs) or not all(
                t and all(x > 0 for x in t) for t in reply.times):
            return f"not timed in interleaved rounds ({reply.error or reply.status}): judged on separate medians"
        for row, t in zip(rows, reply.times, strict=True):
            row.extend(t)
        out = {}
        for name, row in zip(names, rows[1:], strict=True):
            ratios = [a / b for a, b in zip(rows[0], row, strict=True)]
            lo, hi = median_interval(ratios)
            out[name] = (lo, statistics.median(ratios), hi)
        bound = 1 + 2 * runner.settings.rel_noise
        if len(rows[0]) >= PAIRED_ROUNDS or not any(lo <= bound < hi for lo, _, hi in out.values()):
            return out, len(rows[0])


def _by_rounds(rep: EntryReport, bound: float, configs: dict[str, dict[str, Any]]) -> None:
    """The verdict from the paired intervals (``rep.paired``): slower where a rival's interval lies wholly above
    1 + ``bound``, unsettled where one straddles it, else ok (a tie where a rival ran faster within the bound)."""
    def interval(name: str) -> str:
        lo, med, hi = rep.paired[name]
        return (f"{100 * (med - 1):+.1f}% over {rep.rounds} interleaved rounds, 95% interval {100 * (lo - 1):+.1f}% "
                f"to {100 * (hi - 1):+.1f}%")

    beaten = [n for n, (lo, _, _) in rep.paired.items() if lo > 1 + bound]
    if beaten:
        name = max(beaten, key=lambda n: rep.paired[n][1])
        rep.failed = True
        rep.verdict = (f"slower than {_label(name, configs[name])} timed beside it: {interval(name)} "
                       f"(beyond the {100 * bound:.1f}% that twice the noise allows)")
        return
    doubt = [n for n, (lo, _, hi) in rep.paired.items() if lo <= 1 + bound < hi]
    if doubt:
        name = max(doubt, key=lambda n: rep.paired[n][1])
        rep.unsettled = True
        rep.verdict = (f"unsettled: against {_label(name, configs[name])} it ran {interval(name)}, which neither "
                       f"clears nor passes the {100 * bound:.1f}% bound: its speed is not judged; verify again on a "
                       f"quieter machine")
        return
    faster = [n for n, (_, med, _) in rep.paired.items() if med > 1]
    if faster:
        name = max(faster, key=lambda n: rep.paired[n][1])
        rep.verdict = f"ok; a tie: {_label(name, configs[name])} ran faster within the bound: {interval(name)}"


def _by_medians(rep: EntryReport, rivals: dict[str, float], settled: dict[str, bool], noise: float,
                configs: dict[str, dict[str, Any]]) -> None:
    """The verdict from separate medians, where the interleaved rounds could not be timed: slower past twice the
    widest spread (or ``--rel-noise``), unsettled where a close rival's or the item's timing did not settle."""
    assert rep.now_us is not None
    name, best = min(rivals.items(), key=lambda kv: kv[1])
    if rep.now_us > best * (1 + 2 * noise):
        rep.failed = True
        rep.verdict = (f"slower than {_label(name, configs[name])} timed beside it: {rep.now_us:.1f} against "
                       f"{best:.1f} µs (noise {100 * noise:.1f}%)")
        return
    close = {n for n, us in rivals.items() if us < rep.now_us * (1 + 2 * noise)}  # not clearly slower
    if close and not all(settled[n] for n in (*close, "the item")):
        rep.unsettled = True
        rep.verdict = (f"unsettled: {_label(name, configs[name])} timed {best:.1f} µs beside its {rep.now_us:.1f} µs, "
                       f"and the timings "
                       f"did not settle (noise {100 * noise:.1f}%): its speed is not judged; verify again on a "
                       f"quieter machine")
        return
    if best < rep.now_us:
        rep.verdict = (f"ok; a tie: {_label(name, configs[name])} timed {best:.1f} µs beside its {rep.now_us:.1f} µs, "
                       f"within twice the "
                       f"{100 * noise:.1f}% noise")
