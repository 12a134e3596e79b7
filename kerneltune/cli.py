"""The ``kerneltune`` command line: Typer commands that call the engine, nothing more.

Exit codes: 0 everything checked on the target passed; 1 wrong or slower; 2 the target hardware is
absent (the line says which); 3 bad input (a file, a name or an option; the line names it); 130
interrupted (SIGINT or SIGTERM; the line says what was kept). A failure is one line on stderr;
``--debug`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

try:  # Typer >= 0.2x carries its own copy of click, whose exceptions it raises
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:
    from click.exceptions import NoArgsIsHelpError, UsageError

from kerneltune import __version__
from kerneltune.limits import CANDIDATE_MAX_SECONDS, COMPILE_TIMEOUT_S, RUN_TIMEOUT_S
from kerneltune.paths import SPACES
from kerneltune.tuning.strategies import names as strategy_names

if TYPE_CHECKING:
    from kerneltune.protocols import Kernel
    from kerneltune.tuning.verify import VerifyReport

EXIT_FAILED, EXIT_NO_HARDWARE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 3, 130


class _UsageIsBadInput(TyperGroup):
    """A usage error (an unknown option, a missing argument, a bad value) is one line naming the command, and
    exits 3, bad input, not click's 2: 2 says the target hardware is absent, which the README's CI recipe
    tolerates (``|| test $? -eq 2``), so a typo in an option would pass CI."""

    @staticmethod
    def _bad_input(e: UsageError) -> None:
        if isinstance(e, NoArgsIsHelpError):  # no command at all: the help is the answer
            return
        where = f"{e.ctx.command_path}: " if e.ctx is not None else ""
        _fail(f"{where}{e.format_message()} (--help lists the options)")

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as e:
            self._bad_input(e)
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as e:
            self._bad_input(e)
            raise


app = typer.Typer(cls=_UsageIsBadInput,
                  help="Tune, verify and ship GPU kernels with their best configuration for every GPU and shape."
                       "\n\nExit codes: 0 everything checked on the target passed; 1 wrong or slower; 2 the target "
                       "hardware is absent (what could be checked here was); 3 bad input (a file, a name, an "
                       "option); 130 interrupted (SIGINT or SIGTERM; the line says what was kept).",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  # Plain help, wrapped at 100 columns: Rich's help panels cut long values at the terminal's
                  # 80 ("search_spaces/KERNEL…") and label every flag "<bool>".
                  context_settings={"max_content_width": 100, "terminal_width": 100})
# Written to a file or a CI log, Rich would wrap tables at 80 columns and cut every config short.
console = Console(width=None if "COLUMNS" in os.environ or os.isatty(1) else 120)
errors = Console(stderr=True, width=None if "COLUMNS" in os.environ or os.isatty(2) else 400)
_debug = False


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, markup in the message shown as written, and the exit code."""
    errors.print(f"[red]error:[/red] {escape(' '.join(str(message).split()))}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, KeyError):
        return f"missing field {e}"
    return str(e) or type(e).__name__


@contextlib.contextmanager
def _bad_input_is_one_line() -> Iterator[None]:
    """Bad input (a file, a name, an option) ends in one line naming it, exit 3, unless ``--debug``."""
    from kerneltune.registry import UnknownName
    from kerneltune.tables.store import TableError
    from kerneltune.tuning.journal import JournalError
    from kerneltune.tuning.space import SpaceError

    try:
        yield
    except (SpaceError, UnknownName, TableError, JournalError, ValueError, OSError, KeyError) as e:
        if _debug:
            raise
        _fail(_describe(e))


@contextlib.contextmanager
def _interrupt_is_one_line(kept: str) -> Iterator[None]:
    """SIGINT (or SIGTERM, mapped to it) ends in one line saying what was kept, exit 130 (not Click's
    "Aborted!" and exit 1, which reads as a failed check)."""
    try:
        yield
    except KeyboardInterrupt:
        if _debug:
            raise
        _fail(f"interrupted; {kept}", EXIT_INTERRUPTED)


def _sigterm_is_an_interrupt(signum: int, frame: object) -> None:
    """A CI job's timeout sends SIGTERM: stop as on Ctrl-C, keeping what is finished, instead of dying."""
    raise KeyboardInterrupt


def _version(value: bool) -> None:
    if value:
        console.print(f"kerneltune {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Print the version and exit.")] = False,
         debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of a failure.")] = False,
         verbose: Annotated[bool, typer.Option("--verbose", help="Show Optuna's and the engine's informational "
                                                                 "log lines.")] = False) -> None:
    """Options every command takes."""
    import logging

    global _debug
    _debug = debug
    signal.signal(signal.SIGTERM, _sigterm_is_an_interrupt)
    logging.getLogger("kerneltune").setLevel(logging.INFO if verbose else logging.WARNING)  # Optuna follows it


