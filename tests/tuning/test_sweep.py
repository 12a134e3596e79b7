"""The engine against a kernel that crashes, hangs, writes garbage or leaves outputs unwritten."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kerneltune.seams.measure import MeasureSettings
from kerneltune.seams.wire import MeasureReply, Op, PlayoffReply, Status
from kerneltune.tuning.journal import Journal
from kerneltune.tuning.pruning import EarlyStop, NoPruning
from kerneltune.tuning.sweep import ReplayOptions, SearchOptions, SweepOptions, WorkerOptions, run_sweep

from ..paths import REPO

FAKE = "tests.tuning.fake_kernel:PLUGIN"
SPACE = """kernel = "fake"
[params]
mode = {modes}
work = [1, 2, 3]
[[buckets]]
name = "small"
problem = {{ n = 2 }}
"""


def space(tmp_path, modes, extra=""):
    """The fake kernel's space of ``modes``, then ``extra`` TOML (constraints)."""
    p = tmp_path / "fake.toml"
    p.write_text(SPACE.format(modes=json.dumps(modes)) + extra)
    return p


def options(tmp_path, modes, compile_workers=0, replay=None, strategy="exhaustive", budget=None, seed=0,
            compile_timeout=20, space_extra="", **over):
    base = dict(kernel=FAKE, space_path=space(tmp_path, modes, space_extra), out=tmp_path / "out",
                workers=WorkerOptions(compile_workers=compile_workers, run_timeout=4),
                search=SearchOptions(strategy, budget, seed),
                replay=ReplayOptions(replay) if replay is not None else None,
                settings=MeasureSettings(max_seconds=0.2, min_samples=3, batch=3, compile_timeout=compile_timeout))
    base.update(over)
    return SweepOptions(**base)


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_wrong_outputs_and_compile_errors_become_their_invalidity(tmp_path):
    """The quick loop's share of the next test: the failures a worker survives, without the restarts a
    crash or a hang costs (seconds each)."""
    opts = options(tmp_path, ["good", "compile_error", "garbage", "unwritten"])
    [result] = run_sweep(opts)
    status = {(r["tiles"]["mode"], r["tiles"]["work"]): r["status"] for r in Journal(opts.journal_path).records()}
    assert status[("good", 1)] == "ok" and status[("compile_error", 1)] == "compile"
    assert status[("garbage", 1)] == "correctness" and status[("unwritten", 2)] == "correctness"
    assert result.entry["config"] == {"mode": "good", "work": 1} and len(status) == 12


def test_a_sweep_where_times_mean_nothing_measures_as_ever_and_its_entry_says_why(tmp_path):
    """Under an interpreter the sweep times each candidate as it always does (the journal's records are those of any
    sweep); the result and the table's entry carry why its times say nothing of speed."""
    opts = options(tmp_path, ["good"], kernel="tests.tuning.fake_kernel:INTERPRETED")
    [result] = run_sweep(opts)
    assert result.void_timings == "fake runs in its interpreter on this CPU"
    assert result.entry.void_timings == result.void_timings
    assert all(r.timing is not None for r in Journal(opts.journal_path).records() if r.status != Status.CONSTRAINT)
    (tmp_path / "native").mkdir()
    [native] = run_sweep(options(tmp_path / "native", ["good"]))
    assert native.void_timings is None and native.entry.void_timings is None


def test_what_a_check_measures_reaches_the_journal_the_table_and_a_replay(tmp_path):
    """A kernel's accuracy figures are what the runtime holds against a launch's error budget: each
    verified record keeps its own, and the entry's winner and fallbacks carry theirs, live and replayed."""
    # twin: another gated setting, as fast as good. No pruning: on a loaded machine one 1 ms sleep can take 1.5x
    # another's, and a pruned candidate is no fallback (CI saw the entry without one).
    unpruned = SearchOptions(pruner=NoPruning())
    opts = options(tmp_path, ["good", "twin"], search=unpruned)
    [result] = run_sweep(opts)
    checked = [r for r in Journal(opts.journal_path).records() if r["status"] in ("ok", "pruned")]
    assert len(checked) == 4
    for r in checked:
        assert r["accuracy"] == {"max_abs": 0.0, "work": float(r["tiles"]["work"])}
    assert result.entry["accuracy"]["work"] == result.entry["config"]["work"]
    [fallback] = result.entry["fallbacks"]
    assert fallback["config"]["mode"] != result.entry["config"]["mode"]
    assert fallback["accuracy"]["work"] == fallback["config"]["work"]
    (tmp_path / "r").mkdir()
    [replayed] = run_sweep(options(tmp_path / "r", ["good", "twin"], replay=opts.journal_path, search=unpruned))
    assert replayed.entry["accuracy"] == result.entry["accuracy"]
    assert replayed.entry["fallbacks"][0]["accuracy"] == fallback["accuracy"]


