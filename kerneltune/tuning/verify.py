"""Re-check a tuned table on this machine: stamps, correctness on fresh inputs, and time.

Each entry's fallbacks are checked like its winner: a launch whose problem refuses the
winner runs them.

"Slower" is judged within this run: the winner against its recorded runner-ups and the heuristic,
timed beside it now. Its drift from the recorded time, measured on another GPU or day, is a warning.

Verdicts: "ok" (correct, and not slower than any rival timed beside it; "a tie" where a rival ran faster within
the noise), "slower", "stale", a failed check's status, and "unsettled": correct, but a rival ran within the noise
while a timing did not settle, so the speed is not judged either way.

Exit codes: 0 everything holds; 1 a correctness failure, a winner slower than a rival timed beside it,
or a stale kernel source; 2 the timing needs hardware this machine lacks (what could be checked here
was, and passed); 3 the table is missing, unreadable or lacks a bucket asked for; 4 correct, but some
entry's speed unsettled; 130 interrupted (the verdicts reached are kept, the rest reported as not checked).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kerneltune.limits import REMEASURE_MAX_SECONDS, RUN_TIMEOUT_S
from kerneltune.measure import MeasureSettings
from kerneltune.protocols import Capability, Kernel, Runner
from kerneltune.registry import load_kernel
from kerneltune.tables.locations import shipped_tables_dir, table_roots
from kerneltune.tables.stamps import mismatches
from kerneltune.tables.store import TableError, read_table
from kerneltune.tables.store import table_path as stored_table_path
from kerneltune.wire import MeasureReply, Op, Reply, Request, candidate_request

from .compile_ahead import default_compile_workers
from .runners import LiveRunner, device_groups
from .sweep import refusal

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN, EXIT_BAD_INPUT = 0, 1, 2, 3
EXIT_UNSETTLED = 4  # correct, but the speed could not be judged: the timings did not settle
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM (a CI job's timeout) before every item was checked
NOT_CHECKED_INTERRUPTED = "not checked: verify was interrupted before this item"
RUNNER_UPS_TIMED = 2
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
    rivals_us: dict[str, float] = field(default_factory=dict)  # runner-ups and heuristic timed beside it
    checked: bool = True  # False: the run was interrupted before this item


@dataclass
class VerifyReport:
    table: Path
    entries: list[EntryReport]
    exit_code: int
    notes: list[str]
    timing_absent: str | None = None  # why timing could not be checked here (the hardware it needs)
    phases: list[dict[str, Any]] = field(default_factory=list)  # each measurement's bucket and phases

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
                  runner_factory: Callable[[str, Kernel, Path], Runner] | None = None) -> VerifyRun:
    """``kerneltune verify``: ``table``, or the tables the runtime reads on the device the timing worker
    reports (the worker, not this process, initialises the GPU framework), each checked by ``verify_table``
    on that one worker. Raises ``VerifyRefused`` when there is no table, or no hardware and no small check."""
    if table is not None:  # read and judged before any worker starts
        return VerifyRun([table], [verify_table(kernel_name, table, work_dir, on_entry=on_entry, buckets=buckets,
                                                runner_factory=runner_factory)])
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
                                        runner=runner))
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
                 runner: Runner | None = None) -> VerifyReport:
    """Check every entry of the table (only those named in ``buckets``, if any) and its fallbacks, on
    ``runner`` (kept open) or on a worker of its own.

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
    entries = [e for e in table["entries"].values() if not buckets or e.get("bucket_name") in buckets]
    if unmeasurable := _without_problem(kernel, entries):
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [f"{table_path}: {unmeasurable}"])
    schema_failures = [EntryReport("?", {}, correctness="not checked", verdict=why, failed=True)
                       for why in table["skipped"]]
    if missing := sorted(set(buckets) - {e.get("bucket_name") for e in entries}):
        return VerifyReport(table_path, [], EXIT_BAD_INPUT,
                            [f"{table_path}: no entry for bucket {', '.join(missing)} (have "
                             f"{sorted(str(e.get('bucket_name')) for e in table['entries'].values())})"])
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
            for _, tiles in configs:
                runner.prefetch(_measure_request(kernel_name, item, tiles, settings), 0)
        running = runner.stamps()
        need = kernel.supported_on(running)
        can_small = Capability.CHECK_SMALL in kernel.capabilities
        if need is not None and not can_small:
            return VerifyReport(table_path, [], EXIT_CANNOT_RUN, [f"verifying {kernel.name} needs {need}"])
        notes = [] if need is None else [f"timing not checked: it needs {need}; correctness checked on the CPU "
                                         f"at small shapes (interpret mode)"]
        want = {**running, "kernel_hash": kernel.source_hash()}
        measured = _Measurements(kernel_name, runner, settings)

        reports = []
        try:
            for n, (against_heuristic, checked) in enumerate(items):
                reports.append(_verify_entry(kernel, measured, checked, want, need is None, settings,
                                             against_heuristic, timed[n], table_path))
                if on_entry is not None:
                    on_entry(reports[-1])
        except KeyboardInterrupt:
            done = len(reports)
            reports += [EntryReport(str(checked.get("bucket_name", "?")), dict(checked.get("config", {})),
                                    verdict=NOT_CHECKED_INTERRUPTED, checked=False) for _, checked in items[done:]]
            return VerifyReport(table_path, schema_failures + reports, EXIT_INTERRUPTED,
                                [*notes, f"interrupted after {done} of {len(items)} items"],
                                None if need is None else f"needs {need}", measured.phases)
    finally:
        if owned:
            runner.close()
    reports = schema_failures + reports
    code = (EXIT_FAIL if any(r.failed for r in reports) else EXIT_UNSETTLED if any(r.unsettled for r in reports)
            else EXIT_CANNOT_RUN if need is not None else EXIT_OK)
    return VerifyReport(table_path, reports, code, notes, None if need is None else f"needs {need}", measured.phases)


