"""One function per command: call the engine with what the command line gave, print through ``render``,
end with the documented exit code."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, cast

import typer

from kerneltune.files.paths import SPACES
from kerneltune.seams.protocols import Benchmarks, Capability, Emulation, Interpretation, Kernel
from kerneltune.seams.registry import KERNELS, canonical_name, load_backend, load_kernel

from . import render
from .failures import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_HARDWARE,
    bad_input_is_one_line,
    fail,
    interrupt_is_one_line,
    writable_file,
)


def sweep(opts: Any) -> None:
    """``opts``: the sweep's ``SweepOptions``."""
    from kerneltune.tuning.sweep import HardwareMissing, check_options, run_sweep

    from .progress import RichObserver

    with bad_input_is_one_line():
        checked = check_options(opts)  # the banner below comes after every input is found good
        journal = opts.journal_path
    kernel = checked.kernel
    for text in (*checked.notes, *_weaker_check(kernel)):
        render.note(text)
    if opts.replay is not None:
        render.note(f"Replaying recorded measurements from {opts.replay.journal}: no kernel runs on this machine.")
    try:
        with (interrupt_is_one_line(f"every finished candidate is in {journal}; the same command resumes from it"),
              bad_input_is_one_line(), RichObserver(render.console) as observer):
            results = run_sweep(opts, observer, checked=checked)
    except HardwareMissing as e:
        fail(f"{e}; --replay JOURNAL replays a recorded sweep here", EXIT_NO_HARDWARE)
    need = next((r.static_only for r in results if r.static_only), None)
    if need:
        render.note(f"Compile-only sweep: no timings on this machine; timings need {need}. Candidates are ranked "
                    f"by the kernel's offline compile and cost model (modelled µs, never measured); no table written.")
    render.sweep_summary(kernel.name, opts.search.strategy, results, kernel.config_defaults)
    render.first_failures(results)
    render.playoffs(results, kernel.config_defaults)
    render.unsettled(results)
    render.remeasured(results)
    if void := next((r.void_timings for r in results if r.void_timings), None):
        render.note(f"{void}: the sweep measured as it always does, but its winners are no tuning for that GPU; the "
                    f"table's entries say so (void_timings), and verify and the runtime's lookup repeat it")
    if opts.replay is not None and (missing := sum(r.failures.get("unsupported", 0) for r in results)):
        render.note(f"{missing} candidates of {render.shown(checked.space.path)} are not in the replayed journal: "
                    f"it was recorded on another space.\n{render.space_hint(opts.replay.journal)}")
    if opts.replay is None:
        render.phases([p for r in results for p in r.phases], opts.workers.compile_workers, "")
    if need:
        render.modelled_ranking(journal, [r.bucket for r in results], kernel.config_defaults)
    render.tables_written(results, journal)
    if not need and (empty := [r for r in results if r.entry is None]):
        fail("; ".join(f"bucket {r.bucket}: no candidate verified and timed" + _commonest(r) for r in empty)
             + f"; no table entry written for it (the journal {journal} has each candidate's error)", EXIT_FAILED)


def _weaker_check(kernel: Any) -> list[str]:
    """The line a kernel checked against its own first config (no reference) carries in every report."""
    from kerneltune.author.autotuned import check_note

    note = check_note(kernel)
    return [note] if note else []


def _commonest(result: Any) -> str:
    if not result.failures:
        return ""
    (why, n), = result.failures.most_common(1)
    return f" (the commonest failure: {why}, {n} of {sum(result.failures.values())})"


