"""Data is data, second pass: what a file *is* (a link), how big its numbers are, what a constraint computes and
what an option says must not reach the runtime's tables, run without bound, or end in a traceback. Each case is
a command line of the audit of 2026-12-06, run in a fresh subprocess; each asserts its exit code, one line on
stderr naming the culprit, no traceback, nothing written outside the working folder, and nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..paths import REPO

# Each case starts a kerneltune process or two (~1-2 s each): make test runs them, the quick loop does not.
pytestmark = pytest.mark.slow

TOY = "tests.toy_kernel.kernel:PLUGIN"
TOY_SPACE = 'kernel = "toy"\n[params]\nblock = [1, 16, 64]\nunroll = [8, 64]\n[[buckets]]\nname = "n192"\n' \
            'problem = { n = 192 }\n'


@dataclass
class Case:
    name: str
    args: list[str]  # after `kerneltune`; {w} is the case's working folder
    code: int
    says: str  # in the one line on stderr
    files: dict[str, str] = field(default_factory=dict)  # written into the working folder first
    links: dict[str, str] = field(default_factory=dict)  # link -> target, {w} and {user} expanded
    seconds: float = 60.0  # the case must end within this


CASES = [
    # 1. A link inside --out must not send a sweep's table into the runtime's folder.
    Case("a link inside --out into the user's tables", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out",
                                                         "--compile-workers", "0", "--max-seconds", "0.05"],
         3, "resolves to", files={"s.toml": TOY_SPACE}, links={"out/tables/toy-cpu": "{user}/toy-cpu"}),
    # 2. A constraint that formats a string asks for gigabytes.
    Case("a constraint that formats a string", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out"], 3,
         "'%' of a string or a sequence", files={"s.toml": TOY_SPACE + '[[constraints]]\n'
                                                 'expr = "(\'%0800000000d\' % block) != \'\'"\n'}),
    # 6. Tracebacks on bad input.
    Case("a range wider than ssize_t", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out"], 3,
         "holds 18446744073709551616 values", files={"s.toml": TOY_SPACE.replace(
             "block = [1, 16, 64]", "block = { range = [1, 18446744073709551616] }")}),
    Case("--gpus x,y", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out", "--gpus", "x,y"], 3,
         "'x', 'y' is not a GPU index", files={"s.toml": TOY_SPACE}),
    Case("an import path to no kernel", ["sweep", "json:dumps", "--out", "{w}/out"], 3,
         "'json:dumps' is a function, not a kernel"),
    Case("a TOML integer of 5,000 digits", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out"], 3,
         "s.toml: not a space:", files={"s.toml": TOY_SPACE.replace("n = 192", "n = " + "9" * 5000)}),
    # 7. Work that never ends: two parameters of 10,000 values each, a constraint true only at the end.
    Case("a space of 10**8 configs, sampled", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out",
                                               "--strategy", "tpe", "--budget", "2", "--compile-workers", "0",
                                               "--max-seconds", "0.05"], 0, "",
         files={"s.toml": TOY_SPACE.replace("block = [1, 16, 64]\nunroll = [8, 64]",
                                            "block = { range = [1, 10000] }\nunroll = { range = [1, 10000] }")
                + '[[constraints]]\nexpr = "block == 1 or unroll == 10000"\n'}, seconds=120),
    Case("a space of 10**8 configs, enumerated", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out"], 3,
         "the space holds 100,000,000 configs; a sweep enumerates at most 1,000,000",
         files={"s.toml": TOY_SPACE.replace("block = [1, 16, 64]\nunroll = [8, 64]",
                                            "block = { range = [1, 10000] }\nunroll = { range = [1, 10000] }")}),
    # 8. Options accepted silently.
    *(Case(f"--{opt} {value}", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out", f"--{opt}", value], 3,
           says, files={"s.toml": TOY_SPACE})
      for opt, value, says in (("compile-workers", "-1", "compile_workers: must be 0"),
                               ("max-seconds", "nan", "max_seconds: must be a positive number of seconds"),
                               ("run-timeout", "0", "run_timeout: must be a positive number of seconds"),
                               ("seed", "-1", "seed: must be in [0, 2**32)"),
                               ("replay-seconds", "-5", "--replay-seconds: it paces a replay"))),
    Case("--replay-seconds -5 with --replay", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out", "--replay",
                                               "{w}/s.toml", "--replay-seconds", "-5"], 3,
         "replay_seconds: must be 0 or more seconds", files={"s.toml": TOY_SPACE}),
    Case("--heartbeat -1", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out", "--storage",
                            "sqlite:///{w}/db.sqlite", "--heartbeat", "-1"], 3,
         "heartbeat: must be a positive number of seconds", files={"s.toml": TOY_SPACE}),
    Case("a replay of another kernel's journal", ["sweep", TOY, "--space", "{w}/s.toml", "--out", "{w}/out",
                                                  "--replay", str(REPO / "tests/fixtures/ranker_attention/"
                                                                            "run-c-journals")], 3,
         "holds records of kernel ranker_attention, not of toy", files={"s.toml": TOY_SPACE}),
    # 9. Work lost at the end: a JUnit file that cannot be written is refused before any check.
    Case("--junit /dev/full", ["verify", TOY, "--junit", "/dev/full"], 3, "not a regular file"),
    Case("--junit through a dangling link", ["verify", TOY, "--junit", "{w}/dangling.xml"], 3,
         "which does not exist", links={"dangling.xml": "{w}/no/such/folder/x.xml"}),
    Case("--junit in a folder that cannot be made", ["verify", TOY, "--junit", "/proc/no-such/v.xml"], 3,
         "--junit /proc/no-such/v.xml: the folder /proc/no-such does not exist, and /proc "),  # root or not
]


def _expand(text: str, work: Path, user: Path) -> str:
    return text.replace("{w}", str(work)).replace("{user}", str(user))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_hostile_input_is_one_line_and_leaves_nothing_behind(tmp_path, monkeypatch, case):
    """In this process (the CLI as Typer runs it; a sweep's workers are processes of their own): a subprocess a
    case cost 1-2 s of interpreter start, most of each case."""
    from typer.testing import CliRunner

    from kerneltune.cli import app

    work, user = tmp_path / "w", tmp_path / "user-tables"
    work.mkdir()
    (user / "toy-cpu").mkdir(parents=True)
    for name, text in case.files.items():
        (work / name).write_text(text)
    for link, target in case.links.items():
        (work / link).parent.mkdir(parents=True, exist_ok=True)
        (work / link).symlink_to(_expand(target, work, user))
    for key, value in {"KERNELTUNE_TABLES": str(user), "PYTHONPATH": str(REPO), "COLUMNS": "400"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(work)
    started = time.monotonic()
    r = CliRunner().invoke(app, [_expand(a, work, user) for a in case.args])
    assert time.monotonic() - started < case.seconds, "ran past its bound"
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception  # no traceback
    assert r.exit_code == case.code, r.output
    if case.code == 3:
        errors = [line for line in r.output.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and case.says in errors[0], r.output
    assert not any(user.rglob("*.json")), "a table reached the runtime's folder"


def test_a_sweep_after_a_refused_link_loses_nothing(tmp_path):
    """The journal the refused write followed keeps every measurement: the same sweep into a folder of its own
    resumes from it and measures nothing again."""
    work, user = tmp_path / "w", tmp_path / "user-tables"
    (user / "toy-cpu").mkdir(parents=True)
    (work / "out/tables").mkdir(parents=True)
    (work / "s.toml").write_text(TOY_SPACE)
    (work / "out/tables/toy-cpu").symlink_to(user / "toy-cpu")
    env = {**os.environ, "KERNELTUNE_TABLES": str(user), "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    args = [sys.executable, "-m", "kerneltune", "sweep", TOY, "--space", str(work / "s.toml"), "--out",
            str(work / "out"), "--compile-workers", "0", "--max-seconds", "0.05"]
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 3
    journal = work / "out/journals/toy-live.jsonl"
    measured = [json.loads(line) for line in journal.read_text().splitlines()]
    (work / "out/tables/toy-cpu").unlink()
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert len(journal.read_text().splitlines()) == len(measured)  # nothing measured twice
    assert not any(user.rglob("*.json"))


def test_csv_cells_that_a_spreadsheet_would_run_are_written_as_text(tmp_path):
    from kerneltune.report.frame import load_frame, write_csv

    journal = tmp_path / "j.jsonl"
    record = {"kernel": "toy", "bucket": "=HYPERLINK(\"http://x\")", "key": "{}", "tiles": {"block": 1},
              "status": "correctness", "error": "+cmd|' /C calc'!A0", "strategy": "@SUM(1)", "problem": {"n": -3}}
    journal.write_text(json.dumps(record) + "\n")
    write_csv(load_frame(journal), tmp_path / "r.csv")
    text = (tmp_path / "r.csv").read_text()
    assert "'=HYPERLINK" in text and "'+cmd" in text and "'@SUM" in text
    assert ",-3" in text  # a negative number is a number, not a formula


def test_a_journal_with_no_record_is_refused_by_the_report(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_text('{"bucket": "b", "key": "{}", "tiles": {}}\n'.encode("utf-16").decode("latin-1"))
    r = subprocess.run([sys.executable, "-m", "kerneltune", "report", str(journal)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 3 and r.stderr.strip().splitlines()[-1].startswith(f"error: report: no record in {journal}")


def test_install_onto_a_table_that_is_a_link_is_refused_and_writes_nothing_beside_its_target(tmp_path):
    from kerneltune.tables.store import TableError, update_table

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "toy.json").write_text('{"schema": 1, "kernel": "toy", "device_kind": "cpu", "entries": {}}')
    (tmp_path / "to/cpu").mkdir(parents=True)
    (tmp_path / "to/cpu/toy.json").symlink_to(elsewhere / "toy.json")
    with pytest.raises(TableError, match=r"a link to .*; a table is written only as a file of its own folder"):
        update_table(tmp_path / "to/cpu/toy.json", "toy", "cpu", lambda t: None)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["toy.json"]


def test_a_lone_surrogate_in_a_journal_is_a_named_bad_line_not_an_encoding_traceback(tmp_path):
    journal = tmp_path / "j.jsonl"
    journal.write_text('{"kernel": "toy", "bucket": "b\\ud800", "key": "{}", "tiles": {"block": 1}, '
                       '"status": "correctness", "error": "x"}\n')
    r = subprocess.run([sys.executable, "-m", "kerneltune", "report", str(journal), "--csv", str(tmp_path / "r.csv")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert f"{journal}:1: a string holds a lone surrogate" in r.stderr


LAUNCH = """import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from tests.toy_kernel.kernel import PLUGIN, toy_matvec
import numpy as np
from pathlib import Path
y, tiles = toy_matvec(np.ones((192, 192)), np.ones(192), Path(sys.argv[1]))
print(json.dumps(tiles))
"""


def _toy_entry(**change):
    from tests.toy_kernel.backend import BACKEND
    from tests.toy_kernel.kernel import PLUGIN

    stamps = {k: v for k, v in BACKEND.stamps().items() if k in BACKEND.matched_stamps}
    entry = {"bucket": {"n": 192}, "bucket_name": "n192", "problem": {"n": 192}, "config": {"block": 16, "unroll": 8},
             "median_us": 10.0, "spread": 0.01, "samples": 10, "runner_ups": [], "fallbacks": [],
             "stamps": {**stamps, "kernel_hash": PLUGIN.source_hash()}}
    for key, value in change.items():
        if key == "stamps":
            entry["stamps"] = {**entry["stamps"], **value}
        else:
            entry[key] = value
    return entry


@pytest.mark.parametrize(("name", "entry_or_text", "warns"), [
    ("a bucket value of 10**400", _toy_entry(bucket={"n": 10**400}), None),
    ("a median of 10**400", _toy_entry(median_us=10**400), "median_us"),
    ("an entry written by a replay", _toy_entry(stamps={"replayed_from": "/x/journal"}), "written by a replay"),
    ("an integer of 5,000 digits",
     '{"schema": 1, "kernel": "toy", "device_kind": "toy-cpu", "entries": {"x": ' + "9" * 5000 + "}}", "4300 digits"),
    ("a rekeyed_from that is no list", _toy_entry(stamps={"rekeyed_from": 7}), "rekeyed_from"),
])
def test_the_launch_survives_any_table_with_one_warning(tmp_path, name, entry_or_text, warns):
    """The toy's launch API over a user table holding one hostile entry: no exception, the heuristic (or the entry
    where it is usable), at most one warning naming the table."""
    folder = tmp_path / "toy-cpu"
    folder.mkdir()
    text = entry_or_text if isinstance(entry_or_text, str) else json.dumps(
        {"schema": 1, "kernel": "toy", "device_kind": "toy-cpu", "entries": {"n=192": entry_or_text}})
    (folder / "toy.json").write_text(text)
    r = subprocess.run([sys.executable, "-c", LAUNCH, str(tmp_path)], capture_output=True, text=True, timeout=60,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert json.loads(r.stdout) in ({"block": 1, "unroll": 1}, {"block": 16, "unroll": 8})
    if warns is not None:
        named = [line for line in r.stderr.splitlines() if warns in line]
        assert len(named) == 1, r.stderr
        assert str(folder / "toy.json") in named[0] or "n=192" in named[0], r.stderr


def test_a_fifo_in_the_users_tables_neither_hangs_a_launch_nor_a_warm_started_sweep(tmp_path):
    user = tmp_path / "user"
    (user / "toy-cpu").mkdir(parents=True)
    os.mkfifo(user / "toy-cpu/toy.json")
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERNELTUNE_TABLES": str(user), "COLUMNS": "400"}
    r = subprocess.run([sys.executable, "-c", LAUNCH, str(user)], capture_output=True, text=True, timeout=60,
                       cwd=REPO, env=env)
    assert r.returncode == 0 and json.loads(r.stdout) == {"block": 1, "unroll": 1}
    assert [line for line in r.stderr.splitlines() if line] == [  # one line, naming the file
        f"toy: {user / 'toy-cpu/toy.json'}: is a FIFO, not a regular file; left out"]
    (tmp_path / "s.toml").write_text(TOY_SPACE)
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", TOY, "--space", str(tmp_path / "s.toml"),
                        "--out", str(tmp_path / "out"), "--compile-workers", "0", "--max-seconds", "0.05"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr


def test_a_kernels_feasibility_check_that_raises_is_that_configs_refusal(tmp_path):
    """The toy divides n by the block: block 0 raised ZeroDivisionError through the sweep; now it is refused."""
    (tmp_path / "s.toml").write_text(TOY_SPACE.replace("block = [1, 16, 64]", "block = [0, 16]"))
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", TOY, "--space", str(tmp_path / "s.toml"),
                        "--out", str(tmp_path / "out"), "--compile-workers", "0", "--max-seconds", "0.05"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    refused = [json.loads(line) for line in (tmp_path / "out/journals/toy-live.jsonl").read_text().splitlines()
               if '"constraint"' in line]
    assert {rec["tiles"]["block"] for rec in refused} == {0}
    assert "toy's feasibility check raised ZeroDivisionError" in refused[0]["error"]


@pytest.mark.parametrize(("name", "make", "says"), [
    ("a link to /dev/zero", lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
    ("a table of 65 MiB", lambda p: p.touch() or os.truncate(p, 65 << 20), "over the 64 MiB a tuned table may"),
])
def test_a_table_file_that_is_no_table_costs_a_launch_one_line(tmp_path, name, make, says):
    folder = tmp_path / "toy-cpu"
    folder.mkdir()
    make(folder / "toy.json")
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-c", LAUNCH, str(tmp_path)], capture_output=True, text=True, timeout=60,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert time.monotonic() - started < 30 and r.returncode == 0 and json.loads(r.stdout) == {"block": 1, "unroll": 1}
    lines = [line for line in r.stderr.splitlines() if line]
    assert len(lines) == 1 and str(folder / "toy.json") in lines[0] and says in lines[0], r.stderr


REPORTED = str(REPO / "tests/fixtures/ranker_attention/run-c-journals")


@pytest.mark.parametrize(("name", "option", "text", "says"), [
    ("a bench result that is a list", "--bench", "[1, 2]", "bench.json"),
    ("a bench result of 5,000 digits", "--bench", '{"rows": [' + "9" * 5000 + "]}", "bench.json"),
    ("a baseline with a median that is text", "--baseline", None, "median_us"),
    ("a baseline with a NaN median", "--baseline", float("nan"), "median_us"),
    ("a baseline with an infinite median", "--baseline", float("inf"), "median_us"),
    ("a baseline with a zero median", "--baseline", 0, "median_us"),
])
def test_a_report_given_a_bad_file_refuses_it_in_one_line(tmp_path, name, option, text, says):
    if option == "--bench":
        path = tmp_path / "bench.json"
        path.write_text(text)
    else:
        table = json.loads((REPO / "tests/fixtures/ranker_attention/sweep-a-table.json").read_text())
        for entry in table["entries"].values():
            entry["median_us"] = "fast" if text is None else text
        path = tmp_path / "base.json"
        path.write_text(json.dumps(table))
    r = subprocess.run([sys.executable, "-m", "kerneltune", "report", REPORTED, option, str(path), "--csv",
                        str(tmp_path / "r.csv")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "400"})
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert r.returncode == 3 and "Traceback" not in r.stderr and len(errors) == 1, r.stderr
    assert str(path) in errors[0] and says in errors[0], errors


def test_a_sweep_through_a_hard_link_to_a_journal_in_use_is_refused(tmp_path):
    """The writer lock is on the file: a second sweep through a hard link waits for no one and writes nothing."""
    from kerneltune.tuning.journal import Journal

    (tmp_path / "s.toml").write_text(TOY_SPACE)
    first = tmp_path / "a.jsonl"
    first.touch()
    os.link(first, tmp_path / "b.jsonl")
    with Journal(first).writer_lock():
        r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", TOY, "--space", str(tmp_path / "s.toml"),
                            "--out", str(tmp_path / "out"), "--journal", str(tmp_path / "b.jsonl")],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"})
    assert r.returncode == 3 and "another sweep is writing this journal" in r.stderr
    assert first.read_text() == ""


def test_a_ranker_entry_that_lacks_or_garbles_its_cap_is_no_crash():
    from kerneltune.kernels.ranker_attention.api import _cap_kin
    from kerneltune.kernels.ranker_attention.config import Problem

    problem = Problem(batch=1, seq_len=128, q_heads=1, kv_heads=1, head_dim=64, cap_method="tanh", cap=30.0)
    assert _cap_kin(problem, {"head_dim": 64}) == 2 and _cap_kin(problem, {"cap_method": 7}) == 2
    assert _cap_kin(problem, {"cap_method": "tanh_approx"}) == 0


@pytest.mark.parametrize(("change", "says"), [({"rekeyed_from": 7}, "stamps.rekeyed_from: 7 is not a list"),
                                              ({"median_us": 10**400}, "median_us")])
def test_rekey_skips_and_names_an_entry_it_cannot_read(tmp_path, change, says):
    table = json.loads((REPO / "tests/fixtures/ranker_attention/sweep-a-table.json").read_text())
    entry = next(iter(table["entries"].values()))
    if "rekeyed_from" in change:
        entry["stamps"].update(change)
    else:
        entry.update(change)
    (tmp_path / "t.json").write_text(json.dumps(table))
    r = subprocess.run([sys.executable, "-m", "kerneltune", "rekey", "ranker-attention", "--table",
                        str(tmp_path / "t.json")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "400"})
    assert r.returncode in (1, 3) and "Traceback" not in r.stdout + r.stderr
    named = [line for line in (r.stdout + r.stderr).splitlines() if says in line]
    assert len(named) == 1 and str(tmp_path / "t.json") in named[0], r.stdout + r.stderr


def test_a_full_disk_under_the_study_log_or_the_junit_file_names_the_file(tmp_path, monkeypatch):
    """ENOSPC carries no file name: the line would have said "No space left on device" and nothing else."""
    import errno

    from typer.testing import CliRunner

    from kerneltune.cli import app
    from kerneltune.report.junit import write_junit
    from kerneltune.tuning.strategies.exhaustive import Exhaustive

    def full(self, tiles, value):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Exhaustive, "observe", full)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    (tmp_path / "s.toml").write_text(TOY_SPACE)
    r = CliRunner().invoke(app, ["sweep", TOY, "--space", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"),
                                 "--compile-workers", "0", "--max-seconds", "0.05"])
    errors = [line for line in r.output.splitlines() if line.startswith("error: ")]
    assert r.exit_code == 3 and len(errors) == 1 and "toy-live.optuna.log: No space left on device" in errors[0]
    journal = tmp_path / "out/journals/toy-live.jsonl"
    assert len(journal.read_text().splitlines()) >= 1  # the measurement that met the full disk is kept

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("xml.etree.ElementTree.ElementTree.write", no_space)
    with pytest.raises(OSError) as raised:
        write_junit(tmp_path / "j.xml", "toy", [])
    assert raised.value.filename == str(tmp_path / "j.xml")
