"""The miss ledger's cost on a lookup's cached path, a benchmark (no test times it): ``KERNEL.tuned(...)`` and the
bare ``tuned_config`` with recording off and on, once every problem has been written (the path every call after a
problem's first takes).

    python -m kerneltune.tables.ledger_cost

Each round times CALLS calls with recording off, then CALLS with it on (paired, so that the machine's drift cancels);
it prints the medians over rounds of the per-call times and of the paired differences. A table of 6 entries is
written into a scratch tables folder; the ledger goes into a scratch cache.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import kerneltune as kt
from kerneltune.tables import recording
from kerneltune.tables.lookup import tuned_config
from kerneltune.tables.store import update_table


class Scale(kt.Kernel):
    """A NumPy kernel: the lookup, not the kernel, is measured."""

    framework = "numpy"
    params = {"block": [8, 16]}
    buckets = {f"r{r}": {"rows": r, "cols": 32} for r in (48, 64, 96, 128, 256, 512)}

    def build(self, p, c):
        return lambda x: 2 * x

    def inputs(self, p, seed):
        import numpy as np

        return (np.ones((p.rows, p.cols)),)

    def reference(self, x):
        return 2 * x


KERNEL = Scale()
ROUNDS, CALLS = 31, 2000


def per_call_us(call) -> float:
    t0 = time.perf_counter()
    for _ in range(CALLS):
        call()
    return (time.perf_counter() - t0) / CALLS * 1e6


def paired(call) -> tuple[float, float, float]:
    """Medians of (off, on, on - off) over rounds, each round one batch off and one on."""
    recording.record(True)
    call()  # the problem's first call: written once, outside the timing
    offs, ons = [], []
    for _ in range(ROUNDS):
        recording.record(False)
        offs.append(per_call_us(call))
        recording.record(True)
        ons.append(per_call_us(call))
    recording.record(False)
    return (statistics.median(offs), statistics.median(ons),
            statistics.median(b - a for a, b in zip(offs, ons, strict=True)))


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="kerneltune-ledger-bench-"))
    os.environ["KERNELTUNE_TABLES"] = str(scratch / "tables")  # read at each lookup: the scratch folders serve
    os.environ["KERNELTUNE_CACHE"] = str(scratch / "cache")
    from kerneltune.seams.registry import load_backend

    running = load_backend(KERNEL.backend).stamps()
    path = scratch / "tables" / running["device_kind"] / f"{KERNEL.name}.json"

    def fill(table):
        for name, problem in KERNEL.buckets.items():
            table["entries"][name] = {"bucket": dict(problem), "config": {"block": 16}, "median_us": 1.0,
                                      "stamps": {**running, "kernel_hash": KERNEL.source_hash()}}
    update_table(path, KERNEL.name, running["device_kind"], fill)
    problem = {"rows": 64, "cols": 32}
    untuned = {"rows": 80, "cols": 32}  # served by a neighbour
    cases = {
        "KERNEL.tuned, a tuned bucket": lambda: KERNEL.tuned(problem),
        "KERNEL.tuned, a neighbour's": lambda: KERNEL.tuned(untuned),
        "tuned_config, a tuned bucket": lambda: tuned_config(KERNEL.name, problem, KERNEL.source_hash(), (), running),
        "recording.note alone": lambda: recording.note("scale", "h", "cpu", (), problem, recording.Served.TUNED),
    }
    rows = []
    for name, call in cases.items():
        off, on, added = paired(call)
        rows.append({"case": name, "off_us": round(off, 3), "on_us": round(on, 3), "added_us": round(added, 3)})
    print(json.dumps({"python": sys.version.split()[0], "rounds": ROUNDS, "calls_per_round": CALLS, "rows": rows},
                     indent=1))


if __name__ == "__main__":
    main()