def test_candidates_compiled_in_compile_workers_are_checked_and_timed_like_any_other(tmp_path):
    """Two compile workers building ahead: a compile that crashes its process is that candidate's compile
    failure, a wrong build still fails its check, and the winner is the one compiled inline would be."""
    opts = options(tmp_path, ["good", "compile_crash", "garbage"], compile_workers=2)
    [result] = run_sweep(opts)
    recs = list(Journal(opts.journal_path).records())
    status = {(r["tiles"]["mode"], r["tiles"]["work"]): r for r in recs}
    assert status[("compile_crash", 1)]["status"] == "compile" and "died" in status[("compile_crash", 1)]["error"]
    assert status[("garbage", 2)]["status"] == "correctness" and status[("good", 2)]["status"] in ("ok", "pruned")
    assert result.entry["config"] == {"mode": "good", "work": 1} and len(recs) == 9


def test_each_buckets_check_programs_compile_once_in_a_compile_worker_before_its_candidates_are_checked(
        tmp_path, monkeypatch):
    """Through the whole pipe (the sweep's hand-over, the timing worker's compile-ahead, its compile workers, the
    user's build cache): every candidate's check ran with its bucket's programs compiled, once a bucket."""
    monkeypatch.setenv("FAKE_CHECK_PROGRAMS", str(tmp_path / "marks"))
    monkeypatch.setenv("FAKE_CHECK_PROGRAMS_S", "0.5")
    (tmp_path / "marks").mkdir()
    two = tmp_path / "two.toml"
    two.write_text(SPACE.format(modes='["good"]') + '[[buckets]]\nname = "larger"\nproblem = { n = 3 }\n')
    opts = options(tmp_path, ["good"], compile_workers=2, space_path=two,
                   kernel="tests.tuning.fake_kernel:CHECK_PROGRAMS")
    run_sweep(opts)
    recs = [r for r in Journal(opts.journal_path).records() if r["status"] in ("ok", "pruned")]
    assert Counter(r["bucket"] for r in recs) == {"small": 2, "larger": 3}
    assert all(r["accuracy"]["programs_ready"] == 1.0 for r in recs)
    assert {p.name: len(p.read_text().split()) for p in (tmp_path / "marks").iterdir()} == {"n2": 1, "n3": 1}


@pytest.mark.slow  # a hang costs the run timeout after its compile and a fresh worker: about 5 s per case
@pytest.mark.parametrize("compile_workers", [0, 2])
def test_every_failure_becomes_its_invalidity(tmp_path, compile_workers):
    # The fake kernel compiles at once: 3 s of compile timeout is room for a worker's start on a loaded
    # machine, against the 20 s default of these tests (two hangs waited 48 s). One hang is enough: the second
    # (work 2) is left out by a constraint (it cost 5 s a case).
    one_hang = '[[constraints]]\nexpr = "mode != \'hang\' or work == 1"\nwhy = "one hang is enough"\n'
    opts = options(tmp_path, ["good", "compile_error", "crash", "hang", "garbage", "unwritten"],
                   compile_workers=compile_workers, compile_timeout=3, space_extra=one_hang)
    [result] = run_sweep(opts)
    recs = list(Journal(opts.journal_path).records())
    status = {(r["tiles"]["mode"], r["tiles"]["work"]): r["status"] for r in recs}
    assert status[("good", 1)] == "ok" and status[("good", 3)] == "constraint"
    assert status[("compile_error", 1)] == "compile"
    assert status[("crash", 1)] == "runtime"
    assert status[("hang", 1)] == "timeout" and ("hang", 2) not in status
    [hung] = [r for r in recs if r["tiles"]["mode"] == "hang"]
    assert hung["error"].startswith("check or timing: no answer within 4 s of its compile")
    assert status[("garbage", 1)] == "correctness" and status[("unwritten", 2)] == "correctness"
    assert all(r.get("error") for r in recs if r["status"] not in ("ok", "pruned"))
    assert result.entry["config"] == {"mode": "good", "work": 1}
    assert len(recs) == 16  # every candidate exactly once (hang with work 2 and 3 left out)


# 100 timed calls per candidate (0.1-0.6 s each), so the kill lands mid-sweep even on a loaded machine.
KILL_SETTINGS = {"max_seconds": 2.0, "min_samples": 100, "batch": 20}


