"""The drafter's timed path down to the HIP calls: a sweep builds each layout as a launch group of four
rank processes, checks it against the float64 model on poisoned outputs, times it, journals it and
writes the table, which `verify` re-checks. The CPU emulation stands in for the four GPUs
(``KERNELTUNE_GROUP_DEVICE=emulated``); what only the GPUs can prove is ``rocm``-marked in
test_rocm_runner.py."""

import json
import subprocess
import sys

import pytest

from kerneltune.tuning.journal import Journal

from ...paths import REPO

SPACE = """kernel = "drafter_wide"
[params]
ng = [192]
threads = [512]
w_na = [96]
[[buckets]]
name = "emulated-2req-x2tok"
problem = { arch = "gfx942", requests = 2, qpr = 2, context = 40, layers = 1 }
"""


def _sweep_on(device: str, tmp_path, monkeypatch) -> tuple:
    """The space's one layout swept on a launch group of ``device``: the working folder and its one record."""
    monkeypatch.setenv("KERNELTUNE_GROUP_DEVICE", device)
    space = tmp_path / "drafter.toml"
    space.write_text(SPACE)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", "drafter-wide", "--space", str(space),
                        "--out", str(out), "--max-seconds", "0.1", "--compile-workers", "0"],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    [rec] = list(Journal(out / "journals/drafter_wide-live.jsonl").records())
    return out, rec


@pytest.mark.slow
@pytest.mark.xdist_group("drafter-full-model")  # one worker at a time runs the full-size model
def test_sweep_then_verify_on_an_emulated_group(tmp_path, monkeypatch):
    out, rec = _sweep_on("emulated", tmp_path, monkeypatch)
    assert rec["status"] == "ok" and rec["rel_error"] < 1e-12 and rec["timing"]["median_us"] > 0
    assert rec["stamps"]["group_device"] == "emulated"
    table = out / "tables/emulated/drafter_wide.json"
    [entry] = json.loads(table.read_text())["entries"].values()
    assert entry["config"] == {"ng": 192, "threads": 512, "w_na": 96}
    v = subprocess.run([sys.executable, "-m", "kerneltune", "verify", "drafter-wide", "--table", str(table)],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert v.returncode == 0, v.stdout[-3000:] + v.stderr[-3000:]
    assert "emulated-2req-x2tok" in v.stdout


@pytest.mark.slow
@pytest.mark.xdist_group("drafter-full-model")
def test_sweep_on_an_interpreted_group_runs_the_compiled_kernel_at_full_size(tmp_path, monkeypatch):
    """The same path with the kernel's own compiled program in the CPU interpreter (one full-size layer):
    the candidate is checked against the float64 model within the formats' bound, not emulated exactly."""
    _, rec = _sweep_on("interpret", tmp_path, monkeypatch)
    assert rec["status"] == "ok" and 1e-6 < rec["rel_error"] < 0.2, rec
    assert rec["stamps"]["group_device"] == "interpret"
