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
]


def _expand(text: str, work: Path, user: Path) -> str:
    return text.replace("{w}", str(work)).replace("{user}", str(user))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_hostile_input_is_one_line_and_leaves_nothing_behind(tmp_path, case):
    work, user = tmp_path / "w", tmp_path / "user-tables"
    work.mkdir()
    (user / "toy-cpu").mkdir(parents=True)
    for name, text in case.files.items():
        (work / name).write_text(text)
    for link, target in case.links.items():
        (work / link).parent.mkdir(parents=True, exist_ok=True)
        (work / link).symlink_to(_expand(target, work, user))
    env = {**os.environ, "KERNELTUNE_TABLES": str(user), "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "kerneltune", *(_expand(a, work, user) for a in case.args)],
                       capture_output=True, text=True, env=env, cwd=work, timeout=case.seconds + 60)
    assert time.monotonic() - started < case.seconds, "ran past its bound"
    assert "Traceback" not in r.stderr + r.stdout
    assert r.returncode == case.code, r.stderr
    if case.code == 3:
        errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and case.says in errors[0], r.stderr
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
