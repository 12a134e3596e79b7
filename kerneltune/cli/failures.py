"""How a command ends: one line on stderr naming the culprit, and a documented exit code.

Exit codes: 0 everything checked on the target passed; 1 wrong or slower; 2 the target hardware is
absent (the line says which); 3 bad input (a file, a name or an option; the line names it); 4 correct, but
a speed could not be judged (``verify``: timings did not settle); 130 interrupted (SIGINT or SIGTERM; the line
says what was kept). ``--debug`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.markup import escape
from typer.core import TyperGroup

from kerneltune.seams.registry import UnknownName
from kerneltune.tables.store import TableError
from kerneltune.tuning.journal import JournalError
from kerneltune.tuning.space import SpaceError

from .terminal import SafeConsole, console_width

try:  # Typer >= 0.2x carries its own copy of click, whose exceptions it raises
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:
    from click.exceptions import NoArgsIsHelpError, UsageError

EXIT_FAILED, EXIT_NO_HARDWARE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 3, 130
errors = SafeConsole(stderr=True, width=console_width(2, 400))
debug = False  # set by the app's ``--debug``


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, markup in the message shown as written, and the exit code."""
    errors.print(f"[red]error:[/red] {escape(' '.join(str(message).split()))}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, KeyError):
        return f"missing field {e}"
    return str(e) or type(e).__name__


@contextlib.contextmanager
def bad_input_is_one_line() -> Iterator[None]:
    """Bad input (a file, a name, an option) ends in one line naming it, exit 3, unless ``--debug``."""
    try:
        yield
    except (SpaceError, UnknownName, TableError, JournalError, ValueError, OSError, KeyError) as e:
        if debug:
            raise
        fail(describe(e))


@contextlib.contextmanager
def interrupt_is_one_line(kept: str | Callable[[], str]) -> Iterator[None]:
    """SIGINT (or SIGTERM, mapped to it) ends in one line saying what was kept (``kept``, or what it says when
    called), exit 130 (not Click's "Aborted!" and exit 1, which reads as a failed check)."""
    try:
        yield
    except KeyboardInterrupt:
        if debug:
            raise
        fail(f"interrupted; {kept() if callable(kept) else kept}", EXIT_INTERRUPTED)


def sigterm_is_an_interrupt(signum: int, frame: object) -> None:
    """A CI job's timeout sends SIGTERM: stop as on Ctrl-C, keeping what is finished, instead of dying."""
    raise KeyboardInterrupt


def writable_file(path: Path, option: str) -> None:
    """Fail now, naming the option, where ``path`` could not be written at the end of a long run: a folder, a
    device or a FIFO, a link to nothing, a folder that may not be written, a read-only or full file system (a
    probe of a few KiB is written beside it, synced, and removed)."""
    if path.is_dir():
        fail(f"{option} {path}: is a folder; give a file name")
    if path.is_symlink() and not path.exists():
        fail(f"{option} {path}: a link to {os.readlink(path)}, which does not exist")
    if path.exists() and not path.is_file():
        fail(f"{option} {path}: not a regular file (a device, a FIFO or a socket)")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir():
        fail(f"{option} {path}: {folder} is a file, not a folder")
    # Where the file's folder is missing, the folder to be made is the culprit, not only the one it would be made in
    # ("/proc cannot be written (No such file or directory)" named neither the missing /proc/x nor why).
    made = next((p for p in (path.parent, *path.parent.parents) if p.parent == folder), None)
    missing = f"the folder {made} does not exist, and " if made is not None and made != folder else ""
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"{option} {path}: {missing}{folder} is not writable")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".kerneltune-probe-") as probe:
            probe.write(b"\0" * 16384)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as e:
        fail(f"{option} {path}: {missing}{folder} cannot be written ({e.strerror or type(e).__name__})")


class UsageIsBadInput(TyperGroup):
    """A usage error (an unknown option, a missing argument, a bad value) is one line naming the command, and
    exits 3, bad input, not click's 2: 2 says the target hardware is absent, which CI recipes tolerate
    (``|| test $? -eq 2``), so a typo in an option would pass CI."""

    @staticmethod
    def _bad_input(e: UsageError) -> None:
        if isinstance(e, NoArgsIsHelpError):  # no command at all: the help is the answer
            return
        where = f"{e.ctx.command_path}: " if e.ctx is not None else ""
        fail(f"{where}{e.format_message()} (--help lists the options)")

    def _main_shell_completion(self, *args: Any, **kwargs: Any) -> None:
        """No shell completion (the app is made without it): ``_KERNELTUNE_COMPLETE`` in the environment made
        every command a silent no-op exiting 1."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as e:
            self._bad_input(e)
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as e:
            self._bad_input(e)
            raise