def test_sigkill_mid_sweep_then_resume_measures_each_candidate_once(tmp_path):
    opts = options(tmp_path, ["good", "slow", "garbage", "unwritten"], settings=MeasureSettings(**KILL_SETTINGS))
    code = (f"from tests.tuning.test_sweep import KILL_SETTINGS, options; "
            f"from kerneltune.tuning.sweep import run_sweep; from kerneltune.seams.measure import MeasureSettings; "
            f"import pathlib; run_sweep(options(pathlib.Path({str(tmp_path)!r}), "
            f"['good', 'slow', 'garbage', 'unwritten'], settings=MeasureSettings(**KILL_SETTINGS)))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, start_new_session=True)
    journal = Journal(opts.journal_path)
    deadline = time.time() + 120
    while time.time() < deadline and sum(r["status"] != "constraint" for r in journal.records()) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [r["key"] for r in journal.records() if r["status"] != "constraint"]
    assert 3 <= len(before) < 8, "the kill must land mid-sweep"
    run_sweep(opts)
    keys = Counter(r["key"] for r in journal.records())
    assert len(keys) == 12 and set(keys.values()) == {1}


def test_replay_answers_without_workers(tmp_path):
    live = options(tmp_path, ["good", "slow"])
    run_sweep(live)
    replay = options(tmp_path, ["good", "slow"], replay=live.journal_path, out=tmp_path / "replay")
    [result] = run_sweep(replay)
    assert result.entry["config"] == {"mode": "good", "work": 1}


def test_replay_of_a_journal_older_than_a_tunable_answers_at_its_default(tmp_path):
    """A journal recorded before ``work`` was a tunable (the fake kernel's default: 1) answers the
    configs at work=1 and no others."""
    live = options(tmp_path, ["good", "slow"])
    run_sweep(live)
    old = tmp_path / "old.jsonl"
    with old.open("w") as f:
        for rec in Journal(live.journal_path).records():
            if rec["tiles"]["work"] == 1:
                tiles = {"mode": rec["tiles"]["mode"]}
                f.write(json.dumps({**rec, "tiles": tiles, "key": json.dumps(tiles, sort_keys=True)}) + "\n")
    [result] = run_sweep(options(tmp_path, ["good", "slow"], replay=old, out=tmp_path / "replay"))
    assert result.entry["config"] == {"mode": "good", "work": 1}
    assert result.failures["unsupported"] == 2  # work 2 in both modes (work 3 exceeds n: a constraint)


def test_replay_keeps_each_records_own_stamps(tmp_path):
    """Two workers' journals carry two GPUs' ceilings: a replayed record's % of ceiling is its own
    GPU's (run I's regenerated table took the first record's ceiling for every one)."""
    live = options(tmp_path, ["good", "slow"])
    run_sweep(live)
    recs = [r for r in Journal(live.journal_path).records() if r["status"] == "ok"]
    folder = tmp_path / "journals"
    folder.mkdir()
    for w, ceiling in (("w0", 100.0), ("w1", 200.0)):
        with (folder / f"fake-live-{w}.jsonl").open("w") as f:
            for rec in recs[:1] if w == "w0" else recs[1:]:
                stamps = {**rec["stamps"], "bf16_tflops_ceiling": ceiling}
                f.write(json.dumps({**rec, "stamps": stamps, "tflops": 50.0, "pct_ceiling": 5000 / ceiling}) + "\n")
    replay = options(tmp_path, ["good", "slow"], replay=folder, out=tmp_path / "replay")
    run_sweep(replay)
    got = {r["key"]: r for r in Journal(replay.journal_path).records() if r["status"] == "ok"}
    assert {k: r["pct_ceiling"] for k, r in got.items()} == {r["key"]: 5000 / (100.0 if i == 0 else 200.0)
                                                             for i, r in enumerate(recs)}
    assert all(r["stamps"]["replayed_from"] == str(folder) for r in got.values())


class SlowRunner:
    """Answers each measurement after ``seconds`` on a timer thread, as a GPU worker would."""

    parallel_measures = 1
    compiles_ahead = queues_ahead = 1

    def __init__(self, seconds):
        self.seconds = seconds
        self.prefetched = []
        self.measured = []

    def stamps(self):
        return {"backend": "host", "matched": ["device"], "device": "test", "device_kind": "cpu"}

    def prefetch(self, req, route):
        self.prefetched.append(req.config)

    def measure(self, req, route=0):
        import concurrent.futures as cf
        import threading

        fut = cf.Future()
        self.measured.append(req)
        median = 10.0 + sum(v for v in req.config.values() if type(v) is int)
        reply = MeasureReply(Status.OK, timing={"median_us": median, "spread": 0.0, "samples": 3, "noise": 0.0})
        if self.seconds:
            threading.Timer(self.seconds, fut.set_result, args=(reply,)).start()
        else:
            fut.set_result(reply)
        return fut

    def request(self, req):
        if req.op == Op.PLAYOFF:  # a fake times no leaders again: the entry is the sequential one's
            return PlayoffReply(Status.UNSUPPORTED, "a fake runner")
        raise AssertionError("not used")

    def close(self):
        pass


def test_the_sweep_sleeps_while_a_candidate_is_measured(tmp_path):
    """4 candidates of 0.3 s each: the sweep's process uses under 5% of one core meanwhile (it waited
    on always-done futures in a loop before and burnt a whole core)."""
    runner = SlowRunner(0.3)
    opts = options(tmp_path, ["good", "slow"], budget=4)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    [result] = run_sweep(opts, runner_factory=lambda o, k: runner)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert result.measured == 4 and wall >= 1.2
    assert cpu / wall < 0.05, f"{cpu:.3f} s of CPU over {wall:.2f} s"
    # Each candidate was handed over to compile before it was measured, the first bucket's heuristic first of all,
    # before the stamps (its compile overlaps the worker's start): it is proposed again and measured first.
    assert len(runner.prefetched) == 5 and runner.prefetched[0] == runner.measured[0].config


class CountingRunner(SlowRunner):
    """Answers at once, and notes how many candidates were handed over to compile but not yet measured each time
    one is measured."""

    compiles_ahead, queues_ahead = 2, 5

    def __init__(self):
        super().__init__(0.0)
        self.outstanding = []

    def measure(self, req, route=0):
        self.outstanding.append(len(self.prefetched) - len(self.measured))
        return super().measure(req, route)


@pytest.mark.parametrize(("strategy", "depth"), [("exhaustive", 1 + 5), ("tpe", 1 + 2), ("random", 1 + 5)])
def test_a_strategy_that_learns_is_proposed_as_far_ahead_as_compiles_run_and_another_as_far_as_they_queue(
        tmp_path, strategy, depth):
    """With 2 compiles running and 5 queued a route: TPE proposes 1 + 2 candidates before its first result, as far
    ahead as the workers take; the exhaustive and random strategies, which learn nothing from a result, 1 + 5, so
    that a worker that finishes early does not wait on the slowest compile at the head of the line."""
    runner = CountingRunner()
    [result] = run_sweep(options(tmp_path, ["good", "slow", "garbage", "unwritten"], strategy=strategy, budget=8),
                         runner_factory=lambda o, k: runner)
    assert result.measured == 8
    # The first bucket's heuristic config is handed over once more before the stamps (``_compile_first``).
    assert max(runner.outstanding) == depth + 1 and runner.outstanding[0] == depth + 1


def test_a_buckets_candidates_share_inputs_fresh_per_bucket_and_sweep_seed(tmp_path):
    """One check seed for every candidate of a bucket (its references computed once per worker), another
    for the timing bounds, and both change with the bucket and with --seed."""
    def seeds(seed, bucket="small"):
        runner, where = SlowRunner(0.0), tmp_path / f"{bucket}-{seed}"
        where.mkdir()
        space_path = where / "named.toml"
        space_path.write_text(space(where, ["good", "slow"]).read_text().replace('"small"', f'"{bucket}"'))
        run_sweep(options(where, ["good", "slow"], seed=seed, space_path=space_path),
                  runner_factory=lambda o, k: runner)
        assert len({str(r.config) for r in runner.measured}) >= 4
        return {(r.seed, r.inputs["timing_seed"]) for r in runner.measured}

    [(check, timing)] = seeds(0)
    assert check != timing
    for other in (seeds(1), seeds(0, "large")):
        [(check2, timing2)] = other
        assert check2 != check and timing2 != timing


def test_contenders_re_measure_only_the_configs_a_table_holds(tmp_path):
    """After a kernel change: the table's winner, runner-up and fallback are timed again, nothing else of the
    space's 9 configs; a bucket the table lacks, a sampler, or another kernel's table is refused by name."""
    from kerneltune.tables.store import update_table

    from .test_verify import table

    held = table(tmp_path / "t", "good", fallbacks=("slow",), runner_ups=[("good", 2)])
    runner = SlowRunner(0.0)
    [result] = run_sweep(options(tmp_path, ["good", "slow", "garbage"], search=SearchOptions(contenders=held)),
                         runner_factory=lambda o, k: runner)
    assert sorted((r.config["mode"], r.config["work"]) for r in runner.measured) == [
        ("good", 1), ("good", 2), ("slow", 1)]
    assert result.entry is not None
    assert result.prior == [f"small: --contenders {held} holds 3 configs for it (3 feasible here), and only those are "
                            f"timed; a full sweep times up to 9"]
    (tmp_path / "o").mkdir()
    other = tmp_path / "o" / "n3.toml"
    other.write_text(space(tmp_path / "o", ["good"]).read_text().replace("n = 2", "n = 3"))
    started = []
    with pytest.raises(ValueError, match="no entry for bucket 'small'"):
        run_sweep(options(tmp_path / "o", ["good"], space_path=other, out=tmp_path / "o2",
                          search=SearchOptions(contenders=held)),
                  runner_factory=lambda o, k: started.append(k) or SlowRunner(0.0))
    assert not started, "a bucket the table lacks is refused before any worker starts"
    with pytest.raises(ValueError, match="samples the space"):
        SearchOptions(strategy="tpe", contenders=held)
    update_table(tmp_path / "x.json", "other_kernel", "cpu", lambda t: None)
    with pytest.raises(ValueError, match="a table of 'other_kernel'"):
        run_sweep(options(tmp_path, ["good"], out=tmp_path / "o3",
                          search=SearchOptions(contenders=tmp_path / "x.json")),
                  runner_factory=lambda o, k: SlowRunner(0.0))


def test_contenders_re_measure_every_bucket_the_table_holds_not_only_the_space_s(tmp_path):
    """After a kernel change verify says `sweep KERNEL --contenders TABLE` re-measures the table: the buckets a
    --from-ledger sweep added (named by their fields, in no space) are re-measured too, each at its entry's problem
    and inputs; an entry that keeps no problem is named, not silently left stale."""
    from .test_verify import _entry, _table_of

    ledger = _entry("n=3", n=3, problem={"n": 3}, inputs={"rows": 3}, config={"mode": "slow", "work": 2})
    old = {k: v for k, v in _entry("n=4", n=4).to_json().items() if k != "problem"}
    held = _table_of(tmp_path / "t.json", _entry(inputs={}), ledger, old)
    runner = SlowRunner(0.0)
    results = run_sweep(options(tmp_path, ["good", "slow"], search=SearchOptions(contenders=held)),
                        runner_factory=lambda o, k: runner)
    assert [r.bucket for r in results] == ["small", "n=3"] and all(r.entry is not None for r in results)
    assert {(q.bucket, q.config["mode"], q.config["work"], q.problem["n"]) for q in runner.measured} == {
        ("small", "good", 1, 2), ("n=3", "slow", 2, 3)}
    assert [q.inputs["rows"] for q in runner.measured if q.bucket == "n=3"] == [3]
    from kerneltune.tuning.sweep import check_options

    notes = check_options(options(tmp_path, ["good"], search=SearchOptions(contenders=held))).notes
    assert notes == (f"contenders {held}: bucket n=4 not re-measured (the entry keeps no problem to measure it at)",)


def test_contenders_with_too_few_configs_say_no_search_happened_and_what_a_full_sweep_takes(tmp_path):
    """A stale entry with no runner-ups, rivals or fallbacks: one config re-measured, and the sweep says so."""
    from .test_verify import table

    held = table(tmp_path / "t", "good")
    lines = []

    class Said:
        def on_prior(self, bucket, given):
            lines.extend(given)

        def on_bucket_start(self, bucket, total, done):
            assert lines, "the prior knowledge is said before the bucket's first candidate"

        def on_record(self, bucket, record, failures):
            pass

        def on_bucket_end(self, bucket, entry):
            pass

    run_sweep(options(tmp_path, ["good", "slow", "garbage"], search=SearchOptions(contenders=held)), Said(),
              runner_factory=lambda o, k: SlowRunner(0.0))
    assert lines == [f"small: --contenders {held} holds 1 config for it (1 feasible here), and only those are timed: "
                     f"fewer than 3, so this is a re-measure, not a search; a full sweep (without --contenders) "
                     f"times up to 9 configs the space allows"]


def test_a_replay_of_an_older_kernel_writes_entries_stamped_with_the_recorded_hash(tmp_path):
    """A replay never passes an old measurement off as current: the runtime sees the old hash and skips it."""
    live = options(tmp_path, ["good", "slow"])
    run_sweep(live)
    old = tmp_path / "old.jsonl"
    recs = Journal(live.journal_path).records()
    old.write_text("".join(json.dumps({**r, "kernel_hash": "0ld"}) + "\n" for r in recs))
    [result] = run_sweep(options(tmp_path, ["good", "slow"], replay=old, out=tmp_path / "replay"))
    assert result.entry["stamps"]["kernel_hash"] == "0ld" and result.entry["stamps"]["replayed_from"] == str(old)
    [fresh] = run_sweep(options(tmp_path, ["good", "slow"], replay=live.journal_path, out=tmp_path / "replay2"))
    assert fresh.entry["stamps"]["kernel_hash"] == "fakehash"


def test_two_sweeps_never_write_one_journal(tmp_path):
    opts = options(tmp_path, ["good"])
    with Journal(opts.journal_path).writer_lock(), pytest.raises(ValueError, match="another sweep is writing"):
        run_sweep(opts)


def test_a_hard_link_to_a_journal_is_the_same_journal(tmp_path):
    """The lock is on the file, not its name: two sweeps through two hard links wrote 27 duplicate records."""
    opts = options(tmp_path, ["good"])
    Journal(opts.journal_path).path.touch()
    os.link(opts.journal_path, tmp_path / "hard.jsonl")
    with Journal(tmp_path / "hard.jsonl").writer_lock(), pytest.raises(ValueError, match="another sweep is writing"):
        run_sweep(opts)


def _children(pid):
    kids = []
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = Path(f"/proc/{stat}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(stat))
    return kids


def _sweep_busy_with_a_hang(tmp_path, run_timeout):
    """A sweep in its own process, once its worker is inside the hanging candidate's check."""
    # SIGINT as a foreground command has it: a suite started as a background job (`make test &`) runs with
    # SIGINT ignored, which every child inherits (the sweep then never sees the interrupt). SIGUSR1: every
    # thread's stack, for a test that finds the sweep still running.
    dump = tmp_path / "stacks.txt"
    code = (f"import faulthandler, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            f"faulthandler.register(signal.SIGUSR1, file=open({str(dump)!r}, 'w'), all_threads=True); "
            f"from tests.tuning.test_sweep import options; from kerneltune.tuning.sweep import run_sweep, "
            f"WorkerOptions; import pathlib; run_sweep(options(pathlib.Path({str(tmp_path)!r}), ['hang'], "
            f"workers=WorkerOptions(compile_workers=0, run_timeout={run_timeout})))")
    mark = tmp_path / "hanging"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FAKE_KERNEL_HANG_MARK": str(mark)})
    deadline = time.time() + 120  # a loaded machine starts processes slowly
    while time.time() < deadline and not mark.exists():
        time.sleep(0.1)
    assert mark.exists(), "the sweep's worker never started the hanging candidate"
    workers = _children(proc.pid)
    assert workers, "the sweep started no worker"
    return proc, workers


def test_a_killed_sweeps_worker_dies_with_it(tmp_path):
    """kill -9 of the sweep alone (not its process group): its worker, busy with a hanging candidate, goes too."""
    proc, workers = _sweep_busy_with_a_hang(tmp_path, run_timeout=4)
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f"/proc/{w}") and _alive(w) for w in workers):
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{w}") and _alive(w) for w in workers)


