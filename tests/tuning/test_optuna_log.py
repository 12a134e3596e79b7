"""Optuna's informational lines show only with --verbose (they follow kerneltune's logger)."""

import subprocess
import sys

from ..paths import FIXTURES, REPO

RUN_C = FIXTURES / "ranker_attention/run-c-journals"
SPACE = FIXTURES / "ranker_attention/run-c-space.toml"


def sweep(tmp_path, *flags):
    return subprocess.run([sys.executable, "-m", "kerneltune", *flags, "sweep", "ranker-attention", "--replay",
                           str(RUN_C), "--space", str(SPACE), "--bucket", "d128-tanh-long", "--strategy", "random",
                           "--budget", "2", "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                          timeout=300)


def test_optuna_is_quiet_unless_verbose(tmp_path):
    quiet = sweep(tmp_path / "q")
    assert quiet.returncode == 0, quiet.stderr
    assert "A new study created" not in quiet.stderr + quiet.stdout
    loud = sweep(tmp_path / "v", "--verbose")
    assert loud.returncode == 0 and "A new study created" in loud.stderr
