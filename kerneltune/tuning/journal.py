"""The append-only journal of finished candidates: one JSON line each, flushed and fsynced.

A ``kill -9`` at any moment loses at most the candidate in flight. Reader and writer judge a last line without
its newline alike (``whole_record``): a whole record whose newline a kill or a full disk cut off is read, and
the writer ends it with its newline before the next append; anything else there is torn, skipped on reading and
cut before the next append. One sweep writes a journal (``WriterLock``, a lock on the file itself, kept across
``--no-resume``'s setting aside), never through a link, and never one another user owns or can write.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from filelock import Timeout

from kerneltune.files.locks import BoundedLock, holder
from kerneltune.files.logs import log_once
from kerneltune.files.paths import SHARED_FILE, make_folder
from kerneltune.files.records import Record, config_key, positive_time, record_defect
from kerneltune.files.safe_io import (
    MAX_JOURNAL_BYTES,
    BadJson,
    UnsafeFile,
    loads_bounded_json,
    open_regular,
    size_text,
)
from kerneltune.files.trust import check_trusted
from kerneltune.seams.wire import Status
from kerneltune.tables.stamps import now_stamp

log = logging.getLogger("kerneltune.journal")


def make_record(base: Mapping[str, Any], config: Mapping[str, Any], reply: Mapping[str, Any],
                **extra: Any) -> Record:
    """One finished candidate as journaled: the bucket's fields, the config, the worker's reply
    (less its worker-restart marker), its time, and % of the measured ceiling. Checked where it is appended."""
    record = Record.build({**base, "key": config_key(config), **reply, **extra})
    record = record.replace(config=dict(config), time=record.time or now_stamp(),
                            extra={k: v for k, v in record.extra.items() if k != "restart"})
    median = record.median_us
    if median is not None and not positive_time(median):  # a broken timer's answer is no measurement
        record = record.replace(status=Status.RUNTIME, timing=None,
                                error=f"the timing's median {median!r} us is not a positive finite time")
    if (pct := record.pct_of_ceiling()) is not None:
        record = record.replace(pct_ceiling=pct)
    return record


def merged_journals(path: Path) -> dict[tuple[str, str], Record]:
    """(bucket, config key) -> record over one journal or a folder of them (one per worker of a
    shared study): the earliest measurement of a config wins, then the journal's name."""
    paths = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    best: dict[tuple[str, str], tuple[tuple[str, str], Record]] = {}
    for p in paths:
        for r in Journal(p).records():
            rank = (r.time or "", str(p))
            key = (r.bucket, r.key)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, r)
    return {k: r for k, (_, r) in best.items()}


def whole_record(raw: bytes) -> bool:
    """Whether a line (its newline cut or not) is a whole record: what the reader reads and the writer keeps."""
    try:
        rec = loads_bounded_json(raw, "")
    except BadJson:
        return False
    return not (_SURROGATE.search(raw) and not _encodes(rec)) and record_defect(rec) is None