def _space_for(kernel: str, space: Path | None) -> Path:
    from kerneltune.registry import canonical_name

    return space or SPACES / f"{canonical_name(kernel)}.toml"


@app.command()
def sweep(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. ranker-attention.")],
    space: Annotated[Path | None, typer.Option(help="Search-space TOML (default: search_spaces/KERNEL.toml).")] = None,
    bucket: Annotated[list[str] | None, typer.Option(help="Sweep only this bucket (repeatable).")] = None,
    strategy: Annotated[str, typer.Option(help=f"One of: {', '.join(strategy_names())}.")] = "exhaustive",
    budget: Annotated[int | None, typer.Option(help="Candidates to measure per bucket (default: all).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sampler and of the inputs.")] = 0,
    contenders: Annotated[Path | None, typer.Option(help="A tuned table: time only the configs it holds for each "
                                                          "bucket (winner, runner-ups, fallbacks), as after a "
                                                          "kernel change made it stale; exhaustive only.")] = None,
    warm_start: Annotated[bool, typer.Option(help="First measure the winners and runner-ups of the nearest tuned "
                                                  "buckets on this device kind, then search.")] = True,
    gpus: Annotated[str, typer.Option(help="Comma-separated GPU indices: one timing worker per GPU, or per "
                                           "launch group of a multi-GPU kernel (default: as many as one launch "
                                           "spans).")] = "",
    out: Annotated[Path, typer.Option(help="Working folder of the journals, tables and logs; its tables reach "
                                           "the runtime only through `kerneltune install`.")]
    = Path("kerneltune-out"),
    replay: Annotated[Path | None, typer.Option(help="Answer from a recorded journal, or a folder of "
                                                        "per-worker journals; no GPU needed.")] = None,
    storage: Annotated[str | None, typer.Option(help="Optuna RDB URL (e.g. postgresql://user@host/db) shared by "
                                                "workers: an exhaustive sweep becomes a queue they share.")] = None,
    study: Annotated[str | None, typer.Option(help="Optuna study name prefix (with --storage).")] = None,
    worker: Annotated[str | None, typer.Option(help="This worker's name: its journal is KERNEL-MODE-WORKER.jsonl.")]
    = None,
    heartbeat: Annotated[float, typer.Option(help="Seconds between a shared trial's heartbeats; 3 missed = dead.")]
    = 10.0,
    replay_seconds: Annotated[float, typer.Option(help="With --replay: pause this long per candidate, as a run "
                                                       "would (demos, tests of shared studies).")] = 0.0,
    compile_only: Annotated[bool, typer.Option(help="Compile offline and rank by static metrics, no timings "
                                                    "(kernels that have it: drafter-wide).")] = False,
    resume: Annotated[bool, typer.Option(help="Skip candidates the journal already holds.")] = True,
    journal: Annotated[Path | None, typer.Option(help="Journal file (default: OUT/journals/KERNEL-MODE.jsonl).")]
    = None,
    compile_workers: Annotated[int | None, typer.Option(
        help="Compile workers beside each timing worker (processes where the kernel's build can leave its "
             "process, as the ranker's can; else threads); 0 compiles each candidate when it is timed. "
             "Default: the cores less two, up to 14.")] = None,
    rel_noise: Annotated[float, typer.Option(help="Stop timing when the median's noise is under this.")] = 0.01,
    max_seconds: Annotated[float, typer.Option(help="Time cap of sampling per candidate.")] = CANDIDATE_MAX_SECONDS,
    cold_l2: Annotated[bool, typer.Option(help="Flush L2 before every timed call.")] = False,
    compile_timeout: Annotated[float, typer.Option(help="Seconds a candidate may take to compile.")]
    = COMPILE_TIMEOUT_S,
    run_timeout: Annotated[float, typer.Option(help="Seconds a candidate may take to verify and time.")]
    = RUN_TIMEOUT_S,
) -> None:
    """Compile, check and time every candidate; journal each; write tuned tables.

    The tables land in the working folder (--out); `kerneltune install` puts them where the runtime reads."""
    from kerneltune.measure import MeasureSettings
    from kerneltune.registry import canonical_name
    from kerneltune.tuning.compile_ahead import default_compile_workers
    from kerneltune.tuning.progress import RichObserver
    from kerneltune.tuning.sweep import (
        HardwareMissing,
        ReplayOptions,
        SearchOptions,
        SharedOptions,
        SweepOptions,
        WorkerOptions,
        check_options,
        run_sweep,
    )

    with _bad_input_is_one_line():
        opts = SweepOptions(
            kernel=canonical_name(kernel), space_path=_space_for(kernel, space), out=out, buckets=tuple(bucket or ()),
            search=SearchOptions(strategy=strategy.lower(), budget=budget, seed=seed, contenders=contenders,
                                 warm_start=warm_start),
            workers=WorkerOptions(gpus=tuple(g.strip() for g in gpus.split(",") if g.strip()),
                                  compile_workers=default_compile_workers() if compile_workers is None
                                  else compile_workers, compile_timeout=compile_timeout,
                                  run_timeout=run_timeout),
            settings=MeasureSettings(rel_noise=rel_noise, max_seconds=max_seconds, cold_l2=cold_l2),
            replay=ReplayOptions(replay, replay_seconds) if replay is not None else None,
            shared=SharedOptions(storage, study, heartbeat) if storage else None,
            compile_only=compile_only, resume=resume, journal=journal, worker=worker,
        )
        checked = check_options(opts)  # the banner below comes after every input is found good
    if replay is not None:
        console.print(f"[yellow]Replaying recorded measurements from {escape(str(replay))}: no kernel runs on this "
                      f"machine.", soft_wrap=True)
    try:
        with (_interrupt_is_one_line(f"every finished candidate is in {opts.journal_path}; the same command "
                                     f"resumes from it"), _bad_input_is_one_line(), RichObserver(console) as observer):
            results = run_sweep(opts, observer, checked=checked)
    except HardwareMissing as e:
        _fail(f"{e}; --replay JOURNAL replays a recorded sweep here", EXIT_NO_HARDWARE)
    if need := next((r.static_only for r in results if r.static_only), None):
        console.print(f"[yellow]Compile-only sweep: no timings on this machine; timings need {escape(need)}. "
                      f"Candidates are ranked by the kernel's offline compile and cost model (modelled µs, "
                      f"never measured); no table written.", soft_wrap=True)
    from kerneltune.registry import load_kernel
    from kerneltune.report.configs import config_text

    defaults = load_kernel(opts.kernel).tile_defaults
    table = Table(title=f"{opts.kernel}: {opts.search.strategy} sweep (configs: what differs from the defaults; "
                        f"the journal has each whole)")
    table.add_column("bucket", no_wrap=True)  # a name is read whole, as the space gives it
    for col in ("measured", "pruned", "failures", "best config", "median µs", "TFLOP/s"):
        table.add_column(col, overflow="fold")  # wrapped, never cut: a config must be readable whole
    for r in results:
        e = r.entry
        fails = ", ".join(f"{k} {v}" for k, v in sorted(r.failures.items())) or "-"
        table.add_row(r.bucket, f"{r.measured} (+{r.skipped} resumed)", str(r.pruned_by_constraints), fails,
                      config_text(e["config"], defaults) if e else
                      config_text(r.best["tiles"], defaults) if r.best else "-",
                      f"{e['median_us']:.1f}" if e else f"modelled {r.best['score']:.1f}" if r.best else "-",
                      f"{e['tflops']:.0f}" if e and e.get("tflops") else "-")
    console.print(table)
    if replay is not None and (missing := sum(r.failures.get("unsupported", 0) for r in results)):
        console.print(f"[yellow]{missing} candidates of {escape(_shown(opts.space_path))} are not in the replayed "
                      f"journal: it was recorded on another space.\n{_space_hint(replay)}", soft_wrap=True)
    if replay is None:
        _print_phases([p for r in results for p in r.phases], opts.workers.compile_workers, "")
    if need:
        _print_modelled_ranking(opts.journal_path, [r.bucket for r in results], defaults)
    stale = sorted({r.bucket for r in results if r.entry and "replayed_from" in r.entry["stamps"]})
    for path in sorted({r.entry["table"] for r in results if r.entry}):
        hint = "" if stale else f" (the runtime reads it once installed: kerneltune install {path})"
        console.print(f"table: {escape(str(path))}{hint}", soft_wrap=True)
    if stale:
        console.print(f"[yellow]A replay wrote {', '.join(stale)}: recorded stamps, never installed.",
                      soft_wrap=True)
    console.print(f"journal: {opts.journal_path}")


