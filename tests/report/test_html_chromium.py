"""The HTML report rendered in headless Chromium: charts and tables are there, the console is clean."""

import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from kerneltune.cli import app

from ..paths import FIXTURES, RESULTS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_report_renders_in_chromium(tmp_path):
    html = tmp_path / "r.html"
    journal = FIXTURES / "ranker_attention/run-c-journals"
    r = CliRunner().invoke(app, ["report", str(journal), "--html", str(html), "--baseline",
                                 str(RESULTS / "tables/nvidia-h200/ranker_attention.json")])
    assert r.exit_code == 0, r.output
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                          html.as_uri()], capture_output=True, text=True, timeout=120)
    dom = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    assert dom.count('class="heatmap"') == 4 and dom.count('class="scatter"') == 4
    assert dom.count("<circle") >= 50 and dom.count("<rect") >= 8
    assert 'class="ranking"' in dom and 'class="baseline"' in dom and 'id="failures"' in dom
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    shot = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1300,1800",
                           f"--screenshot={tmp_path / 'r.png'}", html.as_uri()], capture_output=True, timeout=120)
    assert shot.returncode == 0 and (tmp_path / "r.png").stat().st_size > 10_000
