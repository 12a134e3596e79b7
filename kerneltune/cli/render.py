"""What the commands print: Rich tables and lines, from the engine's results. Nothing here decides anything."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from kerneltune.report.configs import config_text
from kerneltune.report.rates import rate_text
from kerneltune.seams.wire import Status

from .terminal import SafeConsole, console_width

if TYPE_CHECKING:
    from kerneltune.seams.protocols import EmulationCheck
    from kerneltune.tuning.phases import BucketPhases
    from kerneltune.tuning.sweep import BucketResult
    from kerneltune.tuning.verify import EntryReport, VerifyReport

# Written to a file or a CI log, Rich would wrap tables at 80 columns and cut every config short; strings from files
# are shown with their control characters made visible (``SafeConsole``).
console = SafeConsole(width=console_width(1, 120))


def _wrapped(text: str) -> str:
    """``text`` wrapped at the console's width (120 columns in a log) between words only: a path stays whole, so
    that it can be copied from the output."""
    return "\n".join(textwrap.fill(part, console.width, break_long_words=False, break_on_hyphens=False)
                     for part in text.split("\n"))


def line(text: str) -> None:
    """Plain text (markup in it shown as written), wrapped between words."""
    console.print(escape(_wrapped(text)), highlight=False, overflow="ignore", crop=False)


def note(text: str) -> None:
    console.print(f"[yellow]{escape(_wrapped(text))}", highlight=False, overflow="ignore", crop=False)


def shown(path: Path) -> str:
    """``path`` as short as a terminal line wants it: relative to the working folder where it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def sweep_summary(kernel: str, strategy: str, results: list[BucketResult], defaults: Mapping[str, Any]) -> None:
    table = Table(title=f"{kernel}: {strategy} sweep",
                  caption="configs: what differs from the kernel's tile defaults (the journal has each whole)"
                  if defaults else None)
    table.add_column("bucket", no_wrap=True)  # a name is read whole, as the space gives it
    table.add_column("measured", justify="right")
    table.add_column("resumed", justify="right")
    table.add_column("refused", justify="right")
    table.add_column("stopped\nearly", justify="right")
    table.add_column("failures", overflow="fold")
    table.add_column("best config", overflow="fold", ratio=1)  # wrapped, never cut: readable whole
    table.add_column("median µs", justify="right")
    table.add_column("rate", justify="right")
    for r in results:
        e = r.entry
        fails = ", ".join(f"{k} {v}" for k, v in sorted(r.failures.items())) or "-"
        table.add_row(r.bucket, str(r.measured), str(r.skipped), str(r.pruned_by_constraints),
                      str(r.stopped_early), fails,
                      config_text(e.config, defaults) if e else
                      config_text(r.best.config, defaults) if r.best else "-",
                      f"{e.median_us:.1f}" if e else f"modelled {r.best.score:.1f}" if r.best else "-",
                      rate_text(e.tflops) if e else "-")
    console.print(table)


def playoffs(results: list[BucketResult], defaults: Mapping[str, Any]) -> None:
    """A line per bucket whose leaders were timed again head to head: the winner's margin and the ties; for one
    decided on separate medians, its closest rival."""
    for r in results:
        if r.playoff_note:
            note(f"playoff: {r.playoff_note}")
        p, e = r.playoff, r.entry
        if e is not None and p is None and e.rivals:
            rival = e.rivals[0]
            line(f"{r.bucket}: the winner decided on separate medians (no playoff); its closest rival "
                 f"{config_text(rival.config, defaults) or 'the defaults'} ran {100 * (rival.margin or 0.0):+.1f}% "
                 f"(the entry keeps {len(e.rivals)} rival(s); verify times them beside it)")
        if p is None or e is None:
            continue
        lo, med, hi = min(p.ratios.values(), key=lambda v: v[1])
        interval = f"{100 * (med - 1):+.1f}%, 95% interval {100 * (lo - 1):+.1f}% to {100 * (hi - 1):+.1f}%"
        winner = config_text(e.config, defaults) or "the winner"
        verdict = (f"{winner} kept; {len(p.ties)} other leader(s) tie with it (the closest {interval}), kept as "
                   f"runner-ups" if p.ties else f"{winner} wins ({interval} for the closest other leader)")
        line(f"playoff {r.bucket}: {1 + len(p.ratios)} leaders over {p.rounds} interleaved rounds, "
             f"{r.playoff_s:.1f} s; {verdict}")