def _shown(path: Path) -> str:
    """``path`` as short as a terminal line wants it: relative to the working folder where it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _space_hint(journal: Path) -> str:
    """Where a recorded sweep's space probably is: a ``space.toml`` in the journal's folder or up to 3 above."""
    start = journal.resolve() if journal.is_dir() else journal.resolve().parent
    for folder in [start, *start.parents][:4]:
        if (folder / "space.toml").is_file():
            return f"Replay it with --space {escape(_shown(folder / 'space.toml'))}"
    return "Replay it with the space it was swept on (--space)."


@app.command()
def verify(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. ranker-attention.")],
    table: Annotated[Path | None, typer.Option(help="Tuned table (default: the tables the runtime reads for this "
                                                    "GPU, the user's and the shipped one; on a machine without the "
                                                    "kernel's GPU, every shipped table, checked as far as it can "
                                                    "be here).")] = None,
    emulate: Annotated[bool, typer.Option(help="Check the kernel's launch in its CPU emulation instead "
                                               "(kernels that have one: drafter-wide).")] = False,
    interpret: Annotated[bool, typer.Option(help="Run the kernel's own compiled program in the CPU interpreter "
                                                 "on its small shapes instead (drafter-wide).")] = False,
    bucket: Annotated[list[str] | None, typer.Option(help="Check only this bucket's entry (repeatable).")] = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here: one test case per entry and "
                                                    "fallback (passed, failed with the figures, or skipped with "
                                                    "the reason), for CI systems to show.")] = None,
) -> None:
    """Re-check tuned tables here: stamps, correctness, time against rivals.

    Exit codes: 0 everything checked on the target and passed; 1 wrong or slower; 2 the target hardware
    is absent (what could be checked here is shown, with its verdict); 3 bad input (a missing or
    malformed table, an unknown kernel); 130 interrupted (the JUnit keeps every verdict reached)."""
    import tempfile

    from kerneltune.registry import canonical_name, load_kernel
    from kerneltune.tuning.verify import EntryReport, VerifyRefused, verify_tables, worst_exit_code

    name = canonical_name(kernel)
    with _bad_input_is_one_line():
        plugin = load_kernel(name)
    if emulate and interpret:
        _fail("verify: --emulate and --interpret are two ways to check on the CPU; pick one")
    if emulate:
        given = [o for o, v in (("--table", table), ("--bucket", bucket), ("--junit", junit)) if v]
        if given:
            _fail(f"verify --emulate checks the launch in its CPU emulation, not a table: drop {', '.join(given)}")
        _verify_emulated(kernel, plugin)
    if interpret:
        given = [o for o, v in (("--table", table), ("--bucket", bucket)) if v]
        if given:
            _fail(f"verify --interpret runs the compiled kernel on its small shapes, not a table: drop "
                  f"{', '.join(given)}")
        _verify_interpreted(kernel, plugin, junit)
    if junit is not None:
        _writable_file(junit, "--junit")

    def progress(r: EntryReport) -> None:
        console.print(f"{r.bucket}: {r.correctness}, {r.verdict}", soft_wrap=True)

    with tempfile.TemporaryDirectory(prefix="kerneltune-verify-") as work:
        try:
            run = verify_tables(name, table, Path(work), on_entry=progress, buckets=tuple(bucket or ()))
        except VerifyRefused as e:
            _fail(str(e), e.exit_code)
    tables, reports = run.tables, run.reports
    for report in reports:
        _print_verify_report(name, report, plugin.tile_defaults)
    from kerneltune.tuning.compile_ahead import default_compile_workers

    _print_phases([p for r in reports for p in r.phases], default_compile_workers(), "verify: ")
    if junit is not None:
        from kerneltune.report.junit import write_junit

        with _bad_input_is_one_line():
            write_junit(junit, name, reports)
        console.print(f"JUnit: {junit}")
    if reports[-1].interrupted:
        unread = len(tables) - len(reports)
        _fail(f"{reports[-1].notes[-1]} of {reports[-1].table}"
              + (f", {unread} more table(s) not read" if unread else "")
              + (f"; the JUnit at {junit} holds every verdict reached" if junit is not None else ""),
              EXIT_INTERRUPTED)
    raise typer.Exit(worst_exit_code([r.exit_code for r in reports]))


def _print_phases(phases: list[dict[str, Any]], compile_workers: int, prefix: str) -> None:
    """Where the candidates' time went (``tuning/phases.py``), when any record carries its phases."""
    from kerneltune.tuning.phases import summarize

    if summary := summarize(phases, compile_workers):
        for line in summary.lines():
            console.print(f"{prefix}{line}", soft_wrap=True)


