"""``verify --junit``: JUnit XML, the format CI systems render, one test case per table entry and fallback.

A case passes, fails (wrong or slower, with the figures), or is skipped where the timing needs hardware
this machine lacks (with the reason, and what was checked here), where its speed was unsettled (the verdict says
why) or where the run was interrupted before it.
One test suite per table file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kerneltune.files.paths import make_folder
from kerneltune.files.safe_io import atomic_writer
from kerneltune.seams.protocols import EmulationCheck
from kerneltune.tuning.verify import EntryReport, VerifyReport


def _figures(r: EntryReport) -> str:
    fmt = lambda x: "-" if x is None else f"{x:.1f} µs"  # noqa: E731
    rivals = ", ".join(f"{k} {v:.1f} µs" for k, v in r.rivals_us.items())
    config = " ".join(f"{k}={v}" for k, v in r.config.items())
    return (f"config: {config}\ncorrectness: {r.correctness}\nrecorded: {fmt(r.recorded_us)}\n"
            f"now: {fmt(r.now_us)}\nheuristic: {'= tuned' if r.heuristic_is_tuned else fmt(r.heuristic_us)}\n"
            f"rivals timed beside it: {rivals or '-'}\nverdict: {r.verdict}")


def _case(suite: ET.Element, kernel: str, report: VerifyReport, r: EntryReport) -> str:
    case = ET.SubElement(suite, "testcase", name=r.bucket, classname=f"{kernel}.{report.table.parent.name}")
    ET.SubElement(case, "system-out").text = _figures(r)
    if r.failed:
        ET.SubElement(case, "failure", message=r.verdict, type="wrong or slower").text = _figures(r)
        return "failures"
    if not r.checked or r.unsettled:  # interrupted before it, or its speed not judged: neither passed nor failed
        ET.SubElement(case, "skipped", message=r.verdict)
        return "skipped"
    if report.timing_absent is not None:
        ET.SubElement(case, "skipped", message=f"timing not checked: {report.timing_absent}; "
                                               f"correctness here: {r.correctness}")
        return "skipped"
    return "passed"


def write_junit(path: Path, kernel: str, reports: list[VerifyReport]) -> None:
    """One <testsuite> per verified table; a table that could not be read is one failed case naming it."""
    root = ET.Element("testsuites", name=f"kerneltune verify {kernel}")
    for report in reports:
        suite = ET.SubElement(root, "testsuite", name=f"{kernel} {report.table}")
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        if not report.entries and report.notes:  # the table itself: missing, unreadable, no such bucket
            case = ET.SubElement(suite, "testcase", name="table", classname=f"{kernel}.{report.table.parent.name}")
            ET.SubElement(case, "failure", message="; ".join(report.notes), type="bad input")
            counts["tests"], counts["failures"] = 1, 1
        for r in report.entries:
            outcome = _case(suite, kernel, report, r)
            counts["tests"] += 1
            if outcome != "passed":
                counts[outcome] += 1
        for k, v in counts.items():
            suite.set(k, str(v))
    make_folder(path.parent)
    _write(root, path)


def write_checks_junit(path: Path, kernel: str, what: str, checks: list[EmulationCheck]) -> None:
    """``verify --interpret``: one case per check (shape, numbers, schedule), failed with its figures."""
    root = ET.Element("testsuites", name=f"kerneltune verify {kernel} --{what}")
    suite = ET.SubElement(root, "testsuite", name=f"{kernel} {what}", tests=str(len(checks)),
                          failures=str(sum(not c.ok for c in checks)), skipped="0")
    for c in checks:
        case = ET.SubElement(suite, "testcase", name=f"{c.shape} [{c.numbers}, {c.schedule}]",
                             classname=f"{kernel}.{what}")
        figures = (f"layout: {c.layout}\nerror: {c.worst_error:.3g} (at most {c.tolerance:.3g})\n"
                   f"blocks: {c.blocks}\nresumes: {c.resumes}" + (f"\nfailure: {c.error}" if c.error else ""))
        ET.SubElement(case, "system-out").text = figures
        if not c.ok:
            ET.SubElement(case, "failure", message=c.error or "over its tolerance", type="wrong").text = figures
    make_folder(path.parent)
    _write(root, path)


def _write(root: ET.Element, path: Path) -> None:
    """The file, whole or not at all (``safe_io.atomic_writer``: a kill keeps the previous one), or an OSError
    naming it."""
    with atomic_writer(path, binary=True) as f:
        ET.ElementTree(root).write(f, encoding="utf-8", xml_declaration=True)