def unsettled(results: list[BucketResult]) -> None:
    """One line where timings did not settle: how many, and what this host shows of why."""
    from kerneltune.cli.unsettled import unsettled_line

    if text := unsettled_line([p for r in results for p in r.timings]):
        note(text)


def first_failures(results: list[BucketResult]) -> None:
    """For each kind of failure of each bucket, the first candidate's error, cut to a line (the journal has all)."""
    for r in results:
        for kind, error in sorted(r.first_errors.items()):
            if kind != Status.UNSUPPORTED:
                text = " ".join(error.split())
                note(f"{r.bucket}: {r.failures[kind]} {kind}; the first: {text[:300]}{'…' if len(text) > 300 else ''}")


def remeasured(results: list[BucketResult]) -> None:
    """One line where a resumed sweep measured again what its journal held under another source or problem."""
    whys = sum((r.remeasured for r in results), Counter())
    if whys:
        note(f"measured again: {', '.join(f'{n} record(s) of {why}' for why, n in sorted(whys.items()))} "
             f"(kept in the journal; only records of this kernel source, problem and inputs are resumed)")


def space_hint(journal: Path) -> str:
    """Where a recorded sweep's space probably is: a ``space.toml`` in the journal's folder or up to 3 above."""
    start = journal.resolve() if journal.is_dir() else journal.resolve().parent
    for folder in [start, *start.parents][:4]:
        if (folder / "space.toml").is_file():
            return f"Replay it with --space {shown(folder / 'space.toml')}"
    return "Replay it with the space it was swept on (--space)."


def tables_written(results: list[BucketResult], journal: Path) -> None:
    stale = sorted({r.bucket for r in results if r.entry and r.entry.replayed_from is not None})
    for path in sorted({str(r.table) for r in results if r.entry}):
        hint = "" if stale else f" (the runtime reads it once installed: kerneltune install {path})"
        line(f"table: {path}{hint}")
    if stale:
        note(f"A replay wrote {', '.join(stale)}: recorded stamps, never installed.")
    line(f"journal: {journal}")


def phases(records: list[BucketPhases], compile_workers: int, prefix: str) -> None:
    """Where the candidates' time went (``tuning/phases.py``), when any record carries its phases."""
    from kerneltune.tuning.phases import summarize

    if summary := summarize(records, compile_workers):
        for text in summary.lines():
            line(f"{prefix}{text}")


def modelled_ranking(journal: Path, buckets: list[str], defaults: Mapping[str, Any]) -> None:
    from kerneltune.report.modelled import modelled_ranking as ranking

    for bucket in buckets:
        rows = ranking(journal, bucket)
        if not rows:
            continue
        out = Table(title=f"{bucket}: modelled, not measured (cost model rank beside the static score's)")
        for col in ("model rank", "config", "µs/layer", "of floor", "static-score rank", "static score"):
            out.add_column(col, overflow="fold")
        for r in rows:
            out.add_row(str(r.rank), config_text(r.config, defaults), f"{r.us_per_layer:.1f}",
                        f"{r.fraction_of_floor:.2f}", str(r.static_rank), f"{r.static_score:.0f}")
        console.print(out)


def verdict_word(e: EntryReport) -> str:
    """The verdict's first word, as docs/ci.md names them: ok, slower, stale, unsettled, a failed check's status."""
    if not e.checked:
        return "not checked"
    word = e.verdict.split(":")[0].split(";")[0].split(" ")[0]
    return word if e.failed or e.unsettled else "ok"


def verify_progress(r: EntryReport) -> None:
    line(f"{r.bucket}: {r.verdict} (correctness: {r.correctness})")


def verdict_counts(entries: list[EntryReport]) -> None:
    """``verify: 7 ok, 1 unsettled, 1 failed`` (every item: entries and fallbacks)."""
    counts = Counter(verdict_word(e) for e in entries)
    if counts:
        line("verify: " + ", ".join(f"{n} {word}" for word, n in sorted(counts.items(), key=lambda kv: -kv[1])))