def verify(kernel: str, table: Path | None, emulate: bool, interpret: bool, buckets: tuple[str, ...],
           junit: Path | None, interleavings: int | None = None, require_timing: bool = False) -> None:
    from kerneltune.tuning.compile_ahead import default_compile_workers
    from kerneltune.tuning.verify import VerifyRefused, verify_tables, worst_exit_code

    name = canonical_name(kernel)
    with bad_input_is_one_line():
        plugin = load_kernel(name)
    if emulate and interpret:
        fail("verify: --emulate and --interpret are two ways to check on the CPU; pick one")
    if interleavings is not None and not interpret:
        fail("verify: --interleavings chooses how many schedules --interpret runs; add --interpret")
    if emulate or interpret:
        given = [o for o, v in (("--table", table), ("--bucket", buckets), ("--junit", junit and emulate)) if v]
        if given:
            fail(f"verify --{'emulate' if emulate else 'interpret'} checks the kernel on the CPU, not a table: drop "
                 f"{', '.join(given)}")
        _verify_on_the_cpu(kernel, plugin, emulate, junit, interleavings)
    if junit is not None:
        writable_file(junit, "--junit")
    with tempfile.TemporaryDirectory(prefix="kerneltune-verify-") as work:
        try:
            run = verify_tables(name, table, Path(work), on_entry=render.verify_progress, buckets=buckets,
                                require_timing=require_timing)
        except VerifyRefused as e:
            fail(str(e), e.exit_code)
    for text in _weaker_check(plugin):
        render.note(text)
    said: set[str] = set()  # a note that holds for every table (speed not judged here, and why) is said once
    for report in run.reports:
        render.verify_report(plugin.name, report, plugin.config_defaults)
        if report.exit_code == EXIT_BAD_INPUT:
            fail("; ".join(report.notes))
        for text in report.notes:
            if text not in said:
                render.line(text)
                said.add(text)
    render.phases([p for r in run.reports for p in r.phases], default_compile_workers(), "verify: ")
    render.verdict_counts([e for r in run.reports for e in r.entries])
    if junit is not None:
        from kerneltune.report.junit import write_junit

        with bad_input_is_one_line():
            write_junit(junit, name, run.reports)
        render.line(f"JUnit: {junit}")
    if run.reports[-1].interrupted:
        unread = len(run.tables) - len(run.reports)
        fail(f"{run.reports[-1].notes[-1]} of {run.reports[-1].table}"
             + (f", {unread} more table(s) not read" if unread else "")
             + (f"; the JUnit at {junit} holds every verdict reached" if junit is not None else ""), EXIT_INTERRUPTED)
    raise typer.Exit(worst_exit_code([r.exit_code for r in run.reports]))


def _verify_on_the_cpu(kernel: str, plugin: Kernel, emulate: bool, junit: Path | None,
                       interleavings: int | None = None) -> None:
    """``verify --emulate`` (the launch emulated against the float64 model) or ``--interpret`` (the compiled
    program run lane by lane); each ends the command."""
    need = Capability.EMULATE if emulate else Capability.INTERPRET
    if need not in plugin.capabilities:
        fail(f"{kernel} has no CPU {'emulation' if emulate else 'interpreter run'}")
    if junit is not None:
        writable_file(junit, "--junit")
    if emulate:
        results = cast(Emulation, plugin).emulate()
        render.checks(f"verify {kernel} --emulate: 4 ranks, every block a coroutine, against the float64 model",
                      results)
    else:
        # an environment it cannot use (KERNELTUNE_INTERPRET_WORKERS=0), a machine with too little memory
        with bad_input_is_one_line():
            render.line(f"verify {kernel} --interpret {cast(Interpretation, plugin).interpret_plan(interleavings)}")
            results = cast(Interpretation, plugin).interpret(interleavings)
        render.checks(f"verify {kernel} --interpret: the compiled kernel, 4 ranks, every lane on the CPU", results)
        if junit is not None:
            from kerneltune.report.junit import write_checks_junit

            with bad_input_is_one_line():
                write_checks_junit(junit, kernel, "interpret", results)
            render.line(f"JUnit: {junit}")
    raise typer.Exit(0 if all(c.ok for c in results) else EXIT_FAILED)


def install(tables: list[Path], to: Path | None) -> None:
    from kerneltune.tables.install import install_table
    from kerneltune.tables.locations import user_tables_dir

    root = to or user_tables_dir()
    done: list[str] = []
    for table in tables:
        kept = (f"installed before it: {', '.join(done)}; " if done else "nothing installed; ") + \
            f"every installed table is whole, as it was or with {table}'s entries"
        with interrupt_is_one_line(kept), bad_input_is_one_line():
            dest, n = install_table(table, root)
        done.append(str(table))
        render.line(f"installed {n} entries of {table} into {dest}")
        if dest.stem in KERNELS and Capability.PROGRAM_DIGEST in load_kernel(dest.stem).capabilities:
            render.line(f"to carry it across a later kernel change, record its programs now (any host): "
                        f"kerneltune rekey {dest.stem} --table {dest}")


def rekey(kernel: str, tables: list[Path] | None) -> None:
    from kerneltune.tables.locations import table_roots
    from kerneltune.tuning.rekey import RekeyItem, rekey_table

    name = canonical_name(kernel)
    with bad_input_is_one_line():
        tables_of = load_kernel(name).name  # a kernel given by path names its tables by its own name
    paths = tables or sorted({p for root in table_roots() for p in root.glob(f"*/{tables_of}.json")})
    if not paths:
        fail(f"rekey {kernel}: no tuned table of {tables_of} under {' or '.join(str(r) for r in table_roots())}")

    def show(item: RekeyItem) -> None:
        mark = "green" if item.current else "yellow"
        render.console.print(f"{render.escape(item.bucket)}: [{mark}]{item.outcome}[/] "
                             f"{render.escape(item.detail)}", soft_wrap=True)

    stale: list[str] = []
    for path in paths:
        render.line(f"{path}:")
        with bad_input_is_one_line():
            report = rekey_table(name, path, on_item=show)
        for text in report.notes:
            render.note(text)
        if report.stale_buckets:
            buckets = " ".join(f"--bucket {b}" for b in report.stale_buckets)
            render.line(f"stale under kernel {report.kernel_hash}; re-measure: kerneltune sweep {kernel} "
                        f"--contenders {path} {buckets}")
            stale += report.stale_buckets
    raise typer.Exit(EXIT_FAILED if stale else 0)