def test_ctrl_c_stops_a_sweep_at_once_with_its_busy_worker(tmp_path):
    """SIGINT while the worker measures a hanging candidate: the sweep exits within seconds and takes its
    worker along, instead of waiting out the measurement's timeout (run Q's verify sat 8 s past a SIGINT
    until it was killed)."""
    proc, workers = _sweep_busy_with_a_hang(tmp_path, run_timeout=300)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        stacks = (tmp_path / "stacks.txt").read_text() if (tmp_path / "stacks.txt").exists() else "(no dump)"
        raise AssertionError(f"the sweep was still running 20 s after SIGINT; its threads:\n{stacks}") from None
    assert not any(os.path.exists(f"/proc/{w}") and _alive(w) for w in workers)


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_resumed_search_takes_over_the_study_log_lock_a_killed_sweep_left(tmp_path, caplog):
    """kill -9 while Optuna wrote its study log leaves the log's lock file behind; the resumed sweep (which
    holds the journal's writer lock, so no one else uses that log) removes it instead of waiting out Optuna's
    30 s grace period and its warnings."""
    import optuna

    run_sweep(options(tmp_path, ["good", "slow"], strategy="tpe", budget=2))
    study_log = options(tmp_path, ["good"]).journal_path.with_suffix(".optuna.log")
    Path(f"{study_log}.lock").symlink_to(study_log)
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level("WARNING"):
            [result] = run_sweep(options(tmp_path, ["good", "slow"], strategy="tpe", budget=4))
    finally:
        optuna.logging.disable_propagation()
    assert result.measured == 2 and not Path(f"{study_log}.lock").is_symlink()
    assert not [r for r in caplog.records if "lock" in r.getMessage()]


