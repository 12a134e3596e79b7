"""verify's refusals and the tables it finds, on a scripted runner: every bad-input return of ``verify_table``
with its exact one line, and ``verify_tables``' discovery, ceilings and runner handling."""

import concurrent.futures as cf
import json
import os

import pytest

from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import update_table
from kerneltune.tuning import verify
from kerneltune.tuning.verify import EXIT_BAD_INPUT, EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK

from ..paths import REPO

FAKE = "tests.tuning.fake_kernel:PLUGIN"


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _entry(name="small", n=2, **over):
    e = {"bucket": {"n": n}, "bucket_name": name, "problem": {"n": n}, "config": {"mode": "good", "work": 1},
         "median_us": 100.0, "spread": 0.01, "stamps": {"kernel_hash": "fakehash"}}
    e.update(over)
    return e


def _table(path, *entries, kernel="fake"):
    def put(t):
        for e in entries:
            t["entries"][bucket_key(e["bucket"])] = e

    update_table(path, kernel, "cpu", put)
    return path


class _Runner:
    """A worker that answers ``ok`` at 100 µs (or ``replies`` per work), records what it was asked, and
    whether it was closed."""

    def __init__(self, device_kind="cpu", replies=None, interrupt_at=None):
        self.device_kind, self.replies, self.interrupt_at = device_kind, replies or {}, interrupt_at
        self.measured, self.prefetched, self.closed = [], [], False

    def stamps(self):
        return {"device_kind": self.device_kind, "kernel_hash": "fakehash", "matched": ["kernel_hash"]}

    def prefetch(self, req, route):
        self.prefetched.append(req)

    def measure(self, req, route=0):
        if self.interrupt_at is not None and len(self.measured) == self.interrupt_at:
            raise KeyboardInterrupt
        self.measured.append(req)
        done = cf.Future()
        done.set_result(self.replies.get(req.tiles["work"], {"status": "ok",
                                                              "timing": {"median_us": 100.0, "spread": 0.01}}))
        return done

    def close(self):
        self.closed = True


def _run(path, tmp_path, runner=None, **kw):
    runner = runner or _Runner()
    return verify.verify_table(FAKE, path, tmp_path / "w", runner_factory=lambda *a: runner, **kw), runner


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: p.mkdir(), "{p}: cannot be read (Is a directory)"),
    (lambda p: p.write_bytes(b"\xff\xfe\x00"), "{p}: not a text file (it is not UTF-8)"),
    (lambda p: p.write_text("{"), "{p}: not valid JSON (line 1: Expecting property name enclosed in double quotes)"),
    (lambda p: None, "{p}: no such table"),
])
def test_a_table_that_cannot_be_read_is_bad_input_in_one_line_naming_it(tmp_path, make, says):
    path = tmp_path / "t.json"
    make(path)
    r, runner = _run(path, tmp_path)
    assert (r.exit_code, r.entries, r.notes, r.table) == (EXIT_BAD_INPUT, [], [says.format(p=path)], path)
    assert not runner.measured and not runner.closed, "refused before any worker starts"


def test_a_table_of_another_kernel_is_named_with_both_kernels(tmp_path):
    path = _table(tmp_path / "t.json", _entry(), kernel="other")
    r, _ = _run(path, tmp_path)
    assert (r.exit_code, r.notes) == (EXIT_BAD_INPUT, [f"{path}: a table of kernel 'other', not of 'fake'"])


def test_an_entry_without_its_problem_or_with_one_the_kernel_refuses_names_the_entry(tmp_path):
    path = _table(tmp_path / "t.json", _entry(problem=None))
    r, _ = _run(path, tmp_path)
    assert (r.exit_code, r.notes) == (EXIT_BAD_INPUT, [
        f"{path}: entry small: no 'problem' (the shape it was measured at), so verify cannot re-measure it"])
    path = _table(tmp_path / "u.json", _entry(), _entry("big", 3, problem={"n": 3, "m": 1}))
    r, _ = _run(path, tmp_path)
    assert (r.exit_code, r.notes) == (EXIT_BAD_INPUT, [
        f"{path}: entry big: problem {{'m': 1, 'n': 3}} is not one of fake's (FakeProblem.__init__() got an "
        f"unexpected keyword argument 'm')"])