def verify_report(name: str, report: VerifyReport, defaults: Mapping[str, Any]) -> None:
    out = Table(title=f"verify {name}: {report.table}",
                caption="configs: what differs from the kernel's tile defaults" if defaults else None)
    for col in ("bucket", "config", "stamps", "correctness", "recorded µs", "now µs", "heuristic µs", "verdict"):
        out.add_column(col, overflow="fold")
    fmt = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    for r in report.entries:
        differ = ", ".join(m.split(":")[0] for m in r.stamps)
        heuristic = "= tuned" if r.heuristic_is_tuned else fmt(r.heuristic_us)
        out.add_row(r.bucket, config_text(r.config, defaults), "match" if not r.stamps else f"differ: {differ}",
                    r.correctness, fmt(r.recorded_us), fmt(r.now_us), heuristic,
                    ("[red]" if r.failed else "") + escape(r.verdict))
    if report.entries:
        console.print(out)


def checks(title: str, results: list[EmulationCheck]) -> None:
    layouts = list(dict.fromkeys(c.layout for c in results))
    out = Table(title=title + (f" ({layouts[0]})" if len(layouts) == 1 else ""))
    columns = ("layout",) * (len(layouts) > 1) + ("shape", "numbers", "schedule", "rel. error", "bound", "blocks",
                                                  "resumes", "verdict")
    for col in columns:
        out.add_column(col)
    for c in results:
        out.add_row(*(c.layout,) * (len(layouts) > 1), c.shape, c.numbers, c.schedule, f"{c.worst_error:.1e}",
                    "same bits" if c.tolerance < 1e-300 else f"{c.tolerance:.1e}", str(c.blocks), str(c.resumes),
                    "ok" if c.ok else f"[red]{escape(c.error or 'mismatch')}")
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


def bench_rows(title: str, columns: tuple[tuple[str, str, str], ...], rows: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for _, header, _ in columns:
        table.add_column(header)
    table.add_column("error")
    for r in rows:
        table.add_row(*("-" if r.get(key) is None else format(r[key], spec) for key, _, spec in columns),
                      (r.get("error") or "")[:60])
    console.print(table)


def report_summary(frame: Any) -> None:
    summary = frame.groupby(["bucket", "status"]).size().unstack(fill_value=0)
    out = Table(title=f"{len(frame)} candidates")
    out.add_column("bucket")
    for c in summary.columns:
        out.add_column(str(c))
    for b, row in summary.iterrows():
        out.add_row(str(b), *(str(v) for v in row))
    console.print(out)


def coverage(frame: Any, where: str) -> None:
    """``report --ledger``: a row per kernel, device and state of its tables, the calls each way served."""
    from kerneltune.report.coverage import percent

    out = Table(title=f"coverage of the recorded calls ({escape(where)})")
    for c in ("kernel", "device", "period", "tables", "first seen", "calls", "tuned", "fallback", "neighbour",
              "heuristic", "coverage"):  # folded where the width is short, never cut ("rowsum_ke…")
        out.add_column(c, justify="right" if c in ("period", "calls", "coverage") else "left", overflow="fold")
    for r in frame.to_dict("records"):
        out.add_row(escape(str(r["kernel"])), escape(str(r["device_kind"])), str(r["period"]), escape(str(r["tables"])),
                    escape(str(r["first_seen"])), str(r["calls"]), str(r["tuned"]), str(r["fallback"]),
                    str(r["neighbour"]), str(r["heuristic"]), percent(r["coverage"]))
    roomy(out)


def roomy(table: Table) -> None:
    """``table`` with the room it needs where the width is no terminal's nor the user's (a file, a pipe, a CI log:
    120 columns cut its kernel names, hashes and dates), else at the width there, its cells folded."""
    from rich.measure import Measurement

    from .terminal import MAX_COLUMNS, columns

    if console.is_terminal or columns() is not None:
        console.print(table)
        return
    needed = Measurement.get(console, console.options.update_width(MAX_COLUMNS), table).maximum
    width = console.width
    console.width = max(width, min(needed, MAX_COLUMNS))
    try:
        console.print(table)
    finally:
        console.width = width
