"""The ``kerneltune`` command line: it parses, then calls one function per command (``commands.py``).

Exit codes: 0 everything checked on the target passed; 1 wrong or slower; 2 the target hardware is
absent (the line says which); 3 bad input (a file, a name or an option; the line names it); 130
interrupted (SIGINT or SIGTERM; the line says what was kept). A failure is one line on stderr;
``--debug`` adds the traceback.
"""

from __future__ import annotations

import logging
import signal
from typing import Annotated, Any

import typer
from rich.markup import escape

from kerneltune import __version__
from kerneltune.seams.limits import CANDIDATE_MAX_SECONDS, COMPILE_TIMEOUT_S, RUN_TIMEOUT_S

from . import commands, failures, terminal
from . import options as o
from .render import console


class _Cli(typer.Typer):
    """The app as the ``kerneltune`` command runs it: the process's streams, logs and working folder made safe
    first (``terminal.prepare``); a test's CliRunner invokes the commands without this."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        terminal.prepare()
        if (problem := terminal.working_folder_problem()) is not None:
            failures.errors.print(f"[red]error:[/red] {escape(problem)}", soft_wrap=True, highlight=False)
            raise SystemExit(failures.EXIT_BAD_INPUT)
        return super().__call__(*args, **kwargs)


app = _Cli(cls=failures.UsageIsBadInput,
                  help="Tune, verify and ship GPU kernels with their best configuration for every GPU and shape."
                       "\n\nExit codes: 0 everything checked on the target passed; 1 wrong or slower; 2 the target "
                       "hardware is absent (what could be checked here was); 3 bad input (a file, a name, an "
                       "option); 4 correct, but a speed not judged (verify: timings did not settle); 130 "
                       "interrupted (SIGINT or SIGTERM; the line says what was kept).",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  # Plain help, wrapped at 100 columns: Rich's help panels cut long values at the terminal's
                  # 80 ("search_spaces/KERNEL…") and label every flag "<bool>".
                  context_settings={"max_content_width": 100, "terminal_width": 100})


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
    failures.debug = debug
    signal.signal(signal.SIGTERM, failures.sigterm_is_an_interrupt)
    logging.getLogger("kerneltune").setLevel(logging.INFO if verbose else logging.WARNING)  # Optuna follows it


@app.command()
def sweep(kernel: o.Kernel, space: o.Space = None, bucket: o.Bucket = None, strategy: o.Strategy = "exhaustive",
          budget: o.Budget = None, seed: o.Seed = 0, contenders: o.Contenders = None, warm_start: o.WarmStart = True,
          gpus: o.Gpus = "", out: o.Out = o.DEFAULT_OUT, replay: o.Replay = None, storage: o.Storage = None,
          study: o.Study = None, worker: o.Worker = None, heartbeat: o.Heartbeat = 10.0,
          replay_seconds: o.ReplaySeconds = 0.0, compile_only: o.CompileOnly = False, resume: o.Resume = True,
          early_stop: o.EarlyStop = True, early_stop_factor: o.EarlyStopFactor = 1.5, playoff: o.Playoff = True,
          journal: o.Journal = None, compile_workers: o.CompileWorkers = None, rel_noise: o.RelNoise = 0.01,
          max_seconds: o.MaxSeconds = CANDIDATE_MAX_SECONDS, cold_l2: o.ColdL2 = False,
          compile_timeout: o.CompileTimeout = COMPILE_TIMEOUT_S, run_timeout: o.RunTimeout = RUN_TIMEOUT_S,
          from_ledger: o.FromLedger = False, ledger_path: o.LedgerPath = None, top: o.Top = None) -> None:
    """Compile, check and time every candidate; journal each; write tuned tables.

    The tables land in the working folder (--out); `kerneltune install` puts them where the runtime reads."""
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.registry import kernel_argument
    from kerneltune.tuning.compile_ahead import default_compile_workers
    from kerneltune.tuning.pruning import EarlyStop, NoPruning
    from kerneltune.tuning.sweep import (
        ReplayOptions,
        SearchOptions,
        SharedOptions,
        SweepOptions,
        WorkerOptions,
    )

    with failures.bad_input_is_one_line():
        if replay is None and replay_seconds != 0:
            raise ValueError("--replay-seconds: it paces a replay; give --replay JOURNAL too")
        pruner = EarlyStop(early_stop_factor) if early_stop else NoPruning()
        opts = SweepOptions(
            kernel=kernel_argument(kernel), space_path=space, out=out, buckets=tuple(bucket or ()),
            search=SearchOptions(strategy=strategy.lower(), budget=budget, seed=seed, contenders=contenders,
                                 warm_start=warm_start, pruner=pruner,
                                 playoff=playoff),
            workers=WorkerOptions(gpus=tuple(g.strip() for g in gpus.split(",") if g.strip()),
                                  compile_workers=default_compile_workers() if compile_workers is None
                                  else compile_workers, run_timeout=run_timeout),
            settings=MeasureSettings(rel_noise=rel_noise, max_seconds=max_seconds, cold_l2=cold_l2,
                                     compile_timeout=compile_timeout),
            replay=ReplayOptions(replay, replay_seconds) if replay is not None else None,
            shared=SharedOptions(storage, study, heartbeat) if storage else None,
            compile_only=compile_only, resume=resume, journal=journal, worker=worker, from_ledger=from_ledger,
            ledger=ledger_path, top=top)
    commands.sweep(opts)


@app.command()
def verify(kernel: o.Kernel, table: o.Table = None, emulate: o.Emulate = False, interpret: o.Interpret = False,
           interleavings: o.Interleavings = None, bucket: o.VerifyBucket = None, junit: o.Junit = None,
           require_timing: o.RequireTiming = False) -> None:
    """Re-check tuned tables here: stamps, correctness, time against rivals.

    The winner, its rivals and the heuristic are timed in interleaved rounds. Verdicts: ok (correct, not
    slower than a rival timed beside it; "a tie" where a rival ran faster within the noise), slower (naming
    the rival and the interval), stale, unsettled (correct, but whether a rival beats it stayed in doubt:
    speed not judged), or the failed check. Exit codes: 0 everything checked on the target and passed; 1
    wrong, slower or stale; 2 the target hardware is absent, or its times here mean nothing (an interpreter
    on the CPU): what could be checked here is shown, with its verdict; 3 bad input (a missing or malformed
    table, an unknown kernel); 4 correct, but some entry unsettled; 130 interrupted (the JUnit keeps every
    verdict reached)."""
    commands.verify(kernel, table, emulate, interpret, tuple(bucket or ()), junit, interleavings, require_timing)


@app.command()
def install(tables: o.Tables, to: o.To = None) -> None:
    """Install a sweep's tables where the runtime reads them (over the shipped ones).

    Entries overlay the installed table bucket by bucket; a table made by a replay is refused."""
    commands.install(tables, to)


@app.command()
def rekey(kernel: o.Kernel, table: o.RekeyTables = None) -> None:
    """Carry tuned tables across a kernel change that left their programs as they were (any host).

    Each entry's configs are lowered here and digested without the source text: under the current kernel
    hash the digests are recorded; a stale entry whose programs all digest as recorded takes the current
    hash (the old one kept in stamps.rekeyed_from); the others stay stale and are named, with the sweep
    that re-measures them. Exit codes: 0 every entry is current; 1 entries stay stale; 3 bad input (a
    missing or malformed table, a kernel that cannot digest its programs)."""
    commands.rekey(kernel, table)


@app.command()
def report(results: o.Results = None, csv: o.Csv = None, html: o.Html = None, baseline: o.Baseline = None,
           bench: o.BenchResult = None, ledger: o.Ledger = False, ledger_path: o.LedgerPath = None) -> None:
    """CSV and HTML reports of sweeps for CI: rankings, charts, failures, baseline; or, with --ledger, the
    share of the recorded traffic each table serves."""
    if ledger:
        commands.coverage(results, ledger_path, csv, html, baseline, bench)
        return
    if ledger_path is not None:
        failures.fail("report: --ledger-path names the ledger --ledger reports on; add --ledger")
    if results is None:
        failures.fail("report: give RESULTS (a journal or a folder of them), or --ledger for the miss ledger's "
                      "coverage")
    commands.report(results, csv, html, baseline, bench)


@app.command()
def bench(kernel: o.Kernel, shapes: o.Shapes = None, baselines: o.Baselines = None,
          out: o.BenchOut = o.DEFAULT_BENCH_OUT, resume: o.BenchResume = False) -> None:
    """Time the tuned kernel beside its baselines, on the same inputs, against targets."""
    commands.bench(kernel, shapes, baselines, out, resume)


__all__ = ["app"]