def _without_problem(kernel: Kernel, entries: list[dict[str, Any]]) -> str | None:
    """Why an entry cannot be re-measured: it lacks the problem it was measured at, or the kernel refuses it."""
    for e in entries:
        name = e.get("bucket_name", "?")
        if not isinstance(e.get("problem"), dict):
            return f"entry {name}: no 'problem' (the shape it was measured at), so verify cannot re-measure it"
        try:
            kernel.problem(e["problem"])
        except (TypeError, ValueError) as why:
            return f"entry {name}: problem {e['problem']} is not one of {kernel.name}'s ({why})"
    return None


class _Measurements:
    """The worker's measurements of one verify run, each config of a bucket measured once: an entry's rivals
    are often another item's config (the heuristic, a runner-up that is also a fallback), and all run on the
    bucket's one seed of inputs, so one check and one timing serve both. Each keeps its phases, with its wall
    from the previous measurement's answer (``phases.py``)."""

    def __init__(self, kernel_name: str, runner: Runner, settings: MeasureSettings):
        self.kernel_name, self.runner, self.settings = kernel_name, runner, settings
        self._replies: dict[str, MeasureReply] = {}
        self.phases: list[dict[str, Any]] = []
        self._start = self._mark = time.perf_counter()

    def __call__(self, item: dict[str, Any], tiles: dict[str, Any]) -> MeasureReply:
        req = _measure_request(self.kernel_name, item, tiles, self.settings)
        key = json.dumps([dict(req.problem), dict(req.inputs), dict(req.tiles)], sort_keys=True)
        if key not in self._replies:
            reply = cast(MeasureReply, self.runner.measure(req).result())
            now = time.perf_counter()
            phases = {**(reply.phases or {}), "wall_s": now - self._mark, "since_start_s": now - self._start}
            self._mark = now
            self.phases.append({"bucket": req.bucket, "phases": phases})
            self._replies[key] = reply
        return self._replies[key]

    def request(self, req: Request) -> Reply:
        return self.runner.request(req)


def _live_runner(kernel_name: str, kernel: Kernel, work_dir: Path) -> Runner:
    """Nothing kept in the run's temporary folder but its logs: one worker serves a whole verify, so its references
    stay in the worker's memory (writing a bucket's, 1-2 GB at D=128, cost about 30 of the 116-120 s the shipped
    table spent on references, for no reader: results/engine/2026-12-05-build-cache/), and builds go to the
    user's build cache, not to a framework compile cache that the folder's deletion would discard."""
    gpus = tuple(str(i) for i in range(kernel.devices))
    return LiveRunner(kernel_name, device_groups(gpus, kernel.devices), default_compile_workers(), work_dir / "logs",
                      None, RUN_TIMEOUT_S)


def _timed_configs(kernel: Kernel, against_heuristic: bool, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """What verify times for an item, in order: the item's config, then for an entry the heuristic's (where it
    differs) and the first runner-ups', each named as its verdict names it."""
    timed = [("the item", dict(item["config"]))]
    if against_heuristic:
        heur = kernel.heuristic(kernel.problem(item.get("problem") or {}))
        if heur != item["config"]:
            timed.append((HEURISTIC, heur))
        timed += [(f"runner-up {i + 1}", up["config"])
                  for i, up in enumerate(item.get("runner_ups", [])[:RUNNER_UPS_TIMED])]
    return timed


def _measure_request(kernel_name: str, item: dict[str, Any], tiles: dict[str, Any],
                     settings: MeasureSettings, op: Op = Op.MEASURE) -> Request:
    """The entry, its fallbacks and its rivals all run on one seed's inputs, so a kernel may keep what it
    computed for them (its references, say)."""
    return candidate_request(kernel_name, str(item.get("bucket_name", "?")), item.get("problem") or {}, tiles,
                             item.get("inputs", {}), VERIFY_SEED, settings, op)


def _items(entries: list[dict[str, Any]]) -> Iterator[tuple[bool, dict[str, Any]]]:
    """(timed against the heuristic, item): each entry, then its fallbacks, checked as the entry is."""
    for e in entries:
        yield True, e
        for fb in e.get("fallbacks", ()):
            yield False, {**e, **fb, "bucket_name": f"{e.get('bucket_name', '?')} (fallback)"}


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
        stamps = entry.get("stamps", {})
        if "bf16_tflops_ceiling" in stamps:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "ceilings.json").write_text(json.dumps(stamps))
            return True
    return False


