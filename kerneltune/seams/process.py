"""Child processes that end with the process that started them, even under ``kill -9``."""

from __future__ import annotations

import os
import signal

PARENT_PID_ENV = "KERNELTUNE_PARENT_PID"


def die_with_parent(parent_pid: int | None = None) -> None:
    """Linux: have the kernel kill this process when its parent dies (``PR_SET_PDEATHSIG``), called by the
    child itself first thing. A parent that died before the call is caught by comparing ``parent_pid``
    with the parent now. Set in the child rather than through ``preexec_fn``, so the parent, a
    multithreaded JAX process, starts children with vfork instead of a fork of itself."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # orphaned before the death signal was armed


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` naming this process as the parent a child checks for in ``die_with_parent``."""
    return {**env, PARENT_PID_ENV: str(os.getpid())}


def parent_pid_from_env() -> int | None:
    value = os.environ.get(PARENT_PID_ENV)
    return int(value) if value and value.isdigit() else None
