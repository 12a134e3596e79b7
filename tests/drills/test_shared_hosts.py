"""Shared-host drills (issue 94): what other processes, other users and odd environments do must not lose or
forge a result. A test per class of defect the drill of 2026-12-07 found, its examples as cases; each checks the
exit code, one line naming the culprit, no traceback, no record lost or duplicated, nothing written through a link
or into a file another user owns. The concurrent writers are ``test_concurrent_writers.py``."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.files import logs
from kerneltune.tables import lookup
from kerneltune.tables.lookup import bucket_key, tuned_config
from kerneltune.tables.store import TableError, read_table, table_path, update_table
from kerneltune.tuning.journal import Journal, JournalError

from ..paths import FIXTURES, REPO
from ..tables.test_tables import BUCKET, HARD, RUNNING, entry, write

RUN_C = FIXTURES / "ranker_attention/run-c-journals"
JOURNAL = RUN_C / "ranker_attention-live-w0.jsonl"
SPACE = FIXTURES / "ranker_attention/run-c-space.toml"
TABLE = FIXTURES / "ranker_attention/sweep-a-table.json"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"


@pytest.fixture(autouse=True)
def fresh(monkeypatch, tmp_path):
    logs._said.clear()
    lookup._read_at.cache_clear()
    monkeypatch.setenv("KERNELTUNE_TABLES", str(tmp_path / "user-tables"))
    monkeypatch.delenv("KERNELTUNE_SAFE_FOLDERS", raising=False)


def refused(result, code: int, *culprits: str) -> str:
    """The CLI ``result`` ended with ``code`` in one ``error:`` line naming every culprit, and no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == code and len(errors) == 1, (result.exit_code, result.output)
    assert "Traceback" not in result.output and all(c in errors[0] for c in culprits), (culprits, errors[0])
    return errors[0]