def _writable_file(path: Path, option: str) -> None:
    """Fail now, naming the option, where ``path`` could not be written at the end of a long run."""
    if path.is_dir():
        _fail(f"{option} {path}: is a folder; give a file name")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir():
        _fail(f"{option} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        _fail(f"{option} {path}: {folder} is not writable")


def _print_verify_report(name: str, report: VerifyReport, defaults: Mapping[str, Any]) -> None:
    """The report's table, its notes; a table that could not be read ends the command (exit 3)."""
    from kerneltune.report.configs import config_text

    out = Table(title=f"verify {name}: {report.table} (configs: what differs from the defaults)")
    for col in ("bucket", "config", "stamps", "correctness", "recorded µs", "now µs", "heuristic µs", "verdict"):
        out.add_column(col, overflow="fold")
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    for r in report.entries:
        differ = ", ".join(m.split(":")[0] for m in r.stamps)
        config = config_text(r.config, defaults)
        heuristic = "= tuned" if r.heuristic_is_tuned else fmt(r.heuristic_us)
        out.add_row(r.bucket, config, "match" if not r.stamps else f"differ: {differ}", r.correctness,
                    fmt(r.recorded_us), fmt(r.now_us), heuristic, ("[red]" if r.failed else "") + r.verdict)
    if report.entries:
        console.print(out)
    if report.exit_code == EXIT_BAD_INPUT:
        _fail("; ".join(report.notes))
    for note in report.notes:
        console.print(escape(note), soft_wrap=True)


def _print_modelled_ranking(journal: Path, buckets: list[str], defaults: Mapping[str, Any]) -> None:
    from kerneltune.report.configs import config_text
    from kerneltune.report.modelled import modelled_ranking

    for bucket in buckets:
        rows = modelled_ranking(journal, bucket)
        if not rows:
            continue
        out = Table(title=f"{bucket}: modelled, not measured (cost model rank beside the static score's)")
        for col in ("model rank", "config", "µs/layer", "of floor", "static-score rank", "static score"):
            out.add_column(col, overflow="fold")
        for r in rows:
            out.add_row(str(r.rank), config_text(r.tiles, defaults), f"{r.us_per_layer:.1f}",
                        f"{r.fraction_of_floor:.2f}", str(r.static_rank), f"{r.static_score:.0f}")
        console.print(out)


def _verify_emulated(kernel: str, plugin: Kernel) -> None:
    from kerneltune.protocols import Capability, Emulation

    if Capability.EMULATE not in plugin.capabilities:
        _fail(f"{kernel} has no CPU emulation")
    checks = cast(Emulation, plugin).emulate()
    _print_checks(f"verify {kernel} --emulate: 4 ranks, every block a coroutine, against the float64 model", checks)
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


def _verify_interpreted(kernel: str, plugin: Kernel, junit: Path | None) -> None:
    from kerneltune.protocols import Capability, Interpretation

    if Capability.INTERPRET not in plugin.capabilities:
        _fail(f"{kernel} has no CPU interpreter run")
    if junit is not None:
        _writable_file(junit, "--junit")
    checks = cast(Interpretation, plugin).interpret()
    _print_checks(f"verify {kernel} --interpret: the compiled kernel, 4 ranks, every lane on the CPU", checks)
    if junit is not None:
        from kerneltune.report.junit import write_checks_junit

        with _bad_input_is_one_line():
            write_checks_junit(junit, kernel, "interpret", checks)
        console.print(f"JUnit: {junit}")
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)


