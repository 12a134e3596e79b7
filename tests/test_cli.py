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
    assert "Hopper" in r.stdout and "--replay" in r.stdout


def test_bad_space_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("kernel = 'ranker_attention'\n[params]\nblock_q = [64\n")
    r = CliRunner().invoke(app, ["sweep", "ranker-attention", "--space", str(bad), "--out", str(tmp_path)])
    assert r.exit_code == 1 and "bad.toml: malformed TOML" in r.output


def test_bench_without_hopper_exits_2_naming_the_hardware():
    r = subprocess.run([sys.executable, "-m", "kerneltune", "bench", "ranker-attention"], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 2 and "Hopper" in r.stdout


def test_bench_file_parses():
    from kerneltune.kernels.ranker_attention.bench.spec import load_spec

    spec = load_spec(REPO / "search_spaces/bench_ranker_attention.toml")
    assert [s.name for s in spec.shapes] == ["d128-b16-t2k-gqa", "d128-b4-t8k", "d64-b64-t1k"]
    assert spec.caps == {"tanh": 30.0, "none": 0.0, "tanh_approx": 30.0}
    assert {t.metric for t in spec.targets} == {"speedup", "dense_fraction"} and len(spec.targets) == 6
