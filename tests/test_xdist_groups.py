"""The suite's own scheduling: `make test` runs `-n 2 --dist loadgroup` so that the tests of one
`xdist_group` (the full-size drafter model, GBs each) run on one worker, one at a time. pytest 9.2
silently broke that (pytest-xdist issue 1386) and two full-size models ran at once."""

import ast
import subprocess
import sys

from .paths import REPO

GROUPED = '''
import os
import pytest

@pytest.mark.xdist_group("heavy")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    with open(os.path.join(os.path.dirname(__file__), "workers.txt"), "a") as f:
        print(os.environ["PYTEST_XDIST_WORKER"], file=f)
'''


def test_one_groups_tests_run_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                        "-q", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 4 and len(set(workers)) == 1, workers


def test_marks_are_on_tests_not_on_their_helpers():
    """A mark on a helper marks nothing: ``slow`` and the full-model group on a helper once left a full-size
    emulated sweep and verify (81 s) in the quick loop, beside the other full-size runs."""
    misplaced = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("test"):
                marks = [text for d in node.decorator_list if (text := ast.unparse(d)).startswith("pytest.mark.")]
                misplaced += [f"{path.relative_to(REPO)}:{node.lineno} {node.name}: @{m}" for m in marks]
    assert not misplaced, misplaced