def _print_checks(title: str, checks: list) -> None:
    layouts = list(dict.fromkeys(c.layout for c in checks))
    out = Table(title=title + (f" ({layouts[0]})" if len(layouts) == 1 else ""))
    columns = ("layout",) * (len(layouts) > 1) + ("shape", "numbers", "schedule", "rel. error", "bound", "blocks",
                                                  "resumes", "verdict")
    for col in columns:
        out.add_column(col)
    for c in checks:
        out.add_row(*(c.layout,) * (len(layouts) > 1), c.shape, c.numbers, c.schedule, f"{c.worst_error:.1e}",
                    "same bits" if c.tolerance < 1e-300 else f"{c.tolerance:.1e}", str(c.blocks), str(c.resumes),
                    "ok" if c.ok else f"[red]{c.error or 'mismatch'}")
    console.print(out)


def targets_table(verdicts: list[dict], title: str) -> Table:
    """A bench's target verdicts: value against threshold, met / missed / n/a, and how the value was taken."""
    table = Table(title=title)
    for col in ("target", "shape", "cap", "value", "at least", "verdict", "how"):
        table.add_column(col)
    colour = {"met": "green", "missed": "red"}
    for v in verdicts:
        value = "-" if v["value"] is None else f"{v['value']:.2f}"
        verdict = v["verdict"]
        table.add_row(v["target"], v["shape"], v.get("cap_method", ""), value, f"{v['at_least']:g}",
                      f"[{colour[verdict]}]{verdict}[/]" if verdict in colour else verdict, v.get("note", ""))
    return table


