"""The README lists every command and every option of each (checked against the CLI itself), in lines a
terminal holds."""

import re

import typer.main

from kerneltune.cli import app

from .paths import REPO


def test_every_option_of_every_command_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    root = typer.main.get_command(app)
    missing = []
    for name, command in root.commands.items():
        section = re.search(rf"^### `kerneltune {name}\b.*?(?=^#)", readme, re.M | re.S)
        if section is None:
            missing.append(f"command {name}")
            continue
        for param in command.params:
            for opt in (o for o in param.opts if o.startswith("--") and o != "--help"):
                if not re.search(rf"[`\[ ]{re.escape(opt)}\b", section[0]):
                    missing.append(f"{name} {opt}")
    for param in root.params:  # the options every command takes
        missing += [f"kerneltune {o}" for o in param.opts if o != "--help" and f"`kerneltune {o}" not in readme]
    assert not missing, f"README lacks: {', '.join(missing)}"


def test_readme_lines_fit_a_terminal():
    """Every line, prose, tables and code alike, fits 120 columns (a row of 1,596 characters did not)."""
    wide = [n for n, line in enumerate((REPO / "README.md").read_text().splitlines(), 1) if len(line) > 120]
    assert not wide, f"README lines over 120 columns: {wide}"
