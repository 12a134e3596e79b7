"""results/ is the record behind the shipped tables and the docs' figures: every record the package, the
docs and the CI cite exists, in the tree or at the commit of main's history cited with it (never a tag or a
branch: neither travels with a clone), and the package's comments say why with a figure and a record, never
which run."""

import re
import subprocess

import pytest

from .paths import REPO

CITING = [*sorted((REPO / "kerneltune").rglob("*.py")), REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")),
          REPO / "results" / "README.md", REPO / "results" / "ranker_attention" / "notes.md", REPO / ".ci" / "run",
          REPO / ".ci" / "demo.sh", REPO / "tests" / "fixtures" / "README.md"]
PATH = re.compile(r"(?:([0-9a-f]{7,40}):)?(results/[A-Za-z0-9_./-]*[A-Za-z0-9_-])")


def _cited() -> list[tuple[str, str | None, str]]:
    """(citing file, the commit cited or None for the tree, the record's path)."""
    return [(str(f.relative_to(REPO)), m.group(1), m.group(2)) for f in CITING for m in PATH.finditer(f.read_text())]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


def test_every_record_cited_in_the_tree_exists():
    missing = [(f, p) for f, commit, p in _cited() if commit is None and not (REPO / p).exists()
               and p != "results/PATH"]
    assert not missing


def test_every_record_cited_at_a_commit_exists_there():
    cited = [(f, c, p) for f, c, p in _cited() if c is not None and p != "results/PATH"]
    assert cited  # the lab's history is cited at a commit
    if _git("cat-file", "-e", f"{cited[0][1]}^{{commit}}").returncode != 0:
        pytest.skip(f"this checkout lacks main's history (a shallow clone): {cited[0][1]} is not in it")
    missing = [(f, c, p) for f, c, p in _cited() if c is not None and p != "results/PATH"
               and _git("cat-file", "-e", f"{c}:{p}").returncode != 0]
    assert not missing


def test_nothing_cites_a_tag_or_a_branch():
    """A tag or a branch does not travel with a clone; a commit of main does."""
    tags = [(str(f.relative_to(REPO)), n) for f in CITING
            for n, line in enumerate(f.read_text().splitlines(), 1) if re.search(r"\blab-20\d\d-\d\d\b", line)]
    assert not tags


def test_results_holds_the_product_record_only():
    listed = _git("ls-files", "results")
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    # 150 + the busy-host record (issue 93), one file, + the GPU records' index and one record of its 4 files,
    # + the shared-hosts record (issue 94), one file
    assert len(listed.stdout.splitlines()) <= 157


def test_package_comments_name_no_run():
    """A comment gives the figure and the record's path; "run AB" or "attempt 21" means nothing to a reader."""
    named = [(str(f.relative_to(REPO)), n) for f in (REPO / "kerneltune").rglob("*.py")
             for n, line in enumerate(f.read_text().splitlines(), 1)
             if re.search(r"\b(runs? [A-Z]{1,2}|attempts? [0-9]+)\b", line)]
    assert not named


def test_tests_read_fixtures_not_records():
    """A record may leave the tree (into main's history) without breaking a test: tests read tests/fixtures/."""
    readers = [(str(f.relative_to(REPO)), m.group(0)) for f in sorted((REPO / "tests").rglob("*.py"))
               if f.name != "test_records.py"
               for m in re.finditer(r"results/(ranker_attention|drafter_wide|engine|bench|mutation)/[\w.-]+",
                                    f.read_text())]
    assert not readers