class _Scripted:
    """A runner that answers from a table of times by config ("mode", "work") and keeps every request:
    the sweep's own decisions (what it prunes at, what it measures again) without timing noise."""

    parallel_measures = 1
    compiles_ahead = queues_ahead = 0

    def __init__(self, times_us):
        self.times_us, self.requests = times_us, []

    def stamps(self):
        return {"backend": "host", "matched": ["backend"], "device_kind": "cpu", "gpu": "cpu"}

    def prefetch(self, req, route):
        pass

    def measure(self, req, route=0):
        import concurrent.futures as cf

        self.requests.append(req)
        us = self.times_us[(req.config["mode"], req.config["work"])]
        done = cf.Future()
        bound = req.prune_above_us
        done.set_result(MeasureReply(Status.PRUNED if bound is not None and us > bound else Status.OK,
                                     timing={"median_us": us, "spread": 0.01, "samples": 3}))
        return done

    def request(self, req):
        if req.op == Op.PLAYOFF:  # a fake times no leaders again: the entry is the sequential one's
            return PlayoffReply(Status.UNSUPPORTED, "a fake runner")
        raise AssertionError("no other request expected")

    def close(self):
        pass


TIMES = {("good", 1): 100.0, ("good", 2): 50.0, ("slow", 1): 70.0, ("slow", 2): 140.0, ("twin", 1): 90.0,
         ("twin", 2): 60.0}


