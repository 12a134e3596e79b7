"""`verify --junit`: one JUnit test case per entry and fallback, passed, failed with the figures, or
skipped with the reason; a table that cannot be read is a failed case naming it."""

import os
import select
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from kerneltune.report.junit import write_junit
from kerneltune.tuning.verify import verify_table

from ..paths import REPO
from ..tuning.test_verify import table

FAKE = "tests.tuning.fake_kernel:PLUGIN"


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def suites(path):
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    return root.findall("testsuite")


def test_passed_failed_and_skipped_cases(tmp_path):
    good = verify_table(FAKE, table(tmp_path / "a", "good", fallbacks=("unwritten",)), tmp_path / "w")
    absent = verify_table("tests.tuning.fake_kernel:NEEDS_GPU", table(tmp_path / "b", "good"), tmp_path / "w")
    broken = tmp_path / "c/broken.json"
    broken.parent.mkdir()
    broken.write_text("{")
    unreadable = verify_table(FAKE, broken, tmp_path / "w")
    write_junit(tmp_path / "j.xml", "fake", [good, absent, unreadable])
    s1, s2, s3 = suites(tmp_path / "j.xml")
    assert (s1.get("tests"), s1.get("failures"), s1.get("skipped")) == ("2", "1", "0")
    ok, bad = s1.findall("testcase")
    assert ok.get("name") == "small" and ok.find("failure") is None and "now:" in ok.find("system-out").text
    failure = bad.find("failure")
    assert bad.get("name") == "small (fallback)" and "config: mode=unwritten" in failure.text
    assert failure.get("message") == next(e for e in good.entries if e.failed).verdict
    if absent.entries:  # the fake kernel without its GPU checks correctness here and skips the timing
        assert s2.find("testcase/skipped").get("message").startswith("timing not checked: needs")
    else:
        assert s2.find("testcase/failure") is not None
    assert s3.get("failures") == "1" and str(broken) in s3.find("testcase/failure").get("message")


def test_the_cli_writes_the_file_and_keeps_its_exit_code(tmp_path):
    path = table(tmp_path, "garbage")
    r = subprocess.run([sys.executable, "-m", "kerneltune", "verify", FAKE, "--table", str(path),
                        "--junit", str(tmp_path / "out/verify.xml")], capture_output=True, text=True, cwd=REPO,
                       timeout=300)
    assert r.returncode == 1, r.stderr
    [suite] = suites(tmp_path / "out/verify.xml")
    assert suite.get("failures") == "1" and "correctness" in suite.find("testcase/failure").get("message")


def test_a_run_cut_by_a_ci_timeout_writes_the_verdicts_it_reached(tmp_path):
    """SIGTERM (a CI job's timeout) while the fallback hangs: exit 130, one line saying how far it got, and the
    JUnit with the entry passed and the fallback skipped as not checked."""
    junit = tmp_path / "verify.xml"
    proc = subprocess.Popen([sys.executable, "-m", "kerneltune", "verify", FAKE, "--table",
                             str(table(tmp_path, "good", fallbacks=("hang",))), "--junit", str(junit)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        seen, deadline = "", time.time() + 120
        while "small: " not in seen and time.time() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 1.0)[0]:
                seen += proc.stdout.readline()
        assert "small: ok" in seen, seen
        time.sleep(1.0)  # the hanging fallback is in the worker now
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("error: interrupted after 1 of 2 items of "), err
    [suite] = suites(junit)
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "0", "1")
    entry, fallback = suite.findall("testcase")
    assert entry.find("skipped") is None and entry.find("failure") is None
    assert "interrupted" in fallback.find("skipped").get("message")


@pytest.mark.parametrize("where", ["under_a_file", "a_folder"])
def test_a_junit_path_that_cannot_be_written_fails_before_any_check(tmp_path, where):
    """One line naming the option and the path, exit 3, before the table is read (not after a long verify)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    junit = blocker / "verify.xml" if where == "under_a_file" else tmp_path
    r = subprocess.run([sys.executable, "-m", "kerneltune", "verify", FAKE, "--table", str(tmp_path / "absent.json"),
                        "--junit", str(junit)], capture_output=True, text=True, cwd=REPO, timeout=300)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 3 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"--junit {junit}" in lines[0] and ("is a file" if where == "under_a_file" else "is a folder") in lines[0]
    assert "absent.json" not in r.stdout + r.stderr


def test_an_unsettled_entry_is_skipped_with_its_verdict_not_passed(tmp_path):
    from kerneltune.tuning.verify import EntryReport, VerifyReport

    verdict = "unsettled: runner-up 1 timed 100.0 µs beside its 240.0 µs, and the timings did not settle"
    report = VerifyReport(tmp_path / "cpu/t.json", [EntryReport("b", {"x": 1}, correctness="ok", verdict=verdict,
                                                                unsettled=True),
                                                    EntryReport("c", {"x": 2}, correctness="ok")], 4, [])
    write_junit(tmp_path / "j.xml", "fake", [report])
    [suite] = suites(tmp_path / "j.xml")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "0", "1")
    assert suite.find("testcase/skipped").get("message") == verdict