def report(results: Path, csv: Path | None, html: Path | None, baseline: Path | None, bench: Path | None) -> None:
    from kerneltune.report.frame import journal_files, load_baseline, load_frame, write_csv
    from kerneltune.report.html import render_html
    from kerneltune.report.ranking import ranked

    written: list[str] = []

    def kept() -> str:  # a report file is written whole or not at all: each one there is whole
        return (f"written: {', '.join(written)}; " if written else "") + "every report file there is whole"

    with interrupt_is_one_line(kept), bad_input_is_one_line():
        frame = load_frame(results)
        base = load_baseline(baseline, frame) if baseline else None
    if csv:
        with interrupt_is_one_line(kept), bad_input_is_one_line():
            write_csv(ranked(frame), csv)
        written.append(str(csv))
        render.line(f"CSV: {csv} ({len(frame)} rows)")
    bench_result, targets = None, None
    if bench:
        from kerneltune.report.bench_result import read_bench_result

        with bad_input_is_one_line():
            read = read_bench_result(bench)
        bench_result, targets = read.data, (read.targets, read.source)
        render.console.print(render.targets_table(read.targets, f"bench targets ({read.source})") if read.targets
                             else f"bench: {read.source}", soft_wrap=True)
    if html:
        with interrupt_is_one_line(kept), bad_input_is_one_line():
            render_html(frame, len(journal_files(results)), base, html, bench_result, targets)
        written.append(str(html))
        render.line(f"HTML: {html}")
    render.report_summary(frame)


def coverage(results: Path | None, ledger: Path | None, csv: Path | None, html: Path | None, baseline: Path | None,
             bench: Path | None) -> None:
    """``report --ledger``: the miss ledger's coverage, in the terminal, the CSV and the HTML."""
    from kerneltune.report.coverage import before_after, coverage_frame, percent, render_coverage_html
    from kerneltune.report.frame import write_csv
    from kerneltune.tables.ledger import ledger_folder, read_ledgers

    given = [o for o, v in (("RESULTS", results), ("--baseline", baseline), ("--bench", bench)) if v is not None]
    if given:
        fail(f"report --ledger reports the miss ledger (--ledger-path); drop {', '.join(given)} (a separate report "
             f"reads journals)")
    where = ledger or ledger_folder()
    with bad_input_is_one_line():
        ledgers = read_ledgers(where)
    for led in ledgers:
        for skipped in led.skipped:
            render.note(skipped)
    frame = coverage_frame(ledgers)
    if frame.empty:
        fail(f"report --ledger: {where} holds no recorded call (record them: KERNELTUNE_RECORD=1)")
    render.coverage(frame, str(where))
    for kernel, device, before, after, periods in before_after(frame):
        render.line(f"{kernel} on {device}: coverage {percent(before)} -> {percent(after)} "
                    f"({periods} state(s) of its tables)")
    if csv:
        with bad_input_is_one_line():
            write_csv(frame, csv)
        render.line(f"CSV: {csv} ({len(frame)} rows)")
    if html:
        with bad_input_is_one_line():
            render_coverage_html(frame, str(where), html)
        render.line(f"HTML: {html}")


def bench(kernel: str, shapes: Path | None, baselines: str | None, out: Path, resume: bool) -> None:
    with bad_input_is_one_line():
        plugin = load_kernel(kernel)
    if Capability.BENCH not in plugin.capabilities:
        fail(f"{kernel} declares no benchmarks")
    benches = cast(Benchmarks, plugin)
    backend = load_backend(plugin.backend)
    for key, value in backend.worker_env(None).items():  # the bench runs here as a timing worker would
        os.environ.setdefault(key, value)
    need = plugin.supported_on(backend.stamps())
    if need is not None:
        fail(f"bench {kernel} needs {need}", EXIT_NO_HARDWARE)
    which = tuple(b.strip() for b in baselines.split(",") if b.strip()) if baselines else benches.baselines
    with (interrupt_is_one_line(f"the results file under {out} holds every shape finished; --resume continues it"),
          bad_input_is_one_line()):
        path, rows, verdicts = benches.run_bench(shapes or SPACES / benches.bench_shapes(), which, out, resume)
    render.bench_rows(f"bench {kernel}: {path}", benches.bench_columns, rows)
    if verdicts:
        render.console.print(render.targets_table(verdicts, "targets (ratios in this run)"))
