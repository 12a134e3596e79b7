"""Peak resident memory and wall time of a command and every process it starts (issue 98): ``verify drafter-wide
--interpret`` and the drafter's tests must each fit a CI runner (4 GB resident at peak, 3 minutes on 2 cores).

``/usr/bin/time -v``'s "maximum resident set size" is one process's (the largest child it waited for), and
``verify --interpret`` and ``pytest -n 2`` run their work in worker processes side by side: what a runner's memory
limit sees is their sum. So this samples the command's whole process tree (``/proc/PID/task/*/children``) every
``--every`` seconds and reports the largest sum of two measures, the largest single process, and the wall time:

- PSS (``/proc/PID/smaps_rollup``): each page divided among the processes that map it, so the shared libraries
  (torch's and FlyDSL's, ~0.45 GB a process) count once over the tree, as a runner's memory limit (a cgroup)
  charges them: the figure the budget is judged by;
- RSS: every process's resident pages whole, the shared ones once a process: an upper bound.

A process that lives shorter than the interval can be missed: the sums are lower bounds on the true peak, as close
as the interval (0.5 s by default: a worker's arrays take seconds to fill, and reading a large process's
smaps_rollup costs milliseconds of CPU).

Usage: python .ci/interpret_memory.py [--every S] [--out FILE] -- COMMAND...  Exit: the command's own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def resident(pid: int) -> tuple[int, int]:
    """A process's (PSS, RSS) bytes ((0, 0) once gone)."""
    got = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Pss", "Rss"):
                got[key] = int(rest.split()[0]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return got.get("Pss", 0), got.get("Rss", 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--out", type=Path)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    t0 = time.monotonic()
    child = subprocess.Popen(command)
    peak_pss, peak_rss, peak_one, at, procs = 0, 0, 0, 0.0, 0
    while child.poll() is None:
        sizes = [resident(p) for p in tree(child.pid)]
        pss = sum(s[0] for s in sizes)
        if pss > peak_pss:
            peak_pss, at, procs = pss, time.monotonic() - t0, sum(s[1] > 0 for s in sizes)
        peak_rss = max(peak_rss, sum(s[1] for s in sizes))
        peak_one = max(peak_one, *(s[1] for s in sizes))
        time.sleep(a.every)
    wall = time.monotonic() - t0
    line = (f"rc {child.returncode}, wall {wall:.1f} s, peak {peak_pss / 1e9:.2f} GB PSS summed over the process "
            f"tree ({procs} processes, at {at:.0f} s), {peak_rss / 1e9:.2f} GB RSS summed, largest single process "
            f"{peak_one / 1e9:.2f} GB RSS; sampled every {a.every} s: {' '.join(command)}")
    print(line, file=sys.stderr, flush=True)
    if a.out:
        with a.out.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
