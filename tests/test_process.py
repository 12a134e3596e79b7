"""A child that arms its death signal after its parent is already gone exits at once."""

import os
import subprocess
import sys

from kerneltune.seams.process import PARENT_PID_ENV, child_env, parent_pid_from_env


def test_the_env_names_this_process_as_the_parent(monkeypatch):
    env = child_env({"A": "1"})
    assert env["A"] == "1" and env[PARENT_PID_ENV] == str(os.getpid())
    monkeypatch.setenv(PARENT_PID_ENV, "not a pid")
    assert parent_pid_from_env() is None


def test_an_orphan_exits_when_it_arms_the_signal():
    code = "from kerneltune.seams.process import die_with_parent; die_with_parent({}); print('alive')"
    alive = subprocess.run([sys.executable, "-c", code.format(os.getpid())], capture_output=True, text=True)
    assert alive.returncode == 0 and alive.stdout.strip() == "alive"
    orphan = subprocess.run([sys.executable, "-c", code.format(1)], capture_output=True, text=True)
    assert orphan.returncode == 1 and orphan.stdout == ""
