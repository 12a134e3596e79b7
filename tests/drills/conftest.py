"""What the shared-host drills need: a second user of the machine."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

DRILL_USER = "kerneltune-drill"


@pytest.fixture(scope="session")
def other_uid() -> int:
    """The uid of a user other than the one running the tests: ``kerneltune-drill``, made with ``useradd`` where
    missing (the tests run as root in CI, as they must to give a file to another user); skipped otherwise."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (CI runs the tests as root)")
    try:
        return pwd.getpwnam(DRILL_USER).pw_uid
    except KeyError:
        pass
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", DRILL_USER],
                          capture_output=True, text=True)
    try:
        return pwd.getpwnam(DRILL_USER).pw_uid  # made here, or by another test worker meanwhile
    except KeyError:
        pytest.skip(f"no second user: useradd {DRILL_USER} failed ({made.stderr.strip() or made.returncode})")