def _verify_entry(kernel: Kernel, runner: _Measurements, entry: dict[str, Any], want: dict[str, Any],
                  on_gpu: bool, settings: MeasureSettings, against_heuristic: bool,
                  timed: list[tuple[str, dict[str, Any]]], table: Path | str = "TABLE") -> EntryReport:
    """Checked and timed as any entry; one tuned for another kernel source fails as stale whatever its checks
    say, and its verdict says so first (it was once overwritten by a later "ok; warning")."""
    rep = _check_and_time(kernel, runner, entry, on_gpu, settings, against_heuristic, timed)
    rep.stamps = mismatches(entry.get("stamps", {}), want)
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


def _check_and_time(kernel: Kernel, runner: _Measurements, entry: dict[str, Any], on_gpu: bool,
                    settings: MeasureSettings, against_heuristic: bool,
                    timed: list[tuple[str, dict[str, Any]]]) -> EntryReport:
    """``timed``: the item's config, then the rivals it is timed beside (``_timed_configs``)."""
    rep = EntryReport(entry.get("bucket_name", "?"), entry["config"], recorded_us=entry.get("median_us"))
    problem_fields = entry.get("problem") or {}
    if (why := refusal(kernel, kernel.problem(problem_fields), entry["config"])) is not None:
        rep.failed, rep.verdict, rep.correctness = True, f"config refused by the kernel: {why}", "not run"
        return rep
    if not on_gpu:
        reply = runner.request(_measure_request(runner.kernel_name, entry, entry["config"], settings,
                                                Op.CHECK_SMALL))
        if reply.ok:
            rep.correctness = "ok (interpret mode, small shape)"
        else:
            rep.correctness = reply.status
            rep.failed, rep.verdict = True, f"{reply.status}: {(reply.error or '')[:200]}"
        return rep
    # One measurement: the worker checks the outputs on fresh inputs and several bound sets
    # (random and adversarial) before it times them.
    rivals_timed = timed[1:]
    reply = runner(entry, entry["config"])
    if not reply.ok or reply.timing is None:
        rep.failed, rep.verdict = True, f"{reply.status}: {(reply.error or '')[:300]}"
        rep.correctness = reply.status
        return rep
    rep.correctness = "ok"
    rep.now_us = reply.timing["median_us"]
    spreads = [reply.timing["spread"], settings.rel_noise]
    settled = {"the item": reply.timing.get("converged", True)}
    # The verdict compares timings of this run only: the winner against its recorded runner-ups and the
    # heuristic, each timed now beside it. Absolute times drift between GPUs and days.
    rivals: dict[str, float] = {}
    if against_heuristic and HEURISTIC not in dict(rivals_timed):
        rep.heuristic_us, rep.heuristic_is_tuned = rep.now_us, True
    for name, tiles in rivals_timed:
        r = runner(entry, tiles)
        if r.ok and r.timing is not None:
            rivals[name] = r.timing["median_us"]
            spreads.append(r.timing["spread"])
            settled[name] = r.timing.get("converged", True)
    rep.heuristic_us = rivals.get(HEURISTIC, rep.heuristic_us)
    noise = max(spreads)
    if rivals:
        name, best = min(rivals.items(), key=lambda kv: kv[1])
        rep.rivals_us = dict(rivals)
        if rep.now_us > best * (1 + 2 * noise):
            rep.failed = True
            rep.verdict = (f"slower than {name} timed beside it: {rep.now_us:.1f} against {best:.1f} µs "
                           f"(noise {100 * noise:.1f}%)")
            return rep
        close = {n for n, us in rivals.items() if us < rep.now_us * (1 + 2 * noise)}  # not clearly slower
        if close and not all(settled[n] for n in (*close, "the item")):
            rep.unsettled = True
            rep.verdict = (f"unsettled: {name} timed {best:.1f} µs beside its {rep.now_us:.1f} µs, and the timings "
                           f"did not settle (noise {100 * noise:.1f}%): its speed is not judged; verify again on a "
                           f"quieter machine")
            return rep
        if best < rep.now_us:
            rep.verdict = (f"ok; a tie: {name} timed {best:.1f} µs beside its {rep.now_us:.1f} µs, within twice the "
                           f"{100 * noise:.1f}% noise")
    if rep.recorded_us:
        drift = rep.now_us / rep.recorded_us - 1.0
        recorded_noise = max(entry.get("spread", 0.0), noise, DRIFT_SPREAD)
        if abs(drift) > 2 * recorded_noise:
            rep.verdict += (f"; warning: {100 * drift:+.1f}% against the recorded time (beyond twice the "
                            f"{100 * recorded_noise:.1f}% spread across devices and runs)")
    return rep
