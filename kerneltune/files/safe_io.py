"""Reading a file the tool takes as data (a tuned table, a journal, a bench result, a baseline) as what it claims to be.

Such a file may be anything a user, a shared folder or a bad copy left there: a FIFO (an open blocks until a
writer comes, so a launch would hang), a link to ``/dev/zero`` (a read never ends), a file of gigabytes, JSON
with a 100,000-digit integer (Python refuses it with a ValueError that is no JSONDecodeError) or nested 100,000
deep. Here a file is opened only if it is a regular file, read only up to a stated size, and parsed only within
stated bounds; anything else is one error naming the file, that each reader turns into its own typed error.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import reprlib
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

# The most bytes each kind of file may hold. Here, not in ``limits.py`` (that module holds measuring's limits and
# has another owner): these bound what a file can make the tool read and hold, one place for every reader.
# A table holds one entry a bucket, 1-5 KiB each: the shipped one is 34 KiB, 64 MiB is thousands of times that.
# A bench result is one row per shape and implementation, 1-2 KiB each; the same bound.
MAX_TABLE_BYTES = 64 << 20
MAX_BENCH_BYTES = 64 << 20
# A journal is one line per candidate, 1-2 KiB each, appended to for the life of a study: 1 GiB is ~10^6 of them.
MAX_JOURNAL_BYTES = 1 << 30
# A miss ledger holds at most 10,000 records (``tables.ledger``), under 1 KiB each but a Triton call's (its arguments'
# shapes and grids, a few KiB): 64 MiB.
MAX_LEDGER_BYTES = 64 << 20

# JSON's bounds. Python's own default limit on an integer's digits (``sys.get_int_max_str_digits``), kept even
# where the environment lifts it (PYTHONINTMAXSTRDIGITS=0 makes a long integer's parse quadratic: a hang).
MAX_INT_DIGITS = 4300
# Nesting: a table is 6 levels deep, a journal line 4; past this a file is no table or journal. Bounded here, well
# under the interpreter's recursion limit, so that no later repr, comparison or rewrite of a value recurses out.
MAX_JSON_DEPTH = 64

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class UnsafeFile(OSError):
    """A file that is not a regular file, or is over its size bound: one line naming it (``filename``) and why
    (``strerror``). An OSError, as the file cannot be read as data, so a reader's handling of OS errors (a file
    it may not read) covers it."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class BadJson(ValueError):
    """Text that is not JSON within the bounds: ``why`` says what (``syntax``: not JSON at all, rather than JSON
    past a bound); the message is ``where: why``."""

    def __init__(self, where: str, why: str, syntax: bool = False):
        super().__init__(f"{where}: {why}")
        self.where, self.why, self.syntax = where, why, syntax

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a worker process, it crosses back whole
        return BadJson, (self.where, self.why, self.syntax)


_SHORT = reprlib.Repr(maxlevel=2, maxstring=80, maxother=80, maxlong=40, maxlist=4, maxdict=4)


def brief(value: Any) -> str:
    """A value from a file as a message quotes it: short (it may be a string of megabytes), on one line."""
    return _SHORT.repr(value)


