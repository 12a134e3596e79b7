"""The guide reads in a terminal and in order: every page is in the navigation, every line fits 120 columns, the
space file page's example is a space the engine accepts. (Links are checked by `mkdocs build --strict` in CI.)"""

import re
import tomllib
from pathlib import Path

from kerneltune.tuning.space import space_from_data

from ..paths import REPO

DOCS = REPO / "docs"


def test_every_page_is_in_the_navigation():
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert pages and not [p for p in pages if f": {p}" not in nav]


def test_every_line_fits_a_terminal():
    wide = [f"{p.name}:{n}" for p in sorted(DOCS.glob("*.md")) for n, line in enumerate(p.read_text().splitlines(), 1)
            if len(line) > 120]
    assert not wide


def test_the_space_file_example_is_a_space():
    text = re.search(r"```toml\n(.*?)```", (DOCS / "space-file.md").read_text(), re.S)[1]
    data = tomllib.loads(text)
    space = space_from_data(data, Path("space-file.md"), set(data["params"]), {"rows", "cols"}, "rms-norm")
    assert [b.name for b in space.buckets] == ["r4k-c256", "r1k-c1k"] and space.params["warps"] == [2, 4, 6, 8]