def test_each_candidate_is_pruned_at_the_factor_over_the_best_so_far(tmp_path):
    runner = _Scripted(TIMES)
    opts = options(tmp_path, ["good", "slow", "twin"], search=SearchOptions(pruner=EarlyStop(1.5)))
    run_sweep(opts, runner_factory=lambda o, k: runner)
    order = [(r.config["mode"], r.config["work"]) for r in runner.requests]
    bounds = [r.prune_above_us for r in runner.requests]
    best = [min(TIMES[c] for c in order[:i]) if i else None for i in range(len(order))]
    assert bounds == [None if b is None else 1.5 * b for b in best]
    status = {(r["tiles"]["mode"], r["tiles"]["work"]): r["status"] for r in Journal(opts.journal_path).records()}
    for c, b in zip(order, best, strict=True):
        assert status[c] == ("pruned" if b is not None and TIMES[c] > 1.5 * b else "ok"), c


class _Margin:
    """A pruner of one's own: a fixed margin over the best so far, not a factor."""

    stops_early = True

    def bound_us(self, best_us):
        return None if best_us is None else best_us + 15.0


def test_the_sweep_asks_its_pruner_for_each_bound(tmp_path):
    runner = _Scripted(TIMES)
    opts = options(tmp_path, ["good", "slow", "twin"], search=SearchOptions(pruner=_Margin()))
    run_sweep(opts, runner_factory=lambda o, k: runner)
    order = [(r.config["mode"], r.config["work"]) for r in runner.requests]
    best = [min(TIMES[c] for c in order[:i]) if i else None for i in range(len(order))]
    assert [r.prune_above_us for r in runner.requests] == [None if b is None else b + 15.0 for b in best]


