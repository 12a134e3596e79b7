"""A third kernel, NumPy on the CPU with its own backend (tests/toy_kernel), runs sweep, table, runtime
lookup, verify and report end to end through import paths alone: no engine file names it."""

import os
import subprocess
import sys

import numpy as np
import pytest

from kerneltune.seams.measure import MeasureSettings
from kerneltune.tuning.sweep import SweepOptions, WorkerOptions, run_sweep
from kerneltune.tuning.verify import verify_table

from .paths import REPO
from .toy_kernel.kernel import PLUGIN, toy_matvec

KERNEL = "tests.toy_kernel.kernel:PLUGIN"
SPACE = """kernel = "toy"
[params]
block = [1, 16, 64, 80]
unroll = [8, 64]
[[buckets]]
name = "n192"
problem = { n = 192 }
"""


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_a_third_kernel_end_to_end(tmp_path):
    space = tmp_path / "toy.toml"
    space.write_text(SPACE)
    opts = SweepOptions(kernel=KERNEL, space_path=space, out=tmp_path / "out",
                        workers=WorkerOptions(compile_workers=0, run_timeout=60),
                        settings=MeasureSettings(max_seconds=0.3, min_samples=5, batch=5))
    [result] = run_sweep(opts)
    assert result.measured == 6 and result.pruned_by_constraints == 2  # block 80 does not divide 192
    table = tmp_path / "out/tables/toy-cpu/toy.json"
    assert result.entry is not None and result.table == table
    assert result.entry["stamps"]["device"] == "toy cpu" and "numpy" in result.entry["stamps"]

    a, x = np.random.default_rng(0).standard_normal((192, 192)), np.random.default_rng(1).standard_normal(192)
    y, tiles = toy_matvec(a, x, tmp_path / "out/tables")
    assert tiles == result.entry["config"] != PLUGIN.heuristic(PLUGIN.problem({"n": 192}))
    np.testing.assert_allclose(y, a @ x, rtol=1e-12)

    report = verify_table(KERNEL, table, tmp_path / "verify", MeasureSettings(rel_noise=0.5, max_seconds=0.3))
    assert report.exit_code == 0 and [r.correctness for r in report.entries] == ["ok"]

    r = subprocess.run([sys.executable, "-m", "kerneltune", "report", str(tmp_path / "out/journals"),
                        "--csv", str(tmp_path / "r.csv"), "--html", str(tmp_path / "r.html")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "r.csv").read_text().count("\n") == 1 + 8
    assert ">n192 <small>" in (tmp_path / "r.html").read_text()
