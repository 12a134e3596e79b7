"""A resumed sweep keeps only what its journal measured under this kernel source (and this problem, inputs and
cold-L2 setting): a changed kernel is measured again, under its new hash, and the summary says how many and why.
A bucket in which nothing is verified ends the sweep with exit 1, naming the bucket and the commonest failure."""

import json
import os
import shutil
import subprocess
import sys

from ..paths import REPO

KERNEL = REPO / "tests/author/numpy_kernels.py"


def sweep(tmp_path, *args):
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", *args, "--out", str(tmp_path / "out"),
                        "--compile-workers", "0", "--max-seconds", "0.1"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "COLUMNS": "200"}, timeout=300)
    return r


def records(tmp_path):
    path = tmp_path / "out/journals/row-scale-live.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_changed_kernel_is_measured_again_under_its_new_hash(tmp_path):
    source = tmp_path / "row_scale.py"
    shutil.copy(KERNEL, source)
    first = sweep(tmp_path, f"{source}:KERNEL", "--bucket", "r8")
    assert first.returncode == 0, first.stderr
    old = {r["kernel_hash"] for r in records(tmp_path)}
    again = sweep(tmp_path, f"{source}:KERNEL", "--bucket", "r8")  # same source: everything resumed
    assert again.returncode == 0 and "measured again" not in again.stdout
    assert len(records(tmp_path)) == len([r for r in records(tmp_path) if r["kernel_hash"] in old])

    source.write_text(source.read_text() + "\n# a comment: a new source hash\n")
    changed = sweep(tmp_path, f"{source}:KERNEL", "--bucket", "r8")
    assert changed.returncode == 0, changed.stderr
    out = " ".join(changed.stdout.split())
    measured = [r for r in records(tmp_path) if r["status"] in ("ok", "pruned")]  # pruned: stopped early
    new = {r["kernel_hash"] for r in measured} - old
    assert len(new) == 1 and len(old) == 1
    assert sum(r["kernel_hash"] in new for r in measured) == sum(r["kernel_hash"] in old for r in measured) == 8
    assert "measured again: 8 record(s) of another kernel source" in out
    table = json.loads(next((tmp_path / "out/tables/cpu").glob("*.json")).read_text())
    assert [e["stamps"]["kernel_hash"] for e in table["entries"].values()] == list(new)


def test_a_bucket_with_nothing_verified_fails_the_sweep_naming_it(tmp_path):
    r = sweep(tmp_path, f"{KERNEL}:BROKEN", "--bucket", "r8")
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: bucket r8: no candidate verified and timed (the commonest failure: correctness, "
                           "8 of 8); no table entry written for it (the journal ")
