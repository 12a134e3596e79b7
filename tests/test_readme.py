"""The README lists every command and every option of each (checked against the CLI itself)."""

import re

import typer.main

from kerneltune.cli import app

from .paths import REPO


def test_every_option_of_every_command_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    root = typer.main.get_command(app)
    missing = []
    for name, command in root.commands.items():
        rows = [line for line in readme.splitlines() if re.match(rf"\| `kerneltune {name}\b", line)]
        if not rows:
            missing.append(f"command {name}")
            continue
        for param in command.params:
            for opt in (o for o in param.opts if o.startswith("--") and o != "--help"):
                if not re.search(rf"[`\[ ]{re.escape(opt)}\b", rows[0]):
                    missing.append(f"{name} {opt}")
    for param in root.params:  # the options every command takes
        missing += [f"kerneltune {o}" for o in param.opts if o != "--help" and f"`kerneltune {o}" not in readme]
    assert not missing, f"README lacks: {', '.join(missing)}"