def test_the_early_stop_takes_its_factor_and_no_pruning_bounds_nothing():
    assert EarlyStop(2.0).bound_us(10.0) == 20.0 and EarlyStop().bound_us(None) is None
    assert NoPruning().bound_us(10.0) is None and not NoPruning().stops_early and EarlyStop().stops_early
    for bad in (1.0, 0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="early-stop-factor"):
            EarlyStop(bad)


@pytest.mark.parametrize("strategy", ["random", "exhaustive"])
def test_a_resumed_budgeted_search_measures_only_what_its_budget_has_left(tmp_path, strategy):
    runner = _Scripted(TIMES)
    opts = options(tmp_path, ["good", "slow", "twin"], strategy=strategy, budget=4)
    run_sweep(opts, runner_factory=lambda o, k: runner)
    assert len(runner.requests) == 4
    [again] = run_sweep(opts, runner_factory=lambda o, k: runner)
    assert len(runner.requests) == 4 and again.skipped == 4
    more = options(tmp_path, ["good", "slow", "twin"], strategy=strategy, budget=5)
    run_sweep(more, runner_factory=lambda o, k: runner)
    assert len(runner.requests) == 5
    assert len({json.dumps(dict(r.config), sort_keys=True) for r in runner.requests}) == 5


def test_a_sweep_without_resume_keeps_the_old_journal_aside_and_measures_again(tmp_path):
    runner = _Scripted(TIMES)
    opts = options(tmp_path, ["good", "slow"])
    run_sweep(opts, runner_factory=lambda o, k: runner)
    measured = len(runner.requests)
    for _ in range(2):  # within one second: the second set-aside must not overwrite the first
        [fresh] = run_sweep(options(tmp_path, ["good", "slow"], resume=False), runner_factory=lambda o, k: runner)
        assert fresh.skipped == 0
    assert len(runner.requests) == 3 * measured
    kept = [p for p in opts.journal_path.parent.glob("*.jsonl") if p != opts.journal_path]
    assert len(kept) == 2
    assert all(len(list(Journal(p).records())) == len(list(Journal(opts.journal_path).records())) for p in kept)