@app.command()
def install(
    tables: Annotated[list[Path], typer.Argument(help="Tables a live sweep wrote (OUT/tables/<device-kind>/"
                                                      "<kernel>.json).")],
    to: Annotated[Path | None, typer.Option(help="Tables folder to install into (default: the user's, "
                                                 "$KERNELTUNE_TABLES or the per-user data folder; a maintainer "
                                                 "gives kerneltune/tables/shipped to ship them).")] = None,
) -> None:
    """Install a sweep's tables where the runtime reads them (over the shipped ones).

    Entries overlay the installed table bucket by bucket; a table made by a replay is refused."""
    from kerneltune.tables.install import install_table
    from kerneltune.tables.locations import user_tables_dir

    root = to or user_tables_dir()
    for table in tables:
        with _bad_input_is_one_line():
            dest, n = install_table(table, root)
        console.print(f"installed {n} entries of {escape(str(table))} into {escape(str(dest))}", soft_wrap=True)
        if _digests_programs(dest.stem):
            console.print(f"to carry it across a later kernel change, record its programs now (any host): "
                          f"kerneltune rekey {dest.stem} --table {escape(str(dest))}", soft_wrap=True)


def _digests_programs(kernel: str) -> bool:
    """Whether the registered kernel of that name can digest its programs (``kerneltune rekey``)."""
    from kerneltune.protocols import Capability
    from kerneltune.registry import KERNELS, load_kernel

    return kernel in KERNELS and Capability.PROGRAM_DIGEST in load_kernel(kernel).capabilities


