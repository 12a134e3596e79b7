"""The guide's "Your own kernel" page, run as written: its file blocks saved, its shell and Python blocks run in
order in an empty folder, as a reader would. The page cannot drift from the code."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ..paths import REPO
from ..verdicts import only_slower

PAGE = REPO / "docs" / "own-kernel.md"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>[\w.]+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)


def blocks(page: Path) -> list[tuple[str, str | None, str]]:
    """(language, file name or None, text) of every fenced block, in order."""
    return [(m["lang"], m["file"], m["body"]) for m in BLOCK.finditer(page.read_text())]


def test_the_page_has_the_blocks_a_reader_runs():
    langs = [(lang, file) for lang, file, _ in blocks(PAGE)]
    assert langs[0] == ("python", "rmsnorm.py") and ("sh", None) in langs and ("python", None) in langs


@pytest.mark.slow
def test_the_own_kernel_page_runs_as_written(tmp_path):
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "KERNELTUNE_TABLES": str(tmp_path / "user-tables"), "PATH": bin_dir + os.pathsep
           + os.environ["PATH"], "PYTHONPATH": str(tmp_path)}
    ran = []
    for lang, file, body in blocks(PAGE):
        if file is not None:
            (tmp_path / file).write_text(body)
            continue
        if lang == "sh":
            for line in body.strip().splitlines():
                args = shlex.split(line)
                if args[0] == "kerneltune":  # the venv's, also where the shell's PATH has another
                    args = [sys.executable, "-m", "kerneltune", *args[1:]]
                r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
                # verify may find a timing unsettled on a busy test machine (exit 4, as the page says); never worse
                # (a correct entry judged slower is timed once more: ``only_slower``).
                if args[3:4] == ["verify"] and r.returncode == 1 and only_slower(r.stdout):
                    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
                allowed = (0, 4) if args[3:4] == ["verify"] else (0,)
                assert r.returncode in allowed, f"{line}\n{r.stdout}\n{r.stderr}"
                ran.append(line)
        elif lang == "python":
            r = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, f"{body}\n{r.stdout}\n{r.stderr}"
            assert "tuned: {'block_rows'" in r.stdout and "untuned shape:" in r.stdout
            ran.append("python")
    assert ran[0].startswith("kerneltune sweep") and "python" in ran and ran[-1].startswith("kerneltune report")
    assert (tmp_path / "verify.xml").is_file() and (tmp_path / "report.html").is_file()
