"""The README is the front page: at most 200 lines a terminal holds, its two commands, every command of the CLI
named, every link it gives resolving. The command reference itself is the guide's, generated from the CLI
(``tests/docs/test_commands_page.py``)."""

import re

import typer.main

from kerneltune.cli import app

from .paths import REPO

README = (REPO / "README.md").read_text()


def test_the_readme_is_a_front_page():
    assert len(README.splitlines()) <= 200


def test_readme_lines_fit_a_terminal():
    """Every line, prose, tables and code alike, fits 120 columns (a row of 1,596 characters did not)."""
    wide = [n for n, line in enumerate(README.splitlines(), 1) if len(line) > 120]
    assert not wide, f"README lines over 120 columns: {wide}"


def test_the_two_commands_lead():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)[1]
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_every_command_is_named():
    root = typer.main.get_command(app)
    missing = [name for name in root.commands if f"`kerneltune {name}" not in README]
    assert not missing, f"README does not name: {missing}"


def test_every_link_resolves():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links and not [link for link in links if not (REPO / link).exists()]


def test_no_tag_is_cited():
    assert not re.search(r"\blab-20\d\d-\d\d\b", README)