# What a terminal acts on rather than shows: C0 controls but the newline and the tab (ESC starts a sequence that
# retitles or clears it), DEL, C1 controls (0x9b is a one-byte CSI) and the bidirectional overrides and isolates,
# which reorder what is shown ("Trojan source").
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on (escape sequences, carriage returns, C1 controls,
    bidirectional overrides) written as its escape (``\\x1b``), so a string read from a file is shown, never
    obeyed. Newlines and tabs stay."""
    return _CONTROLS.sub(_escaped, text)


def size_text(n: int) -> str:
    """A bound in words: '64 MiB', '1 GiB'."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _refuse_unless_regular(path: Path | str, mode: int) -> None:
    """A directory as Python's own ``open`` refuses it (IsADirectoryError); a FIFO, a device, a socket as UnsafeFile."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UnsafeFile(errno.EINVAL, f"is {kind}, not a regular file" if kind.startswith("a ") else kind, str(path))


def _too_big(path: Path | str, limit: int, what: str, size: int | None = None) -> UnsafeFile:
    held = f"{size} bytes" if size is not None else "more"
    return UnsafeFile(errno.EFBIG, f"holds {held}, over the {size_text(limit)} a {what} may hold; not read",
                      str(path))


def _mode_before_open(path: Path | str) -> int:
    """The mode of what ``path`` names (links followed), before it is opened: a device is never opened at all (an
    open alone can act: a tape rewinds, a watchdog arms). The opened file is checked again (``open_regular``)."""
    return os.stat(path).st_mode


def open_regular(path: Path | str, limit: int, what: str) -> IO[bytes]:
    """``path`` opened for reading in binary, if it is a regular file (links to one are fine) of at most ``limit``
    bytes. The check is made on the opened descriptor, the file that will be read, not on a name that may have
    changed since; the open is non-blocking, so a FIFO put there in between cannot hang it.

    FileNotFoundError if nothing is there (a reader's "absent"); IsADirectoryError for a directory; UnsafeFile
    for a FIFO, a device, a socket or a file over ``limit`` (``what``, e.g. "tuned table", names the bound's
    kind in the message); any other OSError as the system says it."""
    _refuse_unless_regular(path, _mode_before_open(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        _refuse_unless_regular(path, st.st_mode)
        if st.st_size > limit:
            raise _too_big(path, limit, what, st.st_size)
        os.set_blocking(fd, True)  # a regular file never blocks; reads then behave as any file's
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_bytes(path: Path | str, limit: int, what: str) -> bytes:
    """The bytes of the regular file at ``path`` (``open_regular``'s checks and errors), read to at most ``limit``
    bytes: a file that grows past it while read (or says 0 bytes and is not, as /proc's do) is UnsafeFile, and
    only ``limit`` + 1 bytes are ever held."""
    with open_regular(path, limit, what) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        total = 0
        want = max(size + 1, 1 << 16)  # one read the file's size for a file that stays put
        while total <= limit:
            chunk = os.read(fd, min(want, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = 1 << 20
    if total > limit:
        raise _too_big(path, limit, what)
    return b"".join(chunks)


def _bounded_int(text: str) -> int:
    """An integer of JSON, refused past ``MAX_INT_DIGITS`` digits where the interpreter's own limit is lifted."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"Exceeds the limit ({MAX_INT_DIGITS} digits) for integer string conversion")
    return int(text)


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep; a loop, not recursion, over its containers."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def loads_bounded_json(text: str | bytes, where: str) -> Any:
    """``json.loads`` of ``text`` (bytes are read as UTF-8, -16 or -32 as JSON allows) within the bounds: an integer
    of at most ``MAX_INT_DIGITS`` digits, at most ``MAX_JSON_DEPTH`` levels of nesting. Anything else is BadJson
    ``where: why`` (``where`` names the file, or the file and line), never another exception: a ValueError of an
    integer's length is no JSONDecodeError, and a RecursionError is no ValueError at all.

    NaN and the infinities are read, as Python writes them (a journal's error of a broken output may be one):
    a reader that takes a time checks it is a positive finite number (``tables.store.positive_time``)."""
    lifted = not 0 < sys.get_int_max_str_digits() <= MAX_INT_DIGITS
    digits = MAX_INT_DIGITS if lifted else sys.get_int_max_str_digits()
    try:
        value = json.loads(text, parse_int=_bounded_int if lifted else None)
    except json.JSONDecodeError as e:
        raise BadJson(where, f"not valid JSON (line {e.lineno}: {e.msg})", syntax=True) from None
    except UnicodeDecodeError:
        raise BadJson(where, "not a text file (it is not UTF-8)", syntax=True) from None
    except RecursionError:
        raise BadJson(where, f"nested too deeply (more than {MAX_JSON_DEPTH} levels)") from None
    except ValueError as e:  # the integer's digits (the one other ValueError json.loads raises)
        if "integer string conversion" in str(e):
            raise BadJson(where, f"holds an integer of more than {digits} digits") from None
        raise BadJson(where, f"not valid JSON ({e})", syntax=True) from None
    brackets = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    if brackets > MAX_JSON_DEPTH and deeper_than(value, MAX_JSON_DEPTH):  # the count: no walk of a short line
        raise BadJson(where, f"nested too deeply (more than {MAX_JSON_DEPTH} levels)")
    return value


def _refuse_link(path: Path) -> None:
    """A link at ``path`` is refused: a write replaces a file of its own folder, never what a link names."""
    try:
        target = os.readlink(path)
    except (FileNotFoundError, OSError):
        return
    raise UnsafeFile(errno.ELOOP, f"a link to {target}; kerneltune writes a file of its own, never through a link "
                                  f"(remove the link, or give its target)", str(path))


@contextlib.contextmanager
def atomic_writer(path: Path | str, binary: bool = False, mode: int = 0o644) -> Iterator[IO[Any]]:
    """A file written whole or not at all: what the block writes goes to a temporary file beside ``path`` (text
    in UTF-8 whatever the locale), synced, then renamed over it; a kill, a full disk or an error in the block leaves
    the file as it was and no temporary file. Refused before anything is written (``trust.Untrusted``, or
    UnsafeFile for a link): a link at ``path``, a file there another user owns or can write, a folder another user
    owns or can write. An OSError names ``path``, never the temporary file. ``mode``: the file's permissions,
    whatever the umask (read by the team: 0o644)."""
    from kerneltune.files.trust import check_trusted

    path = Path(path)
    _refuse_link(path)
    check_trusted(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:  # the error names the file asked for, not a temporary file beside it
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        os.fchmod(fd, mode)
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk, a quota: the file named (the one there is unchanged)
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the rename itself made durable; a folder that cannot be synced costs nothing
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_atomic(path: Path | str, data: str | bytes, mode: int = 0o644) -> None:
    """``data`` as the whole of ``path`` (``atomic_writer``'s guarantees and refusals); text as UTF-8."""
    with atomic_writer(path, binary=True, mode=mode) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