@app.command()
def rekey(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. ranker-attention.")],
    table: Annotated[list[Path] | None, typer.Option(help="Tuned table (repeatable; default: every table of the "
                                                          "kernel the runtime may read, the user's and the "
                                                          "shipped ones, for every device kind).")] = None,
) -> None:
    """Carry tuned tables across a kernel change that left their programs as they were (any host).

    Each entry's configs are lowered here and digested without the source text: under the current kernel
    hash the digests are recorded; a stale entry whose programs all digest as recorded takes the current
    hash (the old one kept in stamps.rekeyed_from); the others stay stale and are named, with the sweep
    that re-measures them. Exit codes: 0 every entry is current; 1 entries stay stale; 3 bad input (a
    missing or malformed table, a kernel that cannot digest its programs)."""
    from kerneltune.registry import canonical_name, load_kernel
    from kerneltune.tables.locations import table_roots
    from kerneltune.tuning.rekey import RekeyItem, rekey_table

    name = canonical_name(kernel)
    with _bad_input_is_one_line():
        tables_of = load_kernel(name).name  # a kernel given by import path names its tables by its own name
    paths = table or sorted({p for root in table_roots() for p in root.glob(f"*/{tables_of}.json")})
    if not paths:
        _fail(f"rekey {kernel}: no tuned table of {tables_of} under {' or '.join(str(r) for r in table_roots())}")
    def show(item: RekeyItem) -> None:
        mark = "green" if item.current else "yellow"
        console.print(f"{escape(item.bucket)}: [{mark}]{item.outcome}[/] {escape(item.detail)}", soft_wrap=True)

    stale: list[str] = []
    for path in paths:
        console.print(f"{escape(str(path))}:", soft_wrap=True)
        with _bad_input_is_one_line():
            report = rekey_table(name, path, on_item=show)
        for note in report.notes:
            console.print(f"[yellow]{escape(note)}", soft_wrap=True)
        if report.stale_buckets:
            buckets = " ".join(f"--bucket {b}" for b in report.stale_buckets)
            console.print(f"stale under kernel {report.kernel_hash}; re-measure: kerneltune sweep {kernel} "
                          f"--contenders {escape(str(path))} {buckets}", soft_wrap=True)
            stale += report.stale_buckets
    raise typer.Exit(EXIT_FAILED if stale else 0)