def test_only_the_named_buckets_are_checked_and_the_refusal_lists_what_the_table_has(tmp_path):
    path = _table(tmp_path / "t.json", _entry(), _entry("big", 3))
    r, runner = _run(path, tmp_path, buckets=("big",))
    assert r.exit_code == EXIT_OK and [e.bucket for e in r.entries] == ["big"]
    assert {req.bucket for req in runner.measured} == {"big"} and runner.closed
    r, _ = _run(path, tmp_path, buckets=("big", "huge", "absent"))
    assert (r.exit_code, r.notes) == (EXIT_BAD_INPUT, [f"{path}: no entry for bucket absent, huge (have "
                                                       f"['big', 'small'])"])


def test_an_entry_that_breaks_the_schema_fails_the_table_first_and_the_rest_are_checked(tmp_path):
    path = _table(tmp_path / "t.json", _entry())
    table = json.loads(path.read_text())
    table["entries"]["broken"] = {"bucket_name": "broken"}
    path.write_text(json.dumps(table))
    r, _ = _run(path, tmp_path)
    assert r.exit_code == EXIT_FAIL
    first, rest = r.entries[0], r.entries[1:]
    assert (first.bucket, first.config, first.correctness, first.failed) == ("?", {}, "not checked", True)
    assert first.verdict.startswith(f"{path}: entry broken: ") and first.verdict.endswith("; entry skipped")
    assert [(e.bucket, e.verdict, e.failed) for e in rest] == [("small", "ok", False)]


def test_every_config_is_prefetched_in_the_order_it_is_timed_and_a_kept_runner_stays_open(tmp_path):
    path = _table(tmp_path / "t.json", _entry(config={"mode": "slow", "work": 2}, runner_ups=[
        {"config": {"mode": "good", "work": 2}, "median_us": 100.0, "spread": 0.01}], n=3, bucket={"n": 3},
        problem={"n": 3}))
    runner = _Runner()
    r = verify.verify_table(FAKE, path, tmp_path / "w", runner=runner)
    assert r.exit_code == EXIT_OK
    assert [dict(q.tiles) for q in runner.prefetched] == [{"mode": "slow", "work": 2}, {"mode": "good", "work": 1},
                                                          {"mode": "good", "work": 2}]
    assert [dict(q.tiles) for q in runner.measured] == [dict(q.tiles) for q in runner.prefetched]
    assert not runner.closed, "a runner handed in belongs to the caller"


def test_an_interrupt_keeps_the_verdicts_reached_and_names_the_rest(tmp_path):
    path = _table(tmp_path / "t.json", _entry(), _entry("big", 3, config={"mode": "good", "work": 3}))
    r, runner = _run(path, tmp_path, runner=_Runner(interrupt_at=1))
    assert r.exit_code == EXIT_INTERRUPTED and runner.closed
    assert [(e.bucket, e.checked, e.verdict) for e in r.entries] == [
        ("small", True, "ok"), ("big", False, verify.NOT_CHECKED_INTERRUPTED)]
    assert r.notes == ["interrupted after 1 of 2 items"] and r.timing_absent is None
    assert r.entries[1].config == {"mode": "good", "work": 3}


def test_without_the_hardware_and_without_a_small_check_verify_cannot_run(tmp_path):
    path = _table(tmp_path / "t.json", _entry())
    r = verify.verify_table("tests.tuning.fake_kernel:NEEDS_GPU", path, tmp_path / "w",
                            runner_factory=lambda *a: _Runner())
    assert (r.exit_code, r.entries, r.notes) == (EXIT_CANNOT_RUN, [], [
        "verifying fake needs an imaginary accelerator (FakeGPU 9000)"])


def test_the_tables_ceilings_are_handed_to_the_worker_from_the_first_entry_that_has_them(tmp_path):
    logs = tmp_path / "logs"
    table = {"entries": {"a": {"stamps": {"gpu": "x"}}, "b": {"stamps": {"bf16_tflops_ceiling": 700.0, "gpu": "y"}},
                         "c": {"stamps": {"bf16_tflops_ceiling": 1.0}}}}
    assert verify._seed_ceilings(table, logs) is True
    assert json.loads((logs / "ceilings.json").read_text()) == {"bf16_tflops_ceiling": 700.0, "gpu": "y"}
    assert verify._seed_ceilings({"entries": {"a": {}}}, tmp_path / "none") is False
    assert not (tmp_path / "none").exists()


