"""A lock file another kerneltune process may hold: waited on in bounded time, saying what it waits on.

An install stopped with Ctrl-Z while it held a table's lock made every other install and a sweep's table write
wait for ever, silently. Here a waiter says, after ``LOCK_NOTICE_S``, which lock it waits on and which process holds
it (read from ``/proc/locks``: its id, its command line, whether it is stopped), and gives up after
``LOCK_WAIT_S`` with one error saying the same.

filelock is not used for this: it opens the lock file with ``O_TRUNC`` and follows a link there, so a link
another user planted at ``table.json.lock`` would have the tool truncate the file it names. This lock file is
opened with ``O_NOFOLLOW`` and never truncated.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from kerneltune.files.safe_io import UnsafeFile, visible
from kerneltune.seams.limits import LOCK_NOTICE_S, LOCK_WAIT_S

log = logging.getLogger("kerneltune.files.locks")


class LockTimeout(OSError):
    """Gave up waiting on a lock: one line naming the lock file (``filename``), its holder and the wait."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def shortened(command: str, limit: int = 120) -> str:
    """A command line within ``limit`` characters, cut between words with an ellipsis (a cut mid-word read as a
    command that was typed so)."""
    if len(command) <= limit:
        return command
    head = command[:limit - 2]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + " …"


def holder(fd: int) -> str:
    """Who holds the ``flock`` on the open file ``fd``, in words ("process 123 (kerneltune install t.json),
    stopped"), from ``/proc/locks``; "another process" where that cannot be read."""
    st = os.fstat(fd)
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "another process"
    pids = [int(f[4]) for f in (line.split() for line in lines)
            if len(f) > 5 and f[1] == "FLOCK" and f[5] == ident and f[4].isdigit()]
    pids = [p for p in pids if p != os.getpid()]
    if not pids:
        return "another process"
    pid = pids[0]
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        text = " ".join(a.decode(errors="replace") for a in argv if a)
        command = shortened(visible(text).replace("\n", "\\n").replace("\t", " "))  # one line, shown not obeyed
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return f"process {pid}"
    stopped = ", which is stopped (Ctrl-Z or SIGSTOP; `fg` or `kill -CONT` it)" if state in ("T", "t") else ""
    return f"process {pid} ({command}){stopped}"


def open_lock_file(path: Path) -> int:
    """The lock file's descriptor: created (0o644) if missing, never through a link, never truncated, a regular
    file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, "a link; a lock file is never followed through a link (remove it)",
                             str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, "not a regular file; a lock file is one", str(path))
    return fd


class BoundedLock:
    """An exclusive ``flock`` on ``path``, waited on at most ``wait_s`` (``what`` names what it guards in the
    lines it writes). ``clock`` and ``sleep`` are the time it waits by (a test gives fakes)."""

    def __init__(self, path: Path | str, what: str, wait_s: float | None = None, notice_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.path, self.what = Path(path), what
        self.wait_s = LOCK_WAIT_S if wait_s is None else wait_s
        self.notice_s = LOCK_NOTICE_S if notice_s is None else notice_s
        self.clock, self.sleep = clock, sleep
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = open_lock_file(self.path)
        start, said, pause = self.clock(), False, 0.01
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = self.clock() - start
                    if waited >= self.wait_s:
                        raise LockTimeout(errno.ETIMEDOUT, f"gave up after {waited:.0f} s waiting for {self.what}, "
                                                           f"whose lock {holder(fd)} holds; nothing was changed",
                                          str(self.path)) from None
                    if not said and waited >= self.notice_s:
                        log.warning("waiting for %s: its lock %s is held by %s (giving up after %.0f s)",
                                    self.what, self.path, holder(fd), self.wait_s)
                        said = True
                    self.sleep(pause)
                    pause = min(pause * 2, 0.25)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None

    def __enter__(self) -> BoundedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