def cut_torn_tail(path: Path, whole: Callable[[bytes], bool] | None = None) -> int:
    """Cut a line-per-record file back to its last whole line (a write cut by a kill or a full disk); the bytes
    cut, 0 if the file ends whole or is absent. The next append then starts a line of its own. A last line that
    ``whole`` takes (a record whose newline alone was cut) is ended with its newline instead, and kept."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    with os.fdopen(fd, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        keep, end = 0, size - 1
        while end > 0:  # back from the end a block at a time: the file is never read whole
            start = max(0, end - (1 << 16))
            f.seek(start)
            if (i := f.read(end - start).rfind(b"\n")) != -1:
                keep = start + i + 1
                break
            end = start
        if whole is not None and size - keep <= MAX_JOURNAL_BYTES:
            f.seek(keep)
            if whole(f.read(size - keep)):
                f.seek(size)
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
                return 0
        f.truncate(keep)
    return size - keep


class JournalError(ValueError):
    pass


NAMED_BAD_LINES = 3


_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _encodes(rec: Any) -> bool:
    try:
        json.dumps(rec, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class WriterLock:
    """An exclusive ``flock`` on the journal file itself, so that one sweep writes it, whatever name it is given:
    a hard link reaches the same inode, which a lock file named after the path did not (two sweeps through two
    hard links wrote 27 duplicate records). A link is refused (a sweep cut its target's last line and appended to
    it), as is a journal, or its folder, that another user owns or can write (``trust``). Taken at once or not at
    all; released by ``release`` or when the process dies.

    The lock is checked to be on the file the path names now: a sweep that sets the journal aside (``--no-resume``)
    puts a new file there already locked (``start_afresh``), and a sweep that locked the old file meanwhile finds it
    is no longer the journal."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def _open(self, path: Path) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, SHARED_FILE)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise JournalError(f"{self.path}: a link to {os.readlink(self.path)}; a journal is written only as a "
                                   f"file of its own (give its target, or another --journal)") from None
            raise JournalError(f"{self.path}: cannot be opened for writing ({e.strerror})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise JournalError(f"{self.path}: not a regular file; a journal is one")
        return fd

    def acquire(self) -> None:
        make_folder(self.path.parent)
        try:
            check_trusted(self.path)
        except PermissionError as e:
            raise JournalError(str(e)) from None
        for _ in range(3):  # the file renamed aside between our open and our lock: open the new one
            fd = self._open(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = holder(fd)
                os.close(fd)
                raise Timeout(f"{self.path} (held by {who})") from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, self.path):
                self._fd = fd
                return
            os.close(fd)
        raise Timeout(str(self.path))

    def start_afresh(self) -> Path | None:
        """``--no-resume``: the journal moved aside (the path it went to; None if there was none), and a new,
        empty one in its place, locked before it is there, so no other sweep ever writes it."""
        assert self._fd is not None, "start_afresh needs the lock"
        if os.fstat(self._fd).st_size == 0:
            return None
        new = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        fresh = self._open(new)
        try:
            fcntl.flock(fresh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            aside = _set_aside(self.path)
            try:
                os.link(new, self.path)  # never over a file another sweep put there meanwhile
            except FileExistsError:
                raise Timeout(f"{self.path} (made by another sweep while this one set the old journal aside to "
                              f"{aside})") from None
        except BaseException:
            os.close(fresh)
            raise
        finally:
            new.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = fresh
        return aside

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)


def _set_aside(path: Path) -> Path:
    """Move a journal a fresh start does not resume beside it, under a name no earlier one holds: a second
    fresh start within the same second must not overwrite the first one's measurements."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    n = 0
    while (aside := path.with_suffix(f".{stamp}{f'-{n}' if n else ''}.jsonl")).exists():
        n += 1
    path.rename(aside)
    return aside


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        make_folder(self.path.parent)
        self._lock = BoundedLock(f"{self.path}.lock", f"the journal {self.path}")

    def writer_lock(self) -> WriterLock:
        """The lock a sweep holds while it writes this journal (taken at once or not at all)."""
        return WriterLock(self.path)

    def records(self) -> Iterator[Record]:
        """Every usable record. A torn final line (a kill mid-write) is skipped in silence; any other line that
        is not a record (``record_defect``), or is JSON past ``safe_io``'s bounds, is skipped with a warning naming
        the file and line (the first ``NAMED_BAD_LINES`` of a file, then how many more). A journal that is no
        regular file (a FIFO, a device), cannot be read, or holds more than ``MAX_JOURNAL_BYTES`` is a JournalError
        naming it, raised before any record: it is read a line at a time, never whole, never past that bound."""
        try:
            f = open_regular(self.path, MAX_JOURNAL_BYTES, "journal")
        except FileNotFoundError:
            return
        except UnsafeFile as e:
            raise JournalError(str(e)) from None
        except OSError as e:  # a folder, a loop of links, a file the user may not read: named, never raised raw
            raise JournalError(f"{self.path}: cannot be read ({e.strerror or type(e).__name__})") from None
        with f:
            yield from self._parsed(f)

    def _parsed(self, f: IO[bytes]) -> Iterator[Record]:
        """The records of the opened journal ``f``, a line at a time, each line bounded by what is left of the
        journal's bound (a file can grow while it is read: another worker appends to it)."""
        bad = read = n = 0
        while raw := f.readline(MAX_JOURNAL_BYTES + 1 - read):
            read += len(raw)
            if read > MAX_JOURNAL_BYTES:  # grew past the bound while read
                raise JournalError(f"{self.path}: holds more than {size_text(MAX_JOURNAL_BYTES)}, the most a journal "
                                   f"may hold; read no further")
            n += 1
            if not raw.strip():
                continue
            try:
                rec = loads_bounded_json(raw, f"{self.path}:{n}")
            except BadJson as e:  # not JSON, not UTF-8, nested too deeply, an integer of 100,000 digits
                if not raw.endswith(b"\n"):  # the last line, not newline-terminated: torn by a kill (``whole_record``)
                    break
                why = "not a JSON line" if e.syntax else e.why
            else:
                if _SURROGATE.search(raw) and not _encodes(rec):  # "\\ud800": JSON, but no text any output takes
                    why = "a string holds a lone surrogate (\\ud800-\\udfff), which is no text"
                elif (why := record_defect(rec)) is None:
                    yield Record.build(rec)
                    continue
            bad += 1
            if bad <= NAMED_BAD_LINES:
                log_once(log, f"{self.path}:{n}: {why}; record skipped")
        if bad > NAMED_BAD_LINES:
            log_once(log, f"{self.path}: {bad - NAMED_BAD_LINES} more lines that are not records skipped")

    def done(self) -> dict[tuple[str, str], Record]:
        """(bucket, config key) -> record, the last one winning."""
        return {(r.bucket, r.key): r for r in self.records()}

    def append(self, record: Record | Mapping[str, Any]) -> None:
        """One record, as a line: a ``Record``, or its JSON object (checked alike)."""
        obj = record.to_json() if isinstance(record, Record) else record
        if (why := record_defect(obj)) is not None:
            raise JournalError(f"{self.path}: refusing to journal a record that could not be read back: {why}")
        line = json.dumps(obj, sort_keys=True) + "\n"
        with self._lock:
            self._repair_torn_tail()
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                             SHARED_FILE)
                if os.fstat(fd).st_size == 0:  # new: readable by the team whatever the umask
                    os.fchmod(fd, SHARED_FILE)
                with os.fdopen(fd, "ab") as f:
                    f.write(line.encode())
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:  # a full disk, a quota, a file made read-only: named, with what is kept
                raise JournalError(f"{self.path}: cannot append a record ({e.strerror or e}); every record before "
                                   f"it is kept, and the same command resumes from them once it can write") from None

    def _repair_torn_tail(self) -> None:
        try:
            cut = cut_torn_tail(self.path, whole_record)
        except OSError as e:
            raise JournalError(f"{self.path}: cannot be repaired before an append ({e.strerror or e})") from None
        if cut:
            log.warning("%s: dropped a torn last line of %d bytes (a write cut by a kill); the candidate it held "
                        "is measured again", self.path, cut)