def test_a_named_table_is_verified_alone_without_looking_for_others(tmp_path, monkeypatch):
    monkeypatch.setattr(verify, "_tables_of", lambda name: pytest.fail("looked for tables"))
    path = _table(tmp_path / "t.json", _entry())
    runner = _Runner()
    run = verify.verify_tables(FAKE, path, tmp_path / "w", buckets=("small",), runner_factory=lambda *a: runner)
    assert run.tables == [path] and [r.exit_code for r in run.reports] == [EXIT_OK] and runner.closed


def _roots(tmp_path, monkeypatch, *kinds):
    """A user and a shipped root, a fake table in each for ``kinds``: the runtime's places."""
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    monkeypatch.setattr(verify, "table_roots", lambda: (user, shipped))
    monkeypatch.setattr(verify, "shipped_tables_dir", lambda: shipped)
    paths = []
    for root in (user, shipped):
        for kind in kinds:
            (root / kind).mkdir(parents=True)
            paths.append(_table(root / kind / "fake.json", _entry(stamps={"kernel_hash": "fakehash",
                                                                          "bf16_tflops_ceiling": float(len(paths))})))
    return paths


def test_without_a_table_each_runtime_table_of_the_workers_device_is_verified_on_one_runner(tmp_path, monkeypatch):
    user_cpu, _, shipped_cpu, _ = _roots(tmp_path, monkeypatch, "cpu", "nvidia-b200")
    runner, seen = _Runner(), []
    run = verify.verify_tables(FAKE, None, tmp_path / "w", on_entry=seen.append,
                               runner_factory=lambda name, kernel, work: runner)
    assert run.tables == [user_cpu, shipped_cpu] and [r.table for r in run.reports] == run.tables
    assert [r.exit_code for r in run.reports] == [EXIT_OK, EXIT_OK] and len(seen) == 2 and runner.closed
    # The first readable table's ceilings (any device kind, in path order) are seeded before the worker starts.
    assert json.loads((tmp_path / "w/logs/ceilings.json").read_text())["bf16_tflops_ceiling"] == 2.0


def test_an_unreadable_table_is_passed_over_for_the_ceilings(tmp_path, monkeypatch):
    _, shipped_cpu = _roots(tmp_path, monkeypatch, "cpu")
    shipped_cpu.write_text("{")  # the first in the search's order
    run = verify.verify_tables(FAKE, None, tmp_path / "w", runner_factory=lambda *a: _Runner())
    assert json.loads((tmp_path / "w/logs/ceilings.json").read_text())["bf16_tflops_ceiling"] == 0.0
    assert [r.exit_code for r in run.reports] == [EXIT_OK, EXIT_BAD_INPUT]


def test_an_interrupt_stops_before_the_next_table(tmp_path, monkeypatch):
    _roots(tmp_path, monkeypatch, "cpu")
    runner = _Runner(interrupt_at=0)
    run = verify.verify_tables(FAKE, None, tmp_path / "w", runner_factory=lambda *a: runner)
    assert len(run.tables) == 2 and [r.exit_code for r in run.reports] == [EXIT_INTERRUPTED] and runner.closed


def test_a_kernel_this_machine_cannot_run_nor_check_small_is_refused_naming_the_cpu_checks(tmp_path, monkeypatch):
    _roots(tmp_path, monkeypatch, "cpu")
    runner = _Runner()
    with pytest.raises(verify.VerifyRefused) as e:
        verify.verify_tables("tests.tuning.fake_kernel:NEEDS_GPU", None, tmp_path / "w",
                             runner_factory=lambda *a: runner)
    assert e.value.exit_code == EXIT_CANNOT_RUN and runner.closed
    assert str(e.value) == "verify fake: needs an imaginary accelerator (FakeGPU 9000); this machine cannot run it"
