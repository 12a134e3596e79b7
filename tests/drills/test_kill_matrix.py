"""The kill -9 drill: five kill points times two strategies (exhaustive, tpe). Each sweep is killed after
k candidates were journaled, then resumed to the end; the drill counts what a user would lose. Every
count must be 0: results lost, duplicates, tracebacks, stale entries in the table."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from kerneltune.tables.store import read_table
from kerneltune.tuning.journal import Journal

from ..paths import REPO

SPACE = """kernel = "fake"
[params]
mode = ["good", "slow"]
work = [1, 2, 3, 4]
[[buckets]]
name = "small"
problem = { n = 4 }
"""
# Journaled candidates before the kill (0: inside the first one), each at least two short of the run's total
# (the exhaustive run measures all 8 feasible configs, the TPE run a budget of 6), so that the kill lands
# while the sweep still runs; the drill counts any run that finished first.
KILL_AFTER = {"exhaustive": (0, 1, 3, 5, 6), "tpe": (0, 1, 2, 3, 4)}
CODE = """import pathlib, sys
from kerneltune.seams.measure import MeasureSettings
from kerneltune.tuning.sweep import SearchOptions, SweepOptions, WorkerOptions, run_sweep
out = pathlib.Path(sys.argv[1])
budget = None if sys.argv[3] == "exhaustive" else 6
run_sweep(SweepOptions(kernel="tests.tuning.fake_kernel:PLUGIN", space_path=out / "s.toml", out=out,
                       search=SearchOptions(sys.argv[3], budget=budget, seed=0),
                       workers=WorkerOptions(compile_workers=int(sys.argv[2]), run_timeout=10),
                       settings=MeasureSettings(max_seconds=0.2, min_samples=3, batch=3)))
"""


def measured(journal):
    return [r for r in Journal(journal).records() if r["status"] != "constraint"] if journal.exists() else []


@pytest.mark.slow
def test_kill_matrix(tmp_path):
    counts = Counter()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for strategy, kill_after in KILL_AFTER.items():
        for k in kill_after:
            out = tmp_path / f"{strategy}-{k}"
            out.mkdir()
            (out / "s.toml").write_text(SPACE)
            journal = out / "journals/fake-live.jsonl"
            proc = subprocess.Popen([sys.executable, "-c", CODE, str(out), "2", strategy], cwd=REPO, env=env,
                                    start_new_session=True, stderr=subprocess.PIPE)
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None and len(measured(journal)) < k:
                time.sleep(0.005)
            if k == 0:
                time.sleep(0.05)
            counts["finished before the kill"] += proc.poll() is not None
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            before = {r["key"] for r in measured(journal)}
            resumed = subprocess.run([sys.executable, "-c", CODE, str(out), "2", strategy], cwd=REPO, env=env,
                                     capture_output=True, text=True, timeout=300)
            counts["tracebacks"] += "Traceback" in resumed.stderr or resumed.returncode != 0
            after = Counter(r["key"] for r in measured(journal))
            counts["results lost"] += len(before - set(after))
            counts["duplicates"] += sum(n - 1 for n in after.values())
            counts["incomplete"] += sum(after.values()) != (8 if strategy == "exhaustive" else 6)  # 8 feasible
            table = read_table(out / "tables/cpu/fake.json")
            counts["stale entries"] += sum(e["stamps"]["kernel_hash"] != "fakehash" for e in table["entries"].values())
            counts["runs"] += 1
    print("kill -9 drill:", json.dumps(dict(counts)))
    assert counts["runs"] == 10
    assert {k: v for k, v in counts.items() if k != "runs" and v} == {}
