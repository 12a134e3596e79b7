"""results/ is the record behind the shipped tables and the README's figures: every record the package, the
README and the CI cite exists, in the tree or in the tag that keeps the lab's history, and the package's
comments say why with a figure and a record, never which run."""

import re
import subprocess

import pytest

from .paths import REPO

CITING = [*sorted((REPO / "kerneltune").rglob("*.py")), REPO / "README.md", REPO / "results" / "README.md",
          REPO / "results" / "ranker_attention" / "notes.md", REPO / ".ci" / "run", REPO / ".ci" / "demo.sh",
          REPO / "tests" / "fixtures" / "README.md"]
PATH = re.compile(r"(lab-2026-12:)?(results/[A-Za-z0-9_./-]*[A-Za-z0-9_-])")
TAG = "lab-2026-12"


def _cited() -> list[tuple[str, bool, str]]:
    return [(str(f.relative_to(REPO)), bool(m.group(1)), m.group(2))
            for f in CITING for m in PATH.finditer(f.read_text())]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


def test_every_record_cited_in_the_tree_exists():
    missing = [(f, p) for f, in_tag, p in _cited() if not in_tag and not (REPO / p).exists() and p != "results/PATH"]
    assert not missing


def test_every_record_cited_in_the_lab_tag_exists_there():
    if _git("rev-parse", "--verify", "--quiet", f"{TAG}^{{}}").returncode != 0:
        pytest.skip(f"this checkout has no tag {TAG} (a clone without tags)")
    missing = [(f, p) for f, in_tag, p in _cited()
               if in_tag and p != "results/PATH" and _git("cat-file", "-e", f"{TAG}:{p}").returncode != 0]
    assert not missing


def test_results_holds_the_product_record_only():
    listed = _git("ls-files", "results")
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    assert len(listed.stdout.splitlines()) <= 150


def test_package_comments_name_no_run():
    """A comment gives the figure and the record's path; "run AB" or "attempt 21" means nothing to a reader."""
    named = [(str(f.relative_to(REPO)), n) for f in (REPO / "kerneltune").rglob("*.py")
             for n, line in enumerate(f.read_text().splitlines(), 1)
             if re.search(r"\b(runs? [A-Z]{1,2}|attempts? [0-9]+)\b", line)]
    assert not named
