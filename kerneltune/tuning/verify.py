"""Re-check a tuned table on this machine: stamps, correctness on fresh inputs, and time.

Each entry's fallbacks are checked like its winner: a launch whose problem refuses the
winner runs them.

Exit codes: 0 everything holds; 1 a correctness failure, a slowdown beyond the
recorded noise or a stale kernel source; 2 this machine cannot run the check at all
(the message names the hardware); 3 the table is missing, unreadable or lacks a bucket asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerneltune.measure import MeasureSettings
from kerneltune.protocols import Capability, Kernel
from kerneltune.registry import load_kernel
from kerneltune.tables.stamps import mismatches
from kerneltune.tables.store import TableError, read_table

from .runners import LiveRunner, device_groups

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN, EXIT_BAD_INPUT = 0, 1, 2, 3


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


@dataclass
class VerifyReport:
    table: Path
    entries: list[EntryReport]
    exit_code: int
    notes: list[str]


def verify_table(kernel_name: str, table_path: Path, work_dir: Path, settings: MeasureSettings | None = None,
                 on_entry: Callable[[EntryReport], None] | None = None,
                 buckets: tuple[str, ...] = ()) -> VerifyReport:
    """Check every entry of the table (only those named in ``buckets``, if any) and its fallbacks."""
    kernel = load_kernel(kernel_name)
    settings = settings or MeasureSettings(max_seconds=1.0)
    try:
        table = read_table(table_path)
    except TableError as e:
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [str(e)])
    if table is None:
        return VerifyReport(table_path, [], EXIT_BAD_INPUT, [f"{table_path}: no such table"])
    entries = [e for e in table["entries"].values() if not buckets or e.get("bucket_name") in buckets]
    schema_failures = [EntryReport("?", {}, correctness="not checked", verdict=why, failed=True)
                       for why in table["skipped"]]
    if missing := sorted(set(buckets) - {e.get("bucket_name") for e in entries}):
        return VerifyReport(table_path, [], EXIT_BAD_INPUT,
                            [f"{table_path}: no entry for bucket {', '.join(missing)}"])
    _seed_ceilings(table, work_dir / "logs")
    gpus = tuple(str(i) for i in range(kernel.devices))
    runner = LiveRunner(kernel_name, device_groups(gpus, kernel.devices), 0, work_dir / "logs",
                        work_dir / "jax-cache", 600.0, 300.0)
    try:
        running = runner.stamps()
        need = kernel.supported_on(running)
        can_small = Capability.CHECK_SMALL in kernel.capabilities
        if need is not None and not can_small:
            return VerifyReport(table_path, [], EXIT_CANNOT_RUN, [f"verifying {kernel.name} needs {need}"])
        notes = [] if need is None else [f"timing not checked: it needs {need}; correctness checked on the CPU "
                                         f"at small shapes (interpret mode)"]
        want = {**running, "kernel_hash": kernel.source_hash()}
        reports = []
        for e in entries:
            fallbacks = [{**e, **fb, "bucket_name": f"{e.get('bucket_name', '?')} (fallback)"}
                         for fb in e.get("fallbacks", ())]
            for i, checked in enumerate([e, *fallbacks]):
                reports.append(_verify_entry(kernel_name, kernel, runner, checked, want, need is None, settings,
                                             against_heuristic=i == 0))
                if on_entry is not None:
                    on_entry(reports[-1])
    finally:
        runner.close()
    reports = schema_failures + reports
    code = EXIT_FAIL if any(r.failed for r in reports) else EXIT_OK
    return VerifyReport(table_path, reports, code, notes)


def _seed_ceilings(table: dict[str, Any], log_dir: Path) -> None:
    """Hand the timing worker the ceilings the table recorded: it reuses them when GPU and driver
    match (measuring them again takes ~20 s and verify reports no % of ceiling)."""
    for entry in table["entries"].values():
        stamps = entry.get("stamps", {})
        if "bf16_tflops_ceiling" in stamps:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "ceilings.json").write_text(json.dumps(stamps))
            return


def _verify_entry(kernel_name: str, kernel: Kernel, runner: LiveRunner, entry: dict[str, Any], want: dict[str, Any],
                  on_gpu: bool, settings: MeasureSettings, against_heuristic: bool = True) -> EntryReport:
    rep = EntryReport(entry.get("bucket_name", "?"), entry["config"], recorded_us=entry.get("median_us"))
    rep.stamps = mismatches(entry.get("stamps", {}), want)
    if any(s.startswith("kernel_hash") for s in rep.stamps):
        rep.failed, rep.verdict = True, "stale: tuned for another kernel source"
    problem_fields = entry.get("problem") or {}
    if (why := kernel.infeasibility(kernel.problem(problem_fields), entry["config"])) is not None:
        rep.failed, rep.verdict, rep.correctness = True, f"config refused by the kernel: {why}", "not run"
        return rep
    base = {"kernel": kernel_name, "problem": problem_fields, "bucket": rep.bucket,
            "inputs": entry.get("inputs", {}), "settings": settings.__dict__}
    if not on_gpu:
        reply = runner.request({**base, "op": "check_small", "tiles": entry["config"]})
        if reply.get("status") == "ok":
            rep.correctness = "ok (interpret mode, small shape)"
        else:
            rep.correctness = reply.get("status", "?")
            rep.failed, rep.verdict = True, f"{reply.get('status')}: {reply.get('error', '')[:200]}"
        return rep
    # One measurement: the worker checks the outputs on fresh inputs and several bound sets
    # (random and adversarial) before it times them.
    reply = runner.measure({**base, "tiles": entry["config"], "seed": 11}).result()
    if reply.get("status") != "ok":
        rep.failed, rep.verdict = True, f"{reply['status']}: {reply.get('error', '')[:300]}"
        rep.correctness = reply["status"]
        return rep
    rep.correctness = "ok"
    rep.now_us = reply["timing"]["median_us"]
    heur = kernel.heuristic(kernel.problem(problem_fields)) if against_heuristic else None
    if heur == entry["config"]:
        rep.heuristic_us, rep.heuristic_is_tuned = rep.now_us, True
    elif heur is not None:
        h = runner.measure({**base, "tiles": heur, "seed": 13}).result()
        rep.heuristic_us = h["timing"]["median_us"] if h.get("status") == "ok" else None
    if rep.recorded_us:
        noise = max(entry.get("spread", 0.0), reply["timing"]["spread"], settings.rel_noise)
        slower = rep.now_us / rep.recorded_us - 1.0
        if slower > 2 * noise:
            rep.failed, rep.verdict = True, f"slower by {100 * slower:.1f}% (noise {100 * noise:.1f}%)"
    return rep
