import subprocess
import sys

from typer.testing import CliRunner

from kerneltune import __version__
from kerneltune.cli import app

from .paths import REPO


def test_help_lists_every_command_with_a_purpose():
    out = CliRunner().invoke(app, ["--help"]).output
    for cmd in ("sweep", "verify", "report"):
        assert cmd in out


def test_version():
    assert __version__ in CliRunner().invoke(app, ["--version"]).output


def test_live_sweep_without_hopper_exits_2_naming_the_hardware(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", "ranker-attention", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2
    assert "Hopper" in r.stderr and "--replay" in r.stderr


def test_bad_space_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("kernel = 'ranker_attention'\n[params]\nblock_q = [64\n")
    r = CliRunner().invoke(app, ["sweep", "ranker-attention", "--space", str(bad), "--out", str(tmp_path)])
    assert r.exit_code == 3 and "bad.toml: malformed TOML" in r.output


def test_bench_without_hopper_exits_2_naming_the_hardware():
    r = subprocess.run([sys.executable, "-m", "kerneltune", "bench", "ranker-attention"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2 and "Hopper" in r.stderr
