"""The issue's whole loop on Triton under its interpreter: the @triton.autotune softmax of Triton's tutorial
(``examples/triton_autotune.py``, two lines added) served by kerneltune's tables. An app makes 200 calls of 6
shapes, 2 of them tuned; the ledger holds the 4 others with their counts; ``sweep --from-ledger``, ``install``; the
app again: every call served by its own tuned entry; coverage 33% -> 100%. (``verify`` of a Triton kernel's table
runs in ``test_examples.py``.)"""

import os
import subprocess
import sys

import pytest

from kerneltune.tables.ledger import Served, read_ledger

from ..paths import REPO
from .test_examples import kerneltune

EXAMPLE = REPO / "examples" / "triton_autotune.py"
FAST = ("--max-seconds", "0.1", "--compile-workers", "0", "--no-playoff")
APP = """import itertools, sys, torch
from triton_autotune import softmax
shapes = [int(c) for c in sys.argv[1].split(",")]
for n in itertools.islice(itertools.cycle(shapes), int(sys.argv[2])):
    x = torch.randn(1, n)
    assert torch.allclose(softmax(x), torch.softmax(x, 1), atol=1e-6)
"""


@pytest.mark.slow
def test_the_triton_loop_from_traffic_to_full_coverage(tmp_path):
    env = {**os.environ, "KERNELTUNE_TABLES": str(tmp_path / "tables"), "KERNELTUNE_CACHE": str(tmp_path / "cache"),
           "TRITON_INTERPRET": "1", "KERNELTUNE_RECORD": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(EXAMPLE.parent), os.environ.get("PYTHONPATH")) if p)}
    (tmp_path / "app.py").write_text(APP)

    def app(shapes: str, calls: int, cache: str) -> subprocess.CompletedProcess:
        r = subprocess.run([sys.executable, "app.py", shapes, str(calls)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600, env={**env, "KERNELTUNE_CACHE": str(tmp_path / cache)})
        assert r.returncode == 0, r.stderr
        return r

    # Two shapes tuned first, from a ledger of their own.
    app("32,128", 4, "first")
    kernel = f"{EXAMPLE}:softmax_kernel"
    kerneltune("sweep", kernel, "--from-ledger", "--ledger-path", str(tmp_path / "first" / "ledger"), "--out", "out",
               *FAST, env=env, cwd=tmp_path)
    kerneltune("install", "out/tables/cpu/softmax_kernel.json", env=env, cwd=tmp_path)

    # The traffic: 200 calls of 6 shapes, the tuned two last in the cycle.
    run = app("16,48,64,96,32,128", 200, "cache")
    assert run.stderr.count("not tuned; using nearest") == 4
    ledger = read_ledger(tmp_path / "cache/ledger/cpu/softmax_kernel.json")
    assert ledger is not None and not ledger.skipped
    assert {(r.problem["n_cols"], r.served): r.count for r in ledger.records} == {
        (16, Served.NEIGHBOUR): 34, (48, Served.NEIGHBOUR): 34, (64, Served.NEIGHBOUR): 33,
        (96, Served.NEIGHBOUR): 33, (32, Served.TUNED): 33, (128, Served.TUNED): 33}

    # One command tunes what the traffic met; then the app again.
    swept = kerneltune("sweep", kernel, "--from-ledger", "--out", "out", *FAST, env=env, cwd=tmp_path)
    said = " ".join(swept.split())
    assert "4 bucket(s) from the ledger" in said and "a weaker check" in said
    kerneltune("install", "out/tables/cpu/softmax_kernel.json", env=env, cwd=tmp_path)
    again = app("16,48,64,96,32,128", 200, "cache")
    assert "not tuned" not in again.stderr and "heuristic" not in again.stderr
    report = kerneltune("report", "--ledger", "--csv", "coverage.csv", env=env, cwd=tmp_path)
    assert "softmax_kernel on cpu: coverage 33% -> 100% (2 state(s)" in " ".join(report.split())

    # The sweep's own report names its check the weaker one: each candidate's error against the first config.
    kerneltune("report", "out", "--csv", "sweep.csv", env=env, cwd=tmp_path)
    assert "accuracy_error_vs_first_config" in (tmp_path / "sweep.csv").read_text().splitlines()[0]
