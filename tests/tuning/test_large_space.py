"""A budgeted sampler search of a 10^7-config space: time, memory and the study's log bounded by the
budget, not by the space; a resumed run counts what its journal already holds against the budget."""

import json
import os
import subprocess
import sys

import pytest

from kerneltune.tuning.journal import Journal

from ..paths import REPO

SPACE = 'kernel = "wide"\n[params]\n' + "".join(f"p{i} = {{ range = [0, 9] }}\n" for i in range(7)) + (
    '[[constraints]]\nexpr = "p6 != 9"\nwhy = "a constraint the space file adds"\n'
    '[[buckets]]\nname = "b"\nproblem = { n = 4 }\n')

SCRIPT = """
import json, pathlib, sys, time
from kerneltune.tuning.sweep import SearchOptions, SweepOptions, run_sweep
from tests.tuning.test_sweep import SlowRunner
out = pathlib.Path(sys.argv[1])
opts = SweepOptions(kernel="tests.tuning.fake_kernel:WIDE", space_path=out / "wide.toml", out=out,
                    search=SearchOptions(sys.argv[2], budget=int(sys.argv[3]), seed=0))
t0 = time.perf_counter()
[r] = run_sweep(opts, runner_factory=lambda o, k: SlowRunner(0.0))
log = opts.journal_path.with_suffix(".optuna.log")
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"s": time.perf_counter() - t0, "rss_mb": peak / 1024, "measured": r.measured,
                  "log_mb": log.stat().st_size / 2**20}))
"""


def sweep(tmp_path, strategy, budget):
    (tmp_path / "wide.toml").write_text(SPACE)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), strategy, str(budget)], capture_output=True,
                       text=True, cwd=REPO, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.parametrize("strategy", ["tpe", "random"])
def test_a_budget_of_20_in_a_space_of_10_million(tmp_path, strategy):
    got = sweep(tmp_path, strategy, 20)
    assert got["measured"] == 20 and got["s"] < 60 and got["rss_mb"] < 500 and got["log_mb"] < 5, got
    recs = list(Journal(tmp_path / "journals/wide-live.jsonl").records())
    assert len(recs) == 20 and all(r["tiles"]["p0"] != r["tiles"]["p1"] and r["tiles"]["p6"] != 9 for r in recs)


def test_a_resumed_budget_counts_what_the_journal_holds(tmp_path):
    assert sweep(tmp_path, "tpe", 4)["measured"] == 4
    assert sweep(tmp_path, "tpe", 10)["measured"] == 6  # 4 were measured already: 10 in all
    assert len(list(Journal(tmp_path / "journals/wide-live.jsonl").records())) == 10
