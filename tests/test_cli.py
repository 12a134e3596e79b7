import json
import os
import signal
import subprocess
import sys
import time

import pytest
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


@pytest.mark.parametrize(("own", "want"), [(None, "0 False"), ("1", "1 True")])
def test_the_cli_turns_numpys_huge_pages_off_for_its_processes_unless_the_user_says(own, want):
    """Set before NumPy is imported, in the CLI's process and so in every process it starts."""
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if own is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = own
    probe = ("import os, subprocess, sys, kerneltune.cli, numpy; print(os.environ['NUMPY_MADVISE_HUGEPAGE'], "
             "numpy._core.multiarray._get_madvise_hugepage()); sys.stdout.flush(); subprocess.run([sys.executable, "
             "'-c', 'import numpy; print(numpy._core.multiarray._get_madvise_hugepage())'])")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.split() == [*want.split(), want.split()[1]], r.stdout + r.stderr


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


def test_help_is_whole_and_names_the_exit_codes():
    """Not cut at 80 columns, no "<bool>" flags, and the exit-code scheme in the top-level help."""
    top = subprocess.run([sys.executable, "-m", "kerneltune", "--help"], capture_output=True, text=True, cwd=REPO,
                         env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"}, timeout=120).stdout
    assert all(code in top for code in ("0 everything checked", "1 wrong or slower", "2 the target hardware",
                                        "3 bad input"))
    for cmd in ("sweep", "verify", "install", "report", "bench"):
        out = subprocess.run([sys.executable, "-m", "kerneltune", cmd, "--help"], capture_output=True, text=True,
                             cwd=REPO, env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"}, timeout=120).stdout
        assert "…" not in out and "<bool>" not in out, cmd
        assert cmd != "sweep" or "search_spaces/KERNEL.toml" in out
        assert max(len(line) for line in out.splitlines()) <= 100, cmd


def test_sigterm_stops_a_sweep_with_one_line_naming_its_journal(tmp_path):
    """A CI job's timeout sends SIGTERM: the sweep stops as on Ctrl-C (its busy worker with it), exit 130, and
    the line says where the finished work is and that the same command resumes."""
    from .tuning.test_sweep import _children, space

    proc = subprocess.Popen([sys.executable, "-m", "kerneltune", "sweep", "tests.tuning.fake_kernel:PLUGIN",
                             "--space", str(space(tmp_path, ["hang"])), "--out", str(tmp_path / "out"),
                             "--compile-workers", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.time() + 60
        while not _children(proc.pid) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: interrupted; every finished candidate is in ") and "resumes" in last, err


def test_contenders_of_the_shipped_table_narrow_a_replayed_sweep(tmp_path):
    """The shipped table stores its buckets' fields sorted; the space's bucket finds its entry all the same,
    and of run C's space only the config the table holds (the defaults, on the fields run C had) is timed."""
    from .paths import FIXTURES

    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", "ranker-attention", "--replay",
                        str(FIXTURES / "ranker_attention/run-c-journals"), "--bucket", "d128-tanh-long", "--space",
                        str(FIXTURES / "ranker_attention/run-c-space.toml"), "--out", str(tmp_path), "--contenders",
                        str(REPO / "kerneltune/tables/shipped/nvidia-h200/ranker_attention.json")],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in (tmp_path / "journals/ranker_attention-replay.jsonl").open()]
    assert len(records) == 1 and records[0]["status"] == "ok"


def test_verify_emulate_exits_1_when_any_emulated_check_fails(monkeypatch):
    from kerneltune.kernels.drafter_wide.plugin import DrafterWidePlugin
    from kerneltune.seams.protocols import EmulationCheck

    ok = EmulationCheck("ng=192", "3 req x 2", 1e-15, 256, 0)
    bad = EmulationCheck("ng=192", "4 req x 4", 3e-3, 256, 0, numbers="gfx942 8-bit", tolerance=2e-3)
    for checks, code in (([ok, ok], 0), ([ok, bad], 1)):
        monkeypatch.setattr(DrafterWidePlugin, "emulate", lambda self, c=checks: c)
        r = CliRunner().invoke(app, ["verify", "drafter-wide", "--emulate"])
        assert r.exit_code == code, r.output
    # The emulation checks the launch, not a table: options that only a table's check reads are refused, not ignored.
    for extra in (["--junit", "v.xml"], ["--bucket", "x"], ["--table", "t.json"]):
        r = CliRunner().invoke(app, ["verify", "drafter-wide", "--emulate", *extra])
        assert r.exit_code == 3 and f"drop {extra[0]}" in r.output, r.output


def test_verify_interpret_exits_with_its_checks_and_writes_junit(tmp_path, monkeypatch):
    import xml.etree.ElementTree as ET

    from kerneltune.kernels.drafter_wide.plugin import DrafterWidePlugin
    from kerneltune.seams.protocols import EmulationCheck

    ok = EmulationCheck("small", "4x2 rows, against float64", 0.058, 960, 27731, tolerance=0.29,
                        numbers="gfx942 8-bit")
    same = EmulationCheck("small", "4x2 rows, the same bits", 0.0, 960, 9e4, tolerance=5e-324, schedule="seed 7")
    bad = EmulationCheck("small", "4x2 rows, against float64", float("inf"), 0, 0, "MemoryFault: llvm.load at "
                         "kernel.py:341: a 4-byte access leaves every allocation", tolerance=0.29)
    junit = tmp_path / "i.xml"
    for checks, code in (([ok, same], 0), ([ok, bad], 1)):
        monkeypatch.setattr(DrafterWidePlugin, "interpret", lambda self, n=None, c=checks: c)
        r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret", "--junit", str(junit)])
        assert r.exit_code == code, r.output
        suite = ET.parse(junit).getroot().find("testsuite")
        assert suite.get("tests") == "2" and suite.get("failures") == str(code)
    assert "kernel.py:341" in junit.read_text()
    for extra in (["--bucket", "x"], ["--table", "t.json"], ["--emulate"]):
        r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret", *extra])
        assert r.exit_code == 3 and ("drop" in r.output or "pick one" in r.output), r.output
    r = CliRunner().invoke(app, ["verify", "ranker-attention", "--interpret"])
    assert r.exit_code == 3 and "no CPU interpreter run" in r.output, r.output


def test_verify_interpret_passes_its_interleavings_on(monkeypatch):
    from kerneltune.kernels.drafter_wide.plugin import DrafterWidePlugin
    from kerneltune.seams.protocols import EmulationCheck

    asked = []
    ok = EmulationCheck("small", "4x2 rows, the same bits", 0.0, 960, 9e4, tolerance=5e-324, schedule="pct seed 1 d=3")
    monkeypatch.setattr(DrafterWidePlugin, "interpret", lambda self, n=None: asked.append(n) or [ok])
    for extra, n in (([], None), (["--interleavings", "5"], 5)):
        r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret", *extra])
        assert r.exit_code == 0 and asked[-1] == n, r.output
    r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interleavings", "5"])
    assert r.exit_code == 3 and "add --interpret" in r.output, r.output
    r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret", "--interleavings", "0"])
    assert r.exit_code == 3 and "greater than or equal to 1" in r.output, r.output


def test_verify_interpret_with_workers_it_cannot_use_is_one_line(monkeypatch):
    monkeypatch.setenv("KERNELTUNE_INTERPRET_WORKERS", "none")
    r = CliRunner().invoke(app, ["verify", "drafter-wide", "--interpret"])
    assert r.exit_code == 3 and "KERNELTUNE_INTERPRET_WORKERS='none'" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_verify_of_several_tables_exits_with_the_worst_verdict(tmp_path, monkeypatch):
    """The user's table fails and the shipped one passes: the command fails, whichever it read last. The
    kernel is given by import path: its tables are named by the kernel's own name (fake.json)."""
    from kerneltune.tables.lookup import bucket_key
    from kerneltune.tables.store import update_table
    from kerneltune.tuning import verify

    from .tuning.test_verify import _host_stamps

    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    stamps = {**_host_stamps(), "kernel_hash": "fakehash"}  # measured here: the runtime here would use them
    for root, mode in ((user, "garbage"), (shipped, "good")):
        entry = {"bucket": {"n": 2}, "bucket_name": "small", "problem": {"n": 2}, "config": {"mode": mode, "work": 1},
                 "median_us": 1000.0, "spread": 0.01, "stamps": stamps}
        update_table(root / "cpu/fake.json", "fake", "cpu",
                     lambda t, e=entry: t["entries"].update({bucket_key(e["bucket"]): e}))
    monkeypatch.setattr(verify, "table_roots", lambda: (user, shipped))
    # The device and its tables come from the timing worker: this process initialises no GPU framework.
    from kerneltune.seams import registry

    monkeypatch.setattr(registry, "load_backend", lambda name: pytest.fail(f"the CLI process asked {name}"))
    r = CliRunner().invoke(app, ["verify", "tests.tuning.fake_kernel:PLUGIN"])
    assert r.exit_code == 1, r.output
    out = " ".join(r.output.split())
    assert "small: correctness: max error" in out and "small: ok" in out  # both read
    assert "verify: 1 correctness, 1 ok" in out or "verify: 1 ok, 1 correctness" in out
