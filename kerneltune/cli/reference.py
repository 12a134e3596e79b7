"""The guide's command reference (``docs/commands.md``), generated from the command line itself, so that the two
cannot differ: ``python -m kerneltune.cli.reference > docs/commands.md``; a test compares them."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

import typer.main
from typer.core import TyperArgument

from .app import app

INTRO = """# Commands

Every command and every option, generated from the command line itself (`python -m kerneltune.cli.reference`);
`kerneltune COMMAND --help` prints the same. [Concepts](concepts.md) defines the words used here. A failure is one
line on stderr naming the culprit, and the exit code says what kind: [kerneltune in CI](ci.md) lists them."""

WIDTH = 120


def _wrap(text: str, indent: str = "") -> str:
    """Paragraphs filled to the guide's width, continuation lines indented by ``indent``."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n")]
    return "\n\n".join(textwrap.fill(p, WIDTH, subsequent_indent=indent) for p in paragraphs)


def _option(param: Any) -> str:
    argument = isinstance(param, TyperArgument)
    names = f"`{param.name.upper()}`" if argument else " / ".join(f"`{n}`" for n in [*param.opts,
                                                                                   *param.secondary_opts])
    default = param.default if not callable(param.default) else None
    if default is True and param.secondary_opts:  # a flag pair: the default is one of its two names
        default = param.opts[0]
    none = default is None or default is False or (isinstance(default, str | tuple | list) and not default)
    shown = "" if none or argument else f" Default: `{default}`."
    return _wrap(f"- {names}: {param.help or ''}{shown}", "  ")


def markdown() -> str:
    root = typer.main.get_command(app)
    parts = [INTRO, "## Options every command takes", "\n".join(_option(p) for p in root.params if p.opts)]
    for name, command in root.commands.items():
        arguments = [p for p in command.params if isinstance(p, TyperArgument)]
        usage = " ".join([f"kerneltune {name}", *(p.name.upper() + ("..." if p.nargs == -1 else "")
                                                   for p in arguments), "[OPTIONS]"])
        parts += [f"## `{usage}`", _wrap(command.help or "")]
        parts += ["\n".join(_option(p) for p in command.params)]
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