@app.command()
def report(
    results: Annotated[Path, typer.Argument(help="A journal, or a folder searched for journals.")],
    csv: Annotated[Path | None, typer.Option(help="Write one CSV row per candidate here.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML report here.")] = None,
    baseline: Annotated[Path | None, typer.Option(help="A tuned table (or folder) to compare each bucket with.")]
    = None,
    bench: Annotated[Path | None, typer.Option(help="A `kerneltune bench` result JSON: its target verdicts, and a "
                                                    "section of the HTML report.")] = None,
) -> None:
    """CSV and HTML reports of sweeps for CI: rankings, charts, failures, baseline."""
    from kerneltune.report.frame import journal_files, load_baseline, load_frame, write_csv
    from kerneltune.report.html import render_html

    with _bad_input_is_one_line():
        frame = load_frame(results)
        base = load_baseline(baseline, frame) if baseline else None
    if csv:
        with _bad_input_is_one_line():
            write_csv(frame, csv)
        console.print(f"CSV: {csv} ({len(frame)} rows)")
    bench_result, targets = None, None
    if bench:
        from kerneltune.report.bench_result import read_bench_result

        try:
            read = read_bench_result(bench)
        except ValueError as e:
            _fail(str(e))
        bench_result, targets = read.data, (read.targets, read.source)
        console.print(targets_table(read.targets, f"bench targets ({read.source})") if read.targets
                      else f"bench: {read.source}", soft_wrap=True)
    if html:
        with _bad_input_is_one_line():
            render_html(frame, len(journal_files(results)), base, html, bench_result, targets)
        console.print(f"HTML: {html}")
    summary = frame.groupby(["bucket", "status"]).size().unstack(fill_value=0)
    out = Table(title=f"{len(frame)} candidates")
    out.add_column("bucket")
    for c in summary.columns:
        out.add_column(str(c))
    for b, row in summary.iterrows():
        out.add_row(str(b), *(str(v) for v in row))
    console.print(out)


@app.command()
def bench(
    kernel: Annotated[str, typer.Argument(help="Kernel name, e.g. ranker-attention.")],
    shapes: Annotated[Path | None, typer.Option(help="Shapes TOML (default: the kernel's standard shapes in "
                                                     "search_spaces/).")] = None,
    baselines: Annotated[str | None, typer.Option(help="Comma-separated baselines (default: every one the kernel "
                                                       "declares).")] = None,
    out: Annotated[Path, typer.Option(help="Folder of the results JSON (DATE-DEVICE.json).")]
    = Path("kerneltune-out/bench"),
    resume: Annotated[bool, typer.Option(help="Continue today's results JSON: the shapes it holds are kept, not "
                                               "run again; refused if it was measured on another system or "
                                               "kernel source.")] = False,
) -> None:
    """Time the tuned kernel beside its baselines, on the same inputs, against targets."""
    import os

    from kerneltune.protocols import Benchmarks, Capability
    from kerneltune.registry import load_backend, load_kernel

    # JAX and torch share the GPU here: JAX must not take 75% of its memory up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    with _bad_input_is_one_line():
        plugin = load_kernel(kernel)
    if Capability.BENCH not in plugin.capabilities:
        _fail(f"{kernel} declares no benchmarks")
    benches = cast(Benchmarks, plugin)
    need = plugin.supported_on(load_backend(plugin.backend).stamps())
    if need is not None:
        _fail(f"bench {kernel} needs {need}", EXIT_NO_HARDWARE)
    which = tuple(b.strip() for b in baselines.split(",") if b.strip()) if baselines else benches.baselines
    with (_interrupt_is_one_line(f"the results file under {out} holds every shape finished; --resume continues it"),
          _bad_input_is_one_line()):
        path, rows, verdicts = benches.run_bench(shapes or SPACES / benches.bench_shapes(), which, out, resume)
    table = Table(title=f"bench {kernel}: {path}")
    for _, header, _ in benches.bench_columns:
        table.add_column(header)
    table.add_column("error")
    for r in rows:
        table.add_row(*("-" if r.get(key) is None else format(r[key], spec) for key, _, spec in benches.bench_columns),
                      (r.get("error") or "")[:60])
    console.print(table)
    if verdicts:
        console.print(targets_table(verdicts, "targets (ratios in this run)"))
