"""The HTML report rendered in headless Chromium: charts and tables are there, the console is clean."""

import re
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.tables.locations import shipped_tables_dir

from ..paths import FIXTURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


@pytest.mark.slow  # a browser's start and render, 5-7 s: `make test`'s, not the quick loop's
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_report_renders_in_chromium_without_overflow_at_1280_px(tmp_path):
    html = tmp_path / "r.html"
    journal = FIXTURES / "ranker_attention/run-c-journals"
    r = CliRunner().invoke(app, ["report", str(journal), "--html", str(html), "--baseline",
                                 str(shipped_tables_dir() / "nvidia-h200/ranker_attention.json")])
    assert r.exit_code == 0, r.output
    run = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1000",
                          "--virtual-time-budget=5000", "--dump-dom", html.as_uri()],
                         capture_output=True, text=True, timeout=120)
    dom = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    # Every chart drawn (Plotly's SVG with axes), 3 per bucket of 4; the tables are there.
    assert dom.count('class="main-svg"') >= 12 and dom.count('class="xtick"') >= 12
    assert 'class="ranking"' in dom and 'class="baseline"' in dom and 'id="failures"' in dom
    # No horizontal overflow in a 1280 px window (the page measures itself once drawn).
    width = int(re.search(r'data-scroll-width="(\d+)"', dom).group(1))
    assert width <= 1280, width
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, console
