"""What the command line takes from the terminal and the environment it runs in, made harmless: the result of a
command never depends on them.

- Strings read from files (a bucket name, an error, a path) are shown with every control character made visible
  (``SafeConsole``, ``VisibleLog``): an escape sequence in a journal could retitle or clear the terminal.
- Files are UTF-8 whatever the locale (``safe_io.atomic_writer``); the terminal gets what its encoding can show
  (the rest as backslash escapes), never an error after the work is done.
- A closed stdout (``| head -1``) costs the lines no one reads, never the work or the files it writes.
- ``COLUMNS`` is taken only where it is a width (``COLUMNS=0`` hid every error line).
- A deleted working folder is one line naming it, not a bare ``[Errno 2]``.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import sys
from typing import IO, Any

from rich.console import Console

from kerneltune.files.safe_io import visible

# Narrower than this is no width a table fits in, wider no terminal: COLUMNS outside is not taken.
MIN_COLUMNS, MAX_COLUMNS = 20, 10_000


def columns() -> int | None:
    """``COLUMNS`` where it is a plausible width, else None (the console then asks the terminal)."""
    text = os.environ.get("COLUMNS", "")
    return int(text) if text.isdigit() and MIN_COLUMNS <= int(text) <= MAX_COLUMNS else None


def console_width(fd: int, in_a_file: int) -> int | None:
    """The width a console prints at: ``COLUMNS`` where it is one, the terminal's own (None), or ``in_a_file``
    columns in a file or a CI log (Rich would wrap at 80 and cut every config short)."""
    if (given := columns()) is not None:
        return given
    try:
        return None if os.isatty(fd) else in_a_file
    except (OSError, ValueError):  # a closed descriptor
        return in_a_file


class SafeConsole(Console):
    """A Rich console that shows control characters as escapes (``safe_io.visible``) in everything it renders
    from a string: text, table cells and titles."""

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return super().render_str(visible(text), *args, **kwargs)


class VisibleLog(logging.Handler):
    """The engine's log lines on stderr (as Python's last-resort handler printed them), control characters made
    visible; stderr looked up at each line, so a test's captured stream is the one written."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(visible(self.format(record)) + "\n")
            sys.stderr.flush()
        except Exception:  # a log line never ends a command (a closed stderr, an encoding)
            self.handleError(record)


def visible_logs() -> None:
    """Every ``kerneltune`` log line through ``VisibleLog`` (once per process)."""
    logger = logging.getLogger("kerneltune")
    if not any(isinstance(h, VisibleLog) for h in logger.handlers):
        handler = VisibleLog(logging.NOTSET)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)


class _Unread:
    """stdout whose reader may go: on the first broken pipe the descriptor is pointed at /dev/null, and what is
    printed after (by this process or its children) is dropped, so the command goes on and ends as its work
    says."""

    def __init__(self, stream: IO[str]):
        self._stream = stream

    def _gone(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            with contextlib.suppress(OSError):
                self._stream.flush()  # what was held now goes to /dev/null

    # What Rich, print() and the interpreter's exit ask of stdout besides writing, passed on.
    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:
        return self._stream.encoding

    @property
    def errors(self) -> str | None:
        return self._stream.errors

    @property
    def buffer(self) -> Any:
        return self._stream.buffer

    @property
    def closed(self) -> bool:
        return self._stream.closed


def _terminal_encoding(stream: Any) -> None:
    """A stream whose encoding cannot show every character writes the rest as backslash escapes."""
    if isinstance(stream, io.TextIOWrapper) and stream.encoding.lower().replace("-", "") != "utf8":
        with contextlib.suppress(ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")


def working_folder_problem() -> str | None:
    """Why the working folder cannot be used (deleted, or no longer reachable), naming it; None if it can."""
    try:
        os.getcwd()
    except OSError as e:
        try:
            where = os.readlink("/proc/self/cwd").removesuffix(" (deleted)")
        except OSError:
            where = "the working folder"
        return f"the working folder {where} no longer exists ({e.strerror}); run kerneltune from a folder that does"
    return None


def prepare() -> None:
    """The real command line's process, before it parses: the standard streams made safe (encoding, a closed
    stdout) and the engine's log lines made visible."""
    for stream in (sys.stdout, sys.stderr):
        _terminal_encoding(stream)
    if not isinstance(sys.stdout, _Unread):
        sys.stdout = _Unread(sys.stdout)  # type: ignore[assignment]
    visible_logs()


__all__ = ["SafeConsole", "columns", "console_width", "prepare", "visible_logs", "working_folder_problem"]