def _journal(path: Path, **change) -> Path:
    lines = []
    for line in JOURNAL.read_text().splitlines():
        r = json.loads(line)
        r.update(change)
        lines.append(json.dumps(r))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _replay(out: Path, *extra: str) -> list[str]:
    return ["sweep", "ranker-attention", "--replay", str(JOURNAL), "--space", str(SPACE), "--bucket",
            "d128-tanh-long", "--out", str(out), *extra]


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    """The real command line in a process of its own (what a terminal, a locale or a pipe does to it)."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kerneltune", *args], env=full, cwd=cwd, capture_output=True,
                          text=True, errors="replace", timeout=120, **kw)


def _one_line(proc: subprocess.CompletedProcess, code: int, *culprits: str) -> None:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == code and len(errors) == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and all(c in errors[0] for c in culprits), (culprits, proc.stderr)


# (1) Other processes: concurrency and crash consistency.

def test_no_resume_keeps_the_journal_locked_so_a_second_sweep_is_refused(tmp_path):
    """--no-resume moved its locked journal aside and appended to a new, unlocked file: a second sweep into the same
    --out was not refused (68-174 duplicate records)."""
    from filelock import Timeout

    path = tmp_path / "out/journals/j.jsonl"
    first = Journal(path)
    first.append({"bucket": "b", "key": "old", "status": "compile"})
    lock = first.writer_lock()
    lock.acquire()
    aside = lock.start_afresh()
    assert aside is not None and [r["key"] for r in Journal(aside).records()] == ["old"]
    assert path.read_bytes() == b""
    with pytest.raises(Timeout, match="held by another process"):  # this one: /proc/locks names no other
        Journal(path).writer_lock().acquire()
    first.append({"bucket": "b", "key": "new", "status": "compile"})
    lock.release()
    with Journal(path).writer_lock():  # released: the next sweep takes it, and resumes the new journal
        assert [r["key"] for r in Journal(path).records()] == ["new"]

    # Through the command line: a second sweep while the first holds it is one line naming the journal.
    journal = tmp_path / "cli/journals/ranker_attention-replay.jsonl"
    with Journal(journal).writer_lock():
        r = CliRunner().invoke(app, _replay(tmp_path / "cli", "--journal", str(journal), "--no-resume"))
    refused(r, 3, str(journal), "another sweep is writing this journal")


def test_a_lock_wait_names_its_holder_and_gives_up_in_bounded_time(tmp_path, monkeypatch, caplog):
    """An install stopped (Ctrl-Z) while it held the table's lock made every other install wait for ever."""
    from kerneltune.files import locks

    src = tmp_path / "src/nvidia-h200/ranker_attention.json"
    src.parent.mkdir(parents=True)
    src.write_text(TABLE.read_text())
    dest = table_path(tmp_path / "to", "nvidia-h200", "ranker_attention")
    dest.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(dest)!r} + '.lock', os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        # The wait, on a fake clock: a line naming the lock and its stopped holder, then one error.
        now = [0.0]
        lock = locks.BoundedLock(f"{dest}.lock", "the table", wait_s=60, notice_s=2, clock=lambda: now[0],
                                 sleep=lambda s: now.__setitem__(0, now[0] + s))
        with caplog.at_level(logging.WARNING, logger="kerneltune.files.locks"), pytest.raises(locks.LockTimeout) as e:
            lock.acquire()
        assert 60 <= now[0] < 61 and str(e.value).count("\n") == 0
        assert f"process {holder.pid}" in str(e.value) and "stopped" in str(e.value)
        said = [r.getMessage() for r in caplog.records if r.name == "kerneltune.files.locks"]  # not another test's
        assert len(said) == 1 and f"{dest}.lock" in said[0] and "stopped" in said[0]
        assert "giving up after 60 s" in said[0]
        # The command: one line, exit 3, the table unchanged (absent here).
        monkeypatch.setattr(locks, "LOCK_WAIT_S", 0.0)
        r = CliRunner().invoke(app, ["install", str(src), "--to", str(tmp_path / "to")])
        refused(r, 3, f"{dest}.lock", "gave up", f"process {holder.pid}", "stopped")
        assert not dest.exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_s_long_command_line_is_cut_between_words():
    """The concurrent-sweep refusal cut the holder's command line mid-word ("... --run-timeo")."""
    from kerneltune.files.locks import shortened

    command = "/work/main/.venv/bin/python -m kerneltune sweep hang.py --bucket r1k --out oh " + "--run-timeout 5 " * 6
    cut = shortened(command.strip())
    assert len(cut) <= 120 and cut.endswith(" …") and command.startswith(cut[:-2] + " ")
    assert shortened("kerneltune sweep k.py") == "kerneltune sweep k.py" and len(shortened("x" * 300)) == 120


@pytest.mark.parametrize("what", ["csv", "html"])
@pytest.mark.parametrize("how", ["kill", "full-disk"])
def test_a_report_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch, what, how):
    """report wrote --csv and --html in place: a kill truncated 5 of 5 CSVs and emptied 4 of 4 HTMLs; a full disk
    destroyed the previous report and named no file."""
    from kerneltune.files import safe_io

    target = tmp_path / f"r.{what}"
    target.write_text("the previous report\n")

    def cut(fd):
        if how == "kill":
            raise KeyboardInterrupt  # SIGINT, or SIGTERM as the CLI maps it, while the file is written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_io.os, "fsync", cut)
    r = CliRunner().invoke(app, ["report", str(RUN_C), f"--{what}", str(target)])
    if how == "kill":
        refused(r, 130, "interrupted", "every report file there is whole")
    else:
        refused(r, 3, str(target), "No space left on device")
    assert target.read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left


