"""`verify --junit`: one JUnit test case per entry and fallback, passed, failed with the figures, or
skipped with the reason; a table that cannot be read is a failed case naming it."""

import os
import subprocess
import sys
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
