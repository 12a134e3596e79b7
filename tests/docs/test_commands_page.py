"""The guide's command reference is the command line's own help, generated: it never lists an option the CLI
lacks, nor misses one it has."""

from kerneltune.cli.reference import markdown

from ..paths import REPO


def test_the_commands_page_is_generated_from_the_cli():
    page = (REPO / "docs" / "commands.md").read_text()
    assert page == markdown(), "docs/commands.md is out of date: python -m kerneltune.cli.reference > docs/commands.md"


def test_every_option_is_on_the_page():
    import typer.main

    from kerneltune.cli import app

    page = (REPO / "docs" / "commands.md").read_text()
    root = typer.main.get_command(app)
    options = [o for c in root.commands.values() for p in c.params for o in p.opts if o.startswith("--")]
    assert options and all(f"`{o}`" in page for o in options)