def test_the_runtime_table_cache_notices_any_replacement(tmp_path):
    """The runtime's table cache kept serving a table replaced under the same modification time."""
    path = table_path(tmp_path, "nvidia-h200", "k")
    write(path, entry(config={"block_q": 64}))
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 64}
    before = path.stat()
    other = tmp_path / "other.json"  # the same size and modification time, renamed into place
    other.write_text(path.read_text().replace('"block_q": 64', '"block_q": 32'))
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(other, path)
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 32}
    # Rewritten in place, its old modification time put back: the change time still tells.
    path.write_text(path.read_text().replace('"block_q": 32', '"block_q": 16'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (tmp_path,)) == {"block_q": 16}


def test_the_journal_reader_and_writer_agree_on_a_last_line_without_its_newline(tmp_path, caplog):
    """A whole record whose newline was missing was resumed, then cut by the next write: the bucket's best record
    was lost."""
    j = Journal(tmp_path / "j.jsonl")
    j.append({"bucket": "b", "key": "1", "status": "compile"})
    best = {"bucket": "b", "key": "best", "status": "ok", "timing": {"median_us": 1.0}}
    with j.path.open("ab") as f:
        f.write(json.dumps(best, sort_keys=True).encode())  # whole, its newline cut
    assert [r["key"] for r in j.records()] == ["1", "best"]  # the reader takes it ...
    with caplog.at_level(logging.WARNING, logger="kerneltune.journal"):
        j.append({"bucket": "b", "key": "2", "status": "compile"})
    assert [r["key"] for r in j.records()] == ["1", "best", "2"]  # ... and the writer keeps it
    assert j.path.read_bytes().count(b"\n") == 3 and caplog.text == ""
    with j.path.open("ab") as f:
        f.write(b'{"bucket": "b", "key": "torn", "sta')  # torn: skipped by the one, cut by the other
    assert [r["key"] for r in j.records()] == ["1", "best", "2"]
    j.append({"bucket": "b", "key": "3", "status": "compile"})
    assert [r["key"] for r in j.records()] == ["1", "best", "2", "3"]


# (2) Other users.

def _plant_build(folder: Path, key: dict, data: bytes) -> None:
    """A build file as the cache writes one, with the right key and digest, but not signed (as another user, who
    cannot read the key, would write it)."""
    from kerneltune.files.array_cache import ArrayCache

    class Unsigned(ArrayCache):
        pass

    cache = Unsigned(folder)
    cache.store(key, {"build": np.frombuffer(data, np.uint8)})


def test_the_build_cache_never_loads_what_another_user_could_write(tmp_path, caplog, other_uid):
    """A build planted in the user's build cache ran code when loaded (JAX unpickles it)."""
    from kerneltune.files.build_cache import BuildCache

    folder = tmp_path / "builds"
    key = {"kernel": "k", "source": "s"}
    loaded = []
    cache = BuildCache(folder)
    data, hit = cache.build(key, lambda: b"mine", loaded.append)
    assert (data, hit) == (b"mine", False)
    assert stat.S_IMODE((folder / ".key").stat().st_mode) == 0o600
    assert BuildCache(folder).build(key, lambda: b"again", loaded.append) == (b"mine", True)  # signed: loaded
    # Planted with the right key and digest, but without the user's signature: never handed to the loader.
    _plant_build(folder, key, b"planted")
    loaded.clear()
    with caplog.at_level(logging.WARNING, logger="kerneltune.builds"):
        data, hit = BuildCache(folder).build(key, lambda: b"compiled", loaded.append)
    assert (data, hit, loaded) == (b"compiled", False, []) and "not signed with your key" in caplog.text
    # A key others can read (so forge with), a folder another user owns or everyone can write: not used at all.
    os.chmod(folder / ".key", 0o644)
    with caplog.at_level(logging.WARNING, logger="kerneltune.builds"):
        assert BuildCache(folder).build(key, lambda: b"c2", loaded.append) == (b"c2", False)
    assert "a signing key is the user's, 0600" in caplog.text and loaded == []
    os.chmod(folder / ".key", 0o600)
    for change in (lambda: os.chown(folder, other_uid, -1), lambda: os.chmod(folder, 0o777)):
        os.chown(folder, 0, -1)
        os.chmod(folder, 0o700)
        change()
        logs._said.clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kerneltune.builds"):
            cache = BuildCache(folder)
        assert cache.folder is None and "builds are neither loaded from it nor kept there" in caplog.text


def test_files_and_folders_others_own_or_can_write_and_links_are_refused(tmp_path, other_uid, caplog):
    cli = CliRunner()
    # A journal in a world-writable --out that another user owns: resumed silently, its forged winner installed.
    out = tmp_path / "theirs"
    _journal(out / "journals/ranker_attention-replay.jsonl", bucket="d128-tanh-long")
    for p in (out, *out.rglob("*")):
        os.chown(p, other_uid, -1)
    os.chmod(out, 0o777)
    refused(cli.invoke(app, _replay(out)), 3, f"--out {out}", "owned by kerneltune-drill")
    os.chown(out, 0, -1)  # now only writable by everyone: refused too, for what anyone could have put there
    refused(cli.invoke(app, _replay(out)), 3, f"--out {out}", "writable by every user")
    refused(cli.invoke(app, _replay(out / "sub")), 3, "writable by every user")  # under it, too
    r = cli.invoke(app, _replay(out), env={"KERNELTUNE_SAFE_FOLDERS": str(out)})  # as git's safe.directory
    assert "error:" not in r.output, r.output

    # An --out another user made as a link in a sticky folder (as /tmp is): never followed.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    (tmp_path / "victim").mkdir()
    link = sticky / "out"
    link.symlink_to(tmp_path / "victim")
    os.lchown(link, other_uid, -1)
    refused(cli.invoke(app, _replay(link)), 3, f"--out {link}", "a link made by kerneltune-drill")
    assert list((tmp_path / "victim").iterdir()) == []

    # A journal path that is a link: the sweep cut its target's last line and appended to it.
    target = tmp_path / "precious.txt"
    target.write_bytes(b"line one\nno newline at the end")
    journal = tmp_path / "mine/j.jsonl"
    journal.parent.mkdir()
    journal.symlink_to(target)
    refused(cli.invoke(app, _replay(tmp_path / "mine", "--journal", str(journal))), 3, str(journal), "a link")
    assert target.read_bytes() == b"line one\nno newline at the end"

    # A report written to a link: refused, its target untouched.
    csv = tmp_path / "r.csv"
    csv.symlink_to(target)
    refused(cli.invoke(app, ["report", str(RUN_C), "--csv", str(csv)]), 3, str(csv), "never through a link")
    assert target.read_bytes() == b"line one\nno newline at the end"

    # A report into a file another user owns: refused, not replaced.
    theirs = tmp_path / "theirs.html"
    theirs.write_text("theirs")
    os.chown(theirs, other_uid, -1)
    refused(cli.invoke(app, ["report", str(RUN_C), "--html", str(theirs)]), 3, str(theirs), "owned by")
    assert theirs.read_text() == "theirs"

    # A baseline another user owns would decide what the report calls faster: refused.
    base = tmp_path / "base.json"
    base.write_text(TABLE.read_text())
    os.chown(base, other_uid, -1)
    refused(cli.invoke(app, ["report", str(RUN_C), "--baseline", str(base)]), 3, f"--baseline {base}", "owned by")

    # A table in a world-writable tables folder: the runtime leaves it out, saying so once; install refuses it.
    shared = tmp_path / "shared-tables"
    write(table_path(shared, "nvidia-h200", "k"), entry(config={"block_q": 64}))
    os.chmod(shared / "nvidia-h200", 0o777)
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        assert tuned_config("k", BUCKET, "h1", HARD, RUNNING, (shared,)) is None
    assert caplog.text.count("writable by every user") == 1
    src = tmp_path / "src/nvidia-h200/ranker_attention.json"
    src.parent.mkdir(parents=True)
    src.write_text(TABLE.read_text())
    os.chmod(shared, 0o777)
    refused(cli.invoke(app, ["install", str(src), "--to", str(shared)]), 3, "writable by every user")
    assert not (shared / "nvidia-h200/ranker_attention.json").exists()


def test_strings_from_files_are_shown_with_control_characters_made_visible(tmp_path, monkeypatch):
    """A bucket name with escape sequences retitled and cleared the terminal in report, sweep and verify."""
    from kerneltune.cli import render
    from kerneltune.cli.terminal import SafeConsole
    from kerneltune.tuning.verify import EntryReport, VerifyReport

    journal = _journal(tmp_path / "j/ranker_attention-live.jsonl", bucket=f"b{ESCAPES}", error=f"e{ESCAPES}")
    r = CliRunner().invoke(app, ["report", str(journal)])
    assert r.exit_code == 0 and "\x1b" not in r.output and "\x9b" not in r.output and "\u202e" not in r.output
    assert "b\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e" in r.output

    space = tmp_path / "space.toml"
    space.write_text(SPACE.read_text().replace('name = "d128-tanh-long"', 'name = "d128\\u001b[2Jlong"'))
    r = CliRunner().invoke(app, ["sweep", "ranker-attention", "--replay", str(JOURNAL), "--space", str(space),
                                 "--out", str(tmp_path / "out")])
    assert "\x1b" not in r.output and "d128\\x1b[2Jlong" in r.output, r.output

    # verify's lines and table, as the command prints them.
    console = SafeConsole(record=True, width=200)
    monkeypatch.setattr(render, "console", console)
    report = VerifyReport(tmp_path / "t.json", [EntryReport(f"v{ESCAPES}", {"block_q": 64}, verdict=f"x{ESCAPES}",
                                                            correctness="ok")], 0, [])
    render.verify_report("k", report, {})
    render.verify_progress(report.entries[0])
    text = console.export_text(styles=False)
    assert "\x1b" not in text and "v\\x1b]0;pwned" in text and "x\\x1b]0;pwned" in text


# (3)-(4) The environment.

@pytest.mark.slow  # the real command in a process of its own: seconds of imports
def test_a_non_utf8_locale_writes_utf8_files_and_shows_the_terminal_what_it_can(tmp_path):
    """A non-UTF-8 locale broke a finished sweep (exit 3 after the table was written), report --html (always, a 0-byte
    file) and verify (a traceback)."""
    ascii_env = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}
    html, csv = tmp_path / "r.html", tmp_path / "r.csv"
    p = _cli("report", str(RUN_C), "--html", str(html), "--csv", str(csv), env=ascii_env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "µs" in html.read_bytes().decode("utf-8") and csv.read_bytes().decode("utf-8")
    out = tmp_path / "out"
    p = _cli(*_replay(out), env=ascii_env)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "\\xb5s" in p.stdout, (p.returncode, p.stderr)
    assert read_table(out / "tables/nvidia-h200/ranker_attention.json")["entries"]


@pytest.mark.slow  # the real command in a process of its own: seconds of imports
def test_a_deleted_working_folder_is_one_line_naming_it(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.Popen(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m kerneltune report x',
                             sys.executable], env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE,
                            text=True)
    _, err = proc.communicate(timeout=120)
    _one_line(subprocess.CompletedProcess([], proc.returncode, "", err), 3, str(gone), "no longer exists")


@pytest.mark.slow  # the real command in a process of its own: seconds of imports
def test_a_closed_stdout_costs_no_work_and_no_file(tmp_path):
    """stdout a closed pipe (| head -1): exit 1 with no message, and verify stopped after its first entry."""
    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before the first line
    csv, html = tmp_path / "r.csv", tmp_path / "r.html"
    try:
        p = subprocess.run([sys.executable, "-m", "kerneltune", "report", str(RUN_C), "--csv", str(csv), "--html",
                            str(html)], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        os.close(write_end)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "Broken pipe" not in p.stderr, p.stderr
    assert csv.read_text().count("\n") > 10 and html.stat().st_size > 10_000


@pytest.mark.parametrize("command", ["install", "report"])
def test_an_interrupted_install_or_report_says_what_was_kept(tmp_path, monkeypatch, command):
    """Ctrl-C or SIGTERM during install or report: exit 130 and no line saying what was kept."""
    from kerneltune.report import frame
    from kerneltune.tables import install

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    if command == "install":
        monkeypatch.setattr(install, "update_table", interrupted)
        r = CliRunner().invoke(app, ["install", str(TABLE), "--to", str(tmp_path / "to")])
        refused(r, 130, "interrupted; nothing installed", f"as it was or with {TABLE}'s entries")
    else:
        monkeypatch.setattr(frame, "load_frame", interrupted)
        refused(CliRunner().invoke(app, ["report", str(RUN_C)]), 130, "interrupted", "every report file there is whole")


@pytest.mark.slow  # the real command in a process of its own: seconds of imports
def test_the_frameworks_environment_variables_change_nothing(tmp_path):
    """One variable made every command a no-op exiting 1 (_KERNELTUNE_COMPLETE); another hid every line (COLUMNS=0)."""
    env = {"_KERNELTUNE_COMPLETE": "bash_source", "COLUMNS": "0", "LINES": "0", "TERMINAL_WIDTH": "x",
           "TYPER_USE_RICH": "x", "_TYPER_STANDARD_TRACEBACK": "1"}
    _one_line(_cli("report", str(tmp_path / "missing.jsonl"), env=env), 3, "missing.jsonl")
    p = _cli("report", str(RUN_C), env=env)
    assert p.returncode == 0 and "candidates" in p.stdout, (p.returncode, p.stdout[-300:], p.stderr)


# (5) Input the space file's own rules promise to refuse, and the other classes.

@pytest.mark.parametrize(("where", "value", "why"), [
    ("params", "1979-05-27T07:32:00Z", "params.block_q[1]: datetime.datetime(1979, 5, 27"),
    ("params", "{ a = 1 }", "params.block_q[1]: {'a': 1} is an inline table"),
    ("problem", "1979-05-27", "buckets[0].problem.batch: datetime.date(1979, 5, 27) is a TOML date"),
    ("problem", "{ a = 1 }", "buckets[0].problem.batch: {'a': 1} is an inline table"),
])
def test_a_space_value_that_is_no_scalar_is_refused_at_load(tmp_path, where, value, why):
    text = SPACE.read_text()
    text = (text.replace("block_q = [64, 128]", f"block_q = [64, {value}]") if where == "params"
            else text.replace("batch = 8,", f"batch = {value},", 1))
    assert text != SPACE.read_text()
    space = tmp_path / "s.toml"
    space.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("block_q" if where == "params"
                                                                              else "[[buckets]]"))
    r = CliRunner().invoke(app, ["sweep", "ranker-attention", "--replay", str(JOURNAL), "--space", str(space),
                                 "--out", str(tmp_path / "out")])
    refused(r, 3, f"{space}:{line}: {why}")
    assert not (tmp_path / "out").exists()


def test_a_space_of_many_buckets_loads_in_linear_time(tmp_path):
    """Loading was quadratic in the buckets (10,000 buckets: 50 s)."""
    from kerneltune.tuning.space import load_space

    body = "".join(f'[[buckets]]\nname = "b{i}"\nproblem = {{ n = {i + 1} }}\n' for i in range(10_000))
    path = tmp_path / "s.toml"
    path.write_text(f'kernel = "k"\n[params]\na = [1, 2]\n[[constraints]]\nexpr = "a <= n"\n{body}')
    start = time.perf_counter()
    assert len(load_space(path, {"a"}, {"n"}, "k").buckets) == 10_000
    assert time.perf_counter() - start < 10  # 0.3 s here; the quadratic load took 50 s


def test_a_record_of_an_unknown_status_is_measured_again_not_taken_as_done(tmp_path, caplog):
    path = tmp_path / "j.jsonl"
    path.write_text('{"bucket": "b", "key": "1", "status": "queued"}\n'
                    '{"bucket": "b", "key": "2", "status": "compile"}\n')
    with caplog.at_level(logging.WARNING, logger="kerneltune.journal"):
        assert list(Journal(path).done()) == [("b", "2")]
    assert "status 'queued' is none this kerneltune knows" in caplog.text


def test_verify_fails_an_entry_the_runtime_here_never_uses():
    """verify exited 0 for an entry whose device stamps differ from the running system's."""
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.registry import load_kernel
    from kerneltune.tuning.verify import _Measurements, _verify_entry

    from ..tuning.test_verify import _entry, _ok, _Scripted

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    settings = MeasureSettings(rel_noise=0.01)
    e = _entry(stamps={"kernel_hash": "fakehash", "driver": "570.1"})
    want = {"kernel_hash": "fakehash", "driver": "580.2", "matched": ["kernel_hash", "driver"]}
    rep = _verify_entry(kernel, _Measurements("fake", _Scripted({1: _ok(100.0)}), settings), e, want, True, settings,
                        False, [("the item", e["config"])])
    assert rep.failed and rep.verdict.startswith("stale: measured on another system (driver: table '570.1', "
                                                 "running '580.2'), so the runtime here never uses it")


def test_a_record_the_table_could_not_hold_is_no_record(tmp_path):
    """A record within the journal's nesting bound made a table past the table's bound, which install refused and
    every later sweep into that --out tripped on."""
    from kerneltune.files.records import MAX_RECORD_DEPTH, record_defect
    from kerneltune.files.safe_io import MAX_JSON_DEPTH

    def nested(levels):
        value: object = 1
        for _ in range(levels):
            value = {"x": value}
        return value

    record = {"bucket": "b", "key": "1", "status": "ok", "timing": {"median_us": 1.0},
              "accuracy": nested(MAX_RECORD_DEPTH - 1)}
    assert record_defect(record) is None  # at the bound: its runner-up's accuracy sits at the table's bound
    deep = {**record, "accuracy": nested(MAX_RECORD_DEPTH)}
    assert "nested more than" in record_defect(deep)
    with pytest.raises(JournalError, match="could not be read back"):
        Journal(tmp_path / "j.jsonl").append(deep)
    path = tmp_path / "t.json"
    bad = {**entry(), "accuracy": nested(MAX_JSON_DEPTH)}
    with pytest.raises(TableError, match="nested more than 64 levels"):
        update_table(path, "k", "nvidia-h200", lambda t: t["entries"].update({bucket_key(BUCKET): bad}))
    assert not path.exists()


# (6) The frozen timing worker.

@pytest.mark.slow  # a real worker process started and stopped twice
def test_a_stopped_worker_is_killed_soon_and_its_pipes_and_log_are_closed(tmp_path, monkeypatch):
    """A frozen timing worker was killed only after compile timeout plus run timeout; worker log files and pipes
    were never closed."""
    from kerneltune.seams.wire import Op, Request, Status
    from kerneltune.tuning import worker_process
    from kerneltune.tuning.worker_process import WorkerDied, WorkerProcess

    monkeypatch.setattr(worker_process, "FROZEN_WORKER_S", 0.5)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(2):
        worker = WorkerProcess(env, tmp_path / "w.log")
        worker.start()
        os.kill(worker.proc.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(WorkerDied) as died:
            worker.request(Request(Op.STAMPS, "tests.tuning.fake_kernel:PLUGIN"), timeout=600)
        assert died.value.kind == Status.TIMEOUT and "was stopped for" in str(died.value)
        assert time.monotonic() - start < 10
        worker.close()
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_report_and_replay_say_once_that_a_journal_another_user_can_write_is_not_yours(tmp_path, caplog):
    """They read other users' journals (as git log reads another's repository), but said nothing: a forged record
    there showed as measured. One warning a journal, the reading goes on."""
    from kerneltune.report.frame import load_frame
    from kerneltune.tuning.replay import ReplayRunner

    shared = tmp_path / "shared"
    shared.mkdir()
    journal = shared / "ranker_attention-live.jsonl"
    journal.write_text(JOURNAL.read_text())
    journal.chmod(0o666)
    with caplog.at_level(logging.WARNING, logger="kerneltune"):
        assert len(load_frame(shared)) > 0 and len(load_frame(shared)) > 0
        ReplayRunner(journal, kernel="ranker_attention")
    said = [r.getMessage() for r in caplog.records if r.name == "kerneltune"]
    assert said == [f"report: the journal {journal} is writable by every user (mode 666): read, but it is not your "
                    f"record", f"replay: the journal {journal} is writable by every user (mode 666): read, but it is "
                    f"not your record"]
    journal.chmod(0o644)
    logs._said.clear()
    caplog.clear()
    load_frame(shared)
    assert not [r for r in caplog.records if r.name == "kerneltune"]