def test_a_pruned_candidate_still_tells_the_strategy_its_first_batch_time():
    from kerneltune.files.records import Record

    pruned = {"bucket": "b", "key": "k", "status": "pruned", "timing": {"median_us": 180.0}}
    assert Record.from_json(pruned).value == 180.0
    assert Record.from_json({"bucket": "b", "key": "k", "status": "correctness", "error": "x"}).value is None


def test_a_resume_never_measures_a_failed_candidate_again(tmp_path):
    """A failure is a verdict the journal keeps: a resumed sweep would otherwise wait out every hang's timeout
    and rebuild every crash again."""
    modes = ["good", "compile_error", "garbage", "unwritten"]
    [first] = run_sweep(options(tmp_path, modes))
    lines = options(tmp_path, modes).journal_path.read_text()
    assert sum(first.failures.values()) == 6 and first.measured == 8
    [again] = run_sweep(options(tmp_path, modes))
    assert again.measured == 0 and again.skipped == 8 and not again.failures
    assert options(tmp_path, modes).journal_path.read_text() == lines
    assert again.entry["config"] == first.entry["config"] == {"mode": "good", "work": 1}


def test_the_progress_counts_what_the_budget_allows_and_what_the_journal_holds(tmp_path):
    """The progress bar's total is the budget where it is under the feasible configs, and a resume starts it at
    what the journal already holds."""

    class Progress:
        def __init__(self):
            self.starts = []

        def on_prior(self, bucket, lines):
            pass

        def on_bucket_start(self, bucket, total, done):
            self.starts.append((total, done))

        def on_record(self, bucket, record, failures):
            pass

        def on_bucket_end(self, bucket, entry):
            pass

    seen = Progress()
    run_sweep(options(tmp_path, ["good", "slow"], search=SearchOptions("exhaustive", 3, 0)), seen)
    run_sweep(options(tmp_path, ["good", "slow"], search=SearchOptions("exhaustive", 3, 0)), seen)
    run_sweep(options(tmp_path, ["good", "slow"]), seen)  # no budget: every feasible config (4)
    assert seen.starts == [(3, 0), (3, 3), (4, 3)]


def test_an_undecided_playoff_times_on_ten_rounds_at_a_time_and_decides_on_them_all(tmp_path):
    """A busy host's rounds: the first 10 leave the leaders' paired interval straddling parity and wide; the
    playoff asks for more until it is decided or has 40; the entry keeps every round's decision."""
    import itertools

    class Noisy(_Scripted):
        def __init__(self):
            super().__init__({("good", 1): 80.0, ("good", 2): 81.0, ("slow", 1): 300.0, ("slow", 2): 300.0})
            self.rounds = itertools.count()

        def measure(self, req, route=0):
            import concurrent.futures as cf

            self.requests.append(req)
            us = self.times_us[(req.config["mode"], req.config["work"])]
            done = cf.Future()
            done.set_result(MeasureReply(Status.OK, timing={"median_us": us, "spread": 0.01, "samples": 3,
                                                            "noise": 0.01}))
            return done

        def request(self, req):
            n = next(self.rounds)
            # Round by round, the second leader (good, 1) runs 0.8x the first; only the first request is noisy.
            noise = [1.0, 2.0] * 5 if n == 0 else [1.0] * 10
            base = [100.0 * f for f in noise]
            return PlayoffReply(Status.OK, rounds=10, batch=1, times=(tuple(base), tuple(
                b * (0.8 if n else (0.5 if i % 2 else 1.4)) for i, b in enumerate(base))))

    runner = Noisy()
    opts = options(tmp_path, ["good", "slow"], search=SearchOptions(pruner=NoPruning(), warm_start=False))
    [result] = run_sweep(opts, runner_factory=lambda o, k: runner)
    assert result.playoff is not None and result.playoff.rounds == 20 and next(runner.rounds) == 2
    assert result.entry["config"] == {"mode": "good", "work": 2}  # beat the incumbent beyond doubt in 20 rounds
    assert result.entry["decided_by"] == "playoff" and result.entry["playoff"]["rounds"] == result.playoff.rounds
