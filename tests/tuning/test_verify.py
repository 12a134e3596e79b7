"""kerneltune verify: each of its exit codes, its verdicts at their bounds, its refusals and the tables it finds."""

import json
import os

import pytest

from kerneltune.files.records import Entry
from kerneltune.seams.wire import REPLIES, MeasureReply, Status
from kerneltune.tables.locations import shipped_tables_dir
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import update_table
from kerneltune.tuning import verify
from kerneltune.tuning.verify import (
    EXIT_BAD_INPUT,
    EXIT_CANNOT_RUN,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    NOT_CHECKED_INTERRUPTED,
    verify_table,
    worst_exit_code,
)

from ..paths import REPO
from .fake_kernel import FAKE_GPU, NEED


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def table(tmp_path, mode, recorded_us=1000.0, fallbacks=(), runner_ups=()):
    return _table_of(tmp_path / "fake.json", _entry(
        config={"mode": mode, "work": 1}, median_us=recorded_us, inputs={},
        fallbacks=[{"config": {"mode": m, "work": 1}, "median_us": 50_000.0, "spread": 0.01} for m in fallbacks],
        runner_ups=[{"config": {"mode": m, "work": w}, "median_us": recorded_us, "spread": 0.01}
                    for m, w in runner_ups]))


def _table_of(path, *entries, kernel="fake"):
    def put(t):
        for e in entries:
            t["entries"][bucket_key(e["bucket"])] = e

    update_table(path, kernel, "cpu", put)
    return path


def test_exit_0_when_everything_holds(tmp_path):
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "good"), tmp_path / "w")
    assert r.exit_code == EXIT_OK, [e.verdict for e in r.entries]


def test_exit_1_on_wrong_output_or_a_winner_slower_than_a_rival_timed_beside_it(tmp_path):
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "garbage"), tmp_path / "w")
    assert r.exit_code == EXIT_FAIL and "correctness" in r.entries[0].verdict
    # The winner (3 ms a call) against its runner-up (work 2: 2 ms) and the heuristic (1 ms), all timed now.
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "slow", runner_ups=[("good", 2)]),
                     tmp_path / "w")
    assert r.exit_code == EXIT_FAIL
    assert "slower than the heuristic (mode=good work=1) timed beside it: +" in r.entries[0].verdict
    assert "interleaved rounds, 95% interval" in r.entries[0].verdict and r.entries[0].rounds >= 10
    assert set(r.entries[0].rivals_us) == {"runner-up 1", "the heuristic"}


def test_drift_from_the_recorded_time_is_a_warning_not_a_failure(tmp_path):
    """Recorded at 100 µs on another machine or day, 1 ms now: absolute times are not compared across runs."""
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "good", recorded_us=100.0,
                                                              runner_ups=[("slow", 1)]), tmp_path / "w")
    assert r.exit_code == EXIT_OK and r.entries[0].verdict.startswith("ok; warning: +")


def test_a_wrong_fallback_fails_the_table(tmp_path):
    """A launch whose problem refuses the winner runs a fallback: it is checked like the winner."""
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "good", fallbacks=("slow", "unwritten")),
                     tmp_path / "w")
    assert [e.bucket for e in r.entries] == ["small", "small (fallback)", "small (fallback)"]
    assert r.exit_code == EXIT_FAIL and [e.failed for e in r.entries] == [False, False, True]
    assert r.entries[1].heuristic_us is None and r.entries[0].heuristic_is_tuned
    assert r.entries[0].heuristic_us == r.entries[0].now_us, "one timing serves the item and its heuristic"


def test_only_the_named_buckets_and_a_missing_one_is_named(tmp_path):
    path = table(tmp_path, "garbage")
    assert verify_table("tests.tuning.fake_kernel:PLUGIN", path, tmp_path / "w", buckets=("small",)).entries
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", path, tmp_path / "w", buckets=("small", "large"))
    assert r.exit_code == EXIT_BAD_INPUT and "no entry for bucket large" in r.notes[0]


def test_an_interrupted_run_keeps_its_verdicts_and_claims_nothing_it_did_not_check(tmp_path):
    """Ctrl-C (or a CI job's SIGTERM, which the CLI maps to it) after the first item: its verdict stays, the
    two fallbacks are "not checked" (the second would have failed), and the run's code is 130 whatever else."""
    def interrupt(report):
        raise KeyboardInterrupt

    r = verify_table("tests.tuning.fake_kernel:PLUGIN", table(tmp_path, "good", fallbacks=("slow", "unwritten")),
                     tmp_path / "w", on_entry=interrupt)
    assert r.exit_code == EXIT_INTERRUPTED and r.interrupted
    assert [(e.bucket, e.checked, e.failed) for e in r.entries] == [
        ("small", True, False), ("small (fallback)", False, False), ("small (fallback)", False, False)]
    assert r.entries[0].verdict.startswith("ok") and r.entries[2].verdict == NOT_CHECKED_INTERRUPTED
    assert r.entries[2].config == {"mode": "unwritten", "work": 1}
    assert r.notes == ["interrupted after 1 of 3 items"] and r.timing_absent is None
    assert [p.bucket for p in r.phases] == ["small"], "the measurement made before the interrupt is kept"
    assert worst_exit_code([EXIT_OK, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_BAD_INPUT]) == EXIT_INTERRUPTED


def test_each_items_configs_and_the_nexts_compile_before_they_are_timed(tmp_path):
    """As a sweep's worker does: an item's rivals and the next item's configs compile on the worker's threads
    while this one is timed (verify timed up to four configs per item, each compiled only when it was due)."""
    import concurrent.futures as cf

    from kerneltune.tuning.journal import config_key

    events = []

    class Recorder:
        parallel_measures, compiles_ahead, queues_ahead = 1, 1, 1

        def stamps(self):
            return {"backend": "host", "matched": ["kernel_hash"], "device_kind": "cpu"}

        def prefetch(self, req, route):
            events.append(("compile", req.bucket, config_key(req.config)))

        def measure(self, req, route=0):
            events.append(("time", req.bucket, config_key(req.config)))
            done = cf.Future()
            done.set_result(MeasureReply(Status.OK, timing={"median_us": 1000.0, "spread": 0.01}))
            return done

        def request(self, req):
            events.append(("rounds", req.bucket, len(req.rivals)))
            return REPLIES[req.op].from_json({"status": "ok", "times": [[1000.0] * 10] * len(req.rivals)})

        def close(self):
            pass

    path = table(tmp_path, "good", fallbacks=("slow",), runner_ups=[("good", 2)])
    r = verify_table("tests.tuning.fake_kernel:PLUGIN", path, tmp_path / "w", runner_factory=lambda *a: Recorder())
    assert r.exit_code == EXIT_OK, [e.verdict for e in r.entries]
    timed = [e for e in events if e[0] == "time"]
    assert [e[2] for e in timed] == [config_key({"mode": "good", "work": w}) for w in (1, 2)] + [
        config_key({"mode": "slow", "work": 1})]
    for n, (_, bucket, key) in enumerate(timed):
        assert events.index(("compile", bucket, key)) < events.index(timed[n])
    # The fallback (the second item) was handed over to compile before the entry was timed.
    assert events.index(("compile", "small (fallback)", timed[2][2])) < events.index(timed[0])


@pytest.mark.parametrize("kernel", ["PLUGIN", "DIGESTING"])
def test_an_entry_of_another_kernel_source_fails_as_stale_naming_the_re_measure(tmp_path, kernel):
    """Measured and correct, but tuned for another kernel hash: a failure, and the verdict says how to re-measure,
    and first, for a kernel that digests its programs, how to carry the entry if they did not change."""
    from kerneltune.tables.store import update_table

    path = table(tmp_path, "good")
    update_table(path, "fake", "cpu", lambda t: next(iter(t["entries"].values()))["stamps"].update(kernel_hash="0ld"))
    r = verify_table(f"tests.tuning.fake_kernel:{kernel}", path, tmp_path / "w")
    assert r.exit_code == EXIT_FAIL and r.entries[0].correctness == "ok"
    verdict = r.entries[0].verdict
    assert verdict.startswith("stale: tuned for another kernel source") and "--contenders" in verdict
    # Both commands name the kernel as verify was given it (an import path here), so they run as printed.
    assert f"`kerneltune sweep tests.tuning.fake_kernel:{kernel} --contenders {path}`" in verdict
    assert (f"`kerneltune rekey tests.tuning.fake_kernel:{kernel}` carries it if its programs did not change"
            in verdict) == (kernel == "DIGESTING")


def test_exit_2_without_the_hardware(tmp_path):
    r = verify_table("tests.tuning.fake_kernel:NEEDS_GPU", table(tmp_path, "good"), tmp_path / "w")
    assert r.exit_code == EXIT_CANNOT_RUN and FAKE_GPU in r.notes[0]


@pytest.mark.slow
def test_shipped_ranker_table_is_correct_in_interpret_mode(tmp_path):
    """One entry per head dim: the D=128 tanh entry with its three fallbacks (each cap_impl, with and
    without static_max), the D=64 no-cap one alone; `.ci/run` checks every entry of every shipped table
    (`kerneltune verify --junit`) after the suite."""
    r = verify_table("ranker_attention", shipped_tables_dir() / "nvidia-h200/ranker_attention.json", tmp_path,
                     buckets=("d128-tanh-long", "d64-none-many-rows"))
    assert r.exit_code == EXIT_CANNOT_RUN and "timing not checked" in r.notes[0]
    assert len(r.entries) == 5 and not any(e.failed for e in r.entries)


def test_an_entry_its_rivals_and_its_fallbacks_run_on_one_seeds_inputs(tmp_path):
    """So a kernel's check may keep what it computed for those inputs (the ranker's float32 references,
    about 50 s of a long bucket's item on the H200, run Q) instead of computing it for every item."""
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.registry import load_kernel
    from kerneltune.tuning.verify import _Measurements, _timed_configs, _verify_entry

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = Entry.build({"bucket_name": "small", "problem": {"n": 2}, "config": {"mode": "slow", "work": 1},
                         "median_us": 10.0, "spread": 0.01, "stamps": {"kernel_hash": "fakehash"},
                         "runner_ups": [{"config": {"mode": "good", "work": 2}, "median_us": 12.0}]})
    want = {"matched": ["kernel_hash"], "kernel_hash": "fakehash"}
    runner = _Scripted({w: {"status": "ok", "timing": {"median_us": 10.0, "spread": 0.01}} for w in (1, 2)})
    measured = _Measurements("fake", runner, MeasureSettings())
    for i, checked in enumerate([entry, entry.replace(config={"mode": "good", "work": 2})]):
        _verify_entry(kernel, measured, checked, want, True, MeasureSettings(), i == 0,
                      _timed_configs(kernel, i == 0, checked))
    seeds = [r.seed for r in runner.requests]
    assert [r.op for r in runner.requests].count("measure") == 3 and len(set(seeds)) == 1  # winner, heuristic,
    # runner-up, and their interleaved rounds
    # The fallback's config is the runner-up's: measured once on the bucket's one seed of inputs, its reply
    # serves both, and every measurement's phases are kept with its wall.
    assert [dict(r.config) for r in runner.requests if r.op == "measure"].count({"mode": "good", "work": 2}) == 1
    assert len(measured.phases) == 3 and all("wall_s" in p.seconds for p in measured.phases)


class _Scripted:
    """A runner whose replies are given per config ("work" picks it; ``default`` for any other, else a config
    not scripted is an error): verify's verdicts, at their bounds, without a worker's timing noise. It records
    what it was asked to measure, check small and prefetch, interrupts at the ``interrupt_at``-th measurement,
    says whether it was closed, and stamps the CPU or, with ``gpu``, that GPU. A playoff's rounds time each config
    at its reply's ``rounds`` (else its median, every round); with ``playoff_error`` the playoff fails."""

    def __init__(self, replies, default=None, interrupt_at=None, gpu=None, playoff_error=None):
        self.replies, self.default, self.interrupt_at, self.gpu = replies, default, interrupt_at, gpu
        self.playoff_error = playoff_error
        self.requests, self.prefetched, self.closed = [], [], False

    def _reply(self, req):
        work = req.config["work"]
        reply = self.replies[work] if self.default is None else self.replies.get(work, self.default)
        return REPLIES[req.op].from_json({k: v for k, v in reply.items() if k != "rounds"})

    def stamps(self):
        where = {"device_kind": "cpu"} if self.gpu is None else {"device_kind": "fakegpu-9000", "gpu": self.gpu}
        return {**where, "kernel_hash": "fakehash", "matched": ["kernel_hash"]}

    def prefetch(self, req, route):
        self.prefetched.append(req)

    def measure(self, req, route=0):
        import concurrent.futures as cf

        if self.interrupt_at is not None and len(self.requests) == self.interrupt_at:
            raise KeyboardInterrupt
        self.requests.append(req)
        done = cf.Future()
        done.set_result(self._reply(req))
        return done

    def request(self, req):
        assert req.op in ("check_small", "playoff")
        self.requests.append(req)
        if req.op == "playoff":  # each config's round times: its reply's ``rounds``, else its median every round
            if self.playoff_error:
                return REPLIES[req.op].from_json({"status": "runtime", "error": self.playoff_error})
            times = []
            for tiles in req.rivals:
                reply = self.replies[tiles["work"]] if self.default is None else self.replies.get(tiles["work"],
                                                                                                  self.default)
                times.append(reply.get("rounds") or [reply["timing"]["median_us"]] * 10)
            return REPLIES[req.op].from_json({"status": "ok", "rounds": 10, "batch": req.settings.batch,
                                              "times": times})
        return self._reply(req)

    def close(self):
        self.closed = True


def _host_stamps():
    """The stamps this machine's host backend matches on: an entry the runtime here uses carries them (verify
    fails an entry of another system as stale)."""
    from kerneltune.seams.registry import load_backend

    running = load_backend("host").stamps()
    return {k: running.get(k) for k in running["matched"] if k != "kernel_hash"}


def _entry(name="small", n=2, **over):
    e = {"bucket": {"n": n}, "bucket_name": name, "problem": {"n": n}, "config": {"mode": "good", "work": 1},
         "median_us": 100.0, "spread": 0.01, "inputs": {"spec": "ragged"},
         "stamps": {**_host_stamps(), "kernel_hash": "fakehash"}}
    e.update(over)
    return Entry.build(e)


def _judge(replies, recorded_us=100.0, on_gpu=True, entry=None, timed=None, playoff_error=None):
    """``_check_and_time`` of ``entry`` (by default the small bucket's, work 1) on scripted replies; ``timed``: the
    item and its rivals (by default the item, then each other reply's config as a runner-up)."""
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.registry import load_kernel
    from kerneltune.tuning.verify import HEURISTIC, _check_and_time, _Measurements

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = entry or _entry(median_us=recorded_us)
    timed = timed or [("the item", entry["config"])] + [(f"runner-up {w - 1}", {"mode": "good", "work": w})
                                                         for w in replies if w != entry["config"]["work"]]
    settings = MeasureSettings(rel_noise=0.01)
    return _check_and_time(kernel, _Measurements("fake", _Scripted(replies, playoff_error=playoff_error), settings),
                           entry, on_gpu, settings, any(name == HEURISTIC for name, _ in timed), timed)


def _ok(us, spread=0.01):
    return {"status": "ok", "timing": {"median_us": us, "spread": spread}}


@pytest.mark.parametrize(("winner_us", "failed"), [(101.5, False), (102.5, True)])
def test_a_winner_fails_when_a_rivals_paired_interval_lies_past_twice_the_noise(winner_us, failed):
    """--rel-noise 1%: the winner may run 2% slower than a rival round by round; beyond, it is slower, and the
    verdict names the rival, its config and the interval over the interleaved rounds."""
    rep = _judge({1: _ok(winner_us), 2: _ok(100.0), 3: _ok(130.0)}, recorded_us=winner_us)
    assert rep.failed is failed, rep.verdict
    assert rep.rivals_us == {"runner-up 1": 100.0, "runner-up 2": 130.0} and rep.rounds == 10
    assert rep.paired["runner-up 1"] == pytest.approx((winner_us / 100.0,) * 3)
    if failed:
        assert rep.verdict == ("slower than runner-up 1 (mode=good work=2) timed beside it: +2.5% over 10 "
                               "interleaved rounds, 95% interval +2.5% to +2.5% (beyond the 2.0% that twice the "
                               "noise allows)")
    else:
        assert rep.verdict.startswith("ok; a tie: runner-up 1 (mode=good work=2) ran faster within the bound: +1.5%")


def test_a_rival_1_2x_faster_is_named_even_where_the_winner_beats_the_heuristic():
    """The planted table: the winner 1.2x a rival's time round by round (each round's times jittered by a load
    that hits both alike), yet faster than the heuristic; "slower" names the rival, not the heuristic."""
    import numpy as np

    load = 1 + np.abs(np.random.default_rng(5).standard_normal(10))  # 1x-3x, shared by the round's turns
    entry = _entry(config={"mode": "good", "work": 2}, rivals=[{"config": {"mode": "good", "work": 3},
                                                               "median_us": 100.0, "margin": 0.2}])
    replies = {2: {**_ok(120.0), "rounds": list(120.0 * load)}, 3: {**_ok(100.0), "rounds": list(100.0 * load)},
               1: {**_ok(150.0), "rounds": list(150.0 * load)}}
    from kerneltune.seams.registry import load_kernel
    from kerneltune.tuning.verify import _timed_configs

    timed = _timed_configs(load_kernel(FAKE), True, entry)
    assert [n for n, _ in timed] == ["the item", "the heuristic", "rival 1"]
    rep = _judge(replies, entry=entry, timed=timed)
    assert rep.failed and rep.verdict.startswith("slower than rival 1 (mode=good work=3) timed beside it: +20.0% "
                                                 "over 10 interleaved rounds")
    assert rep.paired["the heuristic"][2] < 1  # the winner beat the heuristic every round


def test_a_rival_whose_interval_straddles_the_bound_is_timed_on_then_unsettled():
    """Round ratios that never decide (half the rounds 10% slower, half 5% faster): 40 rounds, then unsettled."""
    rounds = [110.0, 95.0] * 5
    rep = _judge({1: {**_ok(100.0), "rounds": rounds}, 2: _ok(100.0)})
    assert rep.unsettled and not rep.failed and rep.rounds == 40
    assert rep.verdict.startswith("unsettled: against runner-up 1 (mode=good work=2) it ran ")


def test_where_the_rounds_cannot_be_timed_separate_medians_judge_and_say_so():
    rep = _judge({1: _ok(104.0), 2: _ok(100.0, spread=0.025)}, recorded_us=104.0, playoff_error="lost the device")
    assert not rep.failed and rep.rounds == 0
    assert rep.verdict.endswith("; not timed in interleaved rounds (lost the device): judged on separate medians")
    assert _judge({1: _ok(106.0), 2: _ok(100.0, spread=0.025)}, recorded_us=106.0, playoff_error="x").failed


@pytest.mark.parametrize(("now_us", "warned"), [(80.0, "-20.0%"), (120.0, "+20.0%"), (95.0, None)])
def test_drift_either_way_past_the_spread_is_a_warning(now_us, warned):
    rep = _judge({1: _ok(now_us)})
    assert not rep.failed
    if warned:
        assert rep.verdict.startswith(f"ok; warning: {warned} against the recorded time")
    else:
        assert not rep.verdict.startswith("ok; warning")


def test_a_wrong_output_fails_on_the_cpu_and_on_the_gpu():
    wrong = {"status": "correctness", "error": "out: 3 elements beyond atol"}
    for on_gpu in (False, True):
        rep = _judge({1: wrong}, on_gpu=on_gpu)
        assert rep.failed and rep.verdict == "correctness: out: 3 elements beyond atol"
        assert rep.correctness == "correctness"
    assert _judge({1: {"status": "ok"}}, on_gpu=False).correctness == "ok (interpret mode, small shape)"


def test_without_a_table_verify_checks_the_tables_the_runtime_reads_for_the_workers_device(tmp_path, monkeypatch):
    from kerneltune.tuning import verify

    user, shipped = tmp_path / "user", tmp_path / "shipped"
    for root, kind in ((user, "nvidia-h200"), (shipped, "nvidia-h200"), (shipped, "nvidia-h100")):
        (root / kind).mkdir(parents=True)
        (root / kind / "k.json").write_text("{}")
    monkeypatch.setattr(verify, "table_roots", lambda: (user, shipped))
    monkeypatch.setattr(verify, "shipped_tables_dir", lambda: shipped)
    assert verify.runtime_tables("k", "nvidia-h200", True) == [user / "nvidia-h200/k.json",
                                                               shipped / "nvidia-h200/k.json"]
    # Without the kernel's GPU: every shipped table, checked as far as this machine can.
    assert verify.runtime_tables("k", "cpu", False) == [shipped / "nvidia-h100/k.json",
                                                        shipped / "nvidia-h200/k.json"]
    # With the GPU but no table for it: bad input, naming where the runtime looked.
    with pytest.raises(verify.VerifyRefused, match=r"no tuned table for k on nvidia-b200 at .*user") as e:
        verify.runtime_tables("k", "nvidia-b200", True)
    assert e.value.exit_code == verify.EXIT_BAD_INPUT


def test_a_config_the_kernel_refuses_fails_unrun():
    entry = _entry(config={"mode": "good", "work": 3})  # work 3 > n 2
    rep = _judge({}, entry=entry)
    assert (rep.failed, rep.verdict, rep.correctness) == (True, "config refused by the kernel: work exceeds n",
                                                          "not run")
    assert rep.config == entry["config"] and rep.bucket == "small"


def test_the_heuristic_s_time_is_reported_beside_the_winner_s():
    from kerneltune.tuning.verify import HEURISTIC

    entry = _entry(config={"mode": "good", "work": 2})
    rep = _judge({2: _ok(100.0), 1: _ok(130.0)}, entry=entry,
                 timed=[("the item", entry["config"]), (HEURISTIC, {"mode": "good", "work": 1})])
    assert (rep.heuristic_us, rep.heuristic_is_tuned, rep.failed) == (130.0, False, False)


@pytest.mark.parametrize(("winner_us", "failed"), [(150.0, False), (150.1, True)])
def test_on_separate_medians_the_winner_may_be_exactly_twice_the_noise_slower(winner_us, failed):
    """Noise 25% (the rival's spread): 50% slower still passes, a hair more fails, and the verdict says so."""
    rep = _judge({1: _ok(winner_us), 2: _ok(100.0, spread=0.25)}, recorded_us=winner_us, playoff_error="x")
    assert rep.failed is failed
    if failed:
        assert rep.verdict == ("slower than runner-up 1 (mode=good work=2) timed beside it: 150.1 against 100.0 µs "
                               "(noise 25.0%); not timed in interleaved rounds (x): judged on separate medians")


@pytest.mark.parametrize(("spread", "now_us", "warned"), [(0.25, 150.0, False), (0.25, 150.5, True),
                                                          (None, 108.5, True), (None, 107.5, False)])
def test_drift_is_judged_against_the_entry_s_own_spread(spread, now_us, warned):
    """Twice the largest of the entry's recorded spread, this run's noise and 4%: at exactly twice, no warning.
    An entry without a spread is judged on the other two."""
    entry = _entry(spread=spread)
    rep = _judge({1: _ok(now_us)}, entry=entry)
    assert rep.verdict.startswith("ok; warning") is warned, rep.verdict
    if warned:
        noise = 25.0 if spread else 4.0
        assert rep.verdict == (f"ok; warning: {100 * (now_us / 100.0 - 1):+.1f}% against the recorded time (beyond "
                               f"twice the {noise:.1f}% spread across devices and runs)")


def test_drift_is_judged_against_this_run_s_noise_when_it_is_the_widest():
    """A rival's 25% spread: 40% over the recorded time is within twice it."""
    rep = _judge({1: _ok(140.0), 2: _ok(100.0, spread=0.25)}, playoff_error="x")
    assert (rep.failed, rep.unsettled) == (False, False)
    assert rep.verdict == ("ok; a tie: runner-up 1 (mode=good work=2) timed 100.0 µs beside its 140.0 µs, within "
                           "twice the 25.0% noise; not timed in interleaved rounds (x): judged on separate medians")


def test_on_separate_medians_a_close_rival_with_a_timing_that_did_not_settle_is_unsettled_not_ok():
    """A rival 2.4x faster under a 160% spread: not "slower" (within twice the noise), and not "ok" either."""
    unsettled = {**_ok(100.0, spread=1.6), "timing": {**_ok(100.0, spread=1.6)["timing"], "converged": False}}
    rep = _judge({1: _ok(240.0), 2: unsettled}, playoff_error="x")
    assert (rep.failed, rep.unsettled) == (False, True)
    assert rep.verdict.startswith("unsettled: runner-up 1 (mode=good work=2) timed 100.0 µs beside its 240.0 µs, "
                                  "and the timings did not settle (noise 160.0%)")
    settled_but_slower = _judge({1: {**_ok(100.0), "timing": {**_ok(100.0)["timing"], "converged": False}},
                                 2: _ok(300.0)}, playoff_error="x")
    assert (settled_but_slower.unsettled, settled_but_slower.failed) == (False, False)  # clearly faster anyway


def test_a_failed_reply_s_error_is_cut_and_one_without_an_error_still_names_its_status():
    long = {"status": "runtime", "error": "x" * 1000}
    assert _judge({1: long}).verdict == "runtime: " + "x" * 300
    assert _judge({1: long}, on_gpu=False).verdict == "runtime: " + "x" * 200
    rep = _judge({1: {"status": "timeout"}})
    assert (rep.failed, rep.correctness, rep.verdict) == (True, "timeout", "timeout: ")


def test_each_request_carries_the_entry_s_bucket_problem_and_inputs_on_verify_s_seed():
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.tuning.verify import VERIFY_SEED, _measure_request

    req = _measure_request("fake", _entry(), {"mode": "good", "work": 1}, MeasureSettings())
    assert (req.bucket, dict(req.problem), dict(req.inputs), req.seed) == ("small", {"n": 2}, {"spec": "ragged"},
                                                                          VERIFY_SEED)
    bare = _measure_request("fake", Entry(), {"mode": "good", "work": 1}, MeasureSettings())
    assert (bare.bucket, dict(bare.problem), dict(bare.inputs)) == ("?", {}, {})


def test_fallbacks_are_named_after_their_entry_and_an_entry_may_have_none():
    from kerneltune.tuning.verify import _items, _timed_configs

    named = _entry(fallbacks=[{"config": {"mode": "good", "work": 2}, "median_us": 90.0}])
    unnamed = named.replace(bucket_name=None)
    items = list(_items([named, unnamed, _entry()]))
    assert [(h, i.get("bucket_name")) for h, i in items] == [
        (True, "small"), (False, "small (fallback)"), (True, None), (False, "? (fallback)"), (True, "small")]
    from kerneltune.seams.registry import load_kernel

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    assert _timed_configs(kernel, True, _entry(config={"mode": "good", "work": 2})) == [
        ("the item", {"mode": "good", "work": 2}), ("the heuristic", {"mode": "good", "work": 1})]


def test_each_measurement_keeps_its_bucket_the_worker_s_phases_and_its_wall():
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.tuning.verify import _Measurements

    reply = {**_ok(100.0), "phases": {"check_s": 0.5}}
    measured = _Measurements("fake", _Scripted({1: reply}), MeasureSettings())
    measured(_entry(), {"mode": "good", "work": 1})
    [p] = measured.phases
    assert p.bucket == "small" and p.seconds["check_s"] == 0.5
    assert 0 <= p.seconds["wall_s"] <= p.seconds["since_start_s"] < 60


def test_an_unstamped_entry_is_verified_and_its_missing_stamps_named(tmp_path):
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.registry import load_kernel
    from kerneltune.tuning.verify import _Measurements, _verify_entry

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = Entry.build({k: v for k, v in _entry().items() if k != "stamps"})
    settings = MeasureSettings(rel_noise=0.01)
    rep = _verify_entry(kernel, _Measurements("fake", _Scripted({1: _ok(100.0)}), settings), entry,
                        {"kernel_hash": "fakehash", "matched": ["kernel_hash"]}, True, settings, False,
                        [("the item", entry["config"])])
    assert rep.stamps == ["kernel_hash: table None, running 'fakehash'"]
    assert rep.failed and rep.verdict.startswith("stale: tuned for another kernel source (`kerneltune sweep fake "
                                                 "--contenders TABLE` re-measures the table's configs, then "
                                                 "`kerneltune install` the sweep's table)")


def test_without_any_table_the_refusal_names_every_place_it_looked(tmp_path, monkeypatch):
    from kerneltune.tuning import verify

    monkeypatch.setattr(verify, "table_roots", lambda: [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(verify.VerifyRefused) as e:
        verify.runtime_tables("fake", "cpu", True)
    a, b = (verify.stored_table_path(tmp_path / r, "cpu", "fake") for r in "ab")
    assert str(e.value) == f"no tuned table for fake on cpu at {a} or {b}"


# verify's refusals and the tables it finds, on a scripted runner.
FAKE = "tests.tuning.fake_kernel:PLUGIN"


def _run(path, tmp_path, runner=None, **kw):
    runner = runner or _Scripted({}, default=_ok(100.0))
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
    assert not runner.requests and not runner.closed, "refused before any worker starts"


def test_a_table_of_another_kernel_is_named_with_both_kernels(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry(), kernel="other")
    r, _ = _run(path, tmp_path)
    assert (r.table, r.entries, r.exit_code, r.notes) == (
        path, [], EXIT_BAD_INPUT, [f"{path}: a table of kernel 'other', not of 'fake'"])


def test_an_entry_without_its_problem_or_with_one_the_kernel_refuses_names_the_entry(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry(problem=None))
    r, _ = _run(path, tmp_path)
    assert (r.table, r.entries, r.exit_code, r.notes) == (path, [], EXIT_BAD_INPUT, [
        f"{path}: entry small: no 'problem' (the shape it was measured at), so verify cannot re-measure it"])
    unnamed = {k: v for k, v in _entry(problem=None).items() if k != "bucket_name"}
    path = _table_of(tmp_path / "v.json", unnamed)
    assert _run(path, tmp_path)[0].notes == [
        f"{path}: entry ?: no 'problem' (the shape it was measured at), so verify cannot re-measure it"]
    path = _table_of(tmp_path / "u.json", _entry(), _entry("big", 3, problem={"n": 3, "m": 1}))
    r, _ = _run(path, tmp_path)
    assert (r.exit_code, r.notes) == (EXIT_BAD_INPUT, [
        f"{path}: entry big: problem {{'m': 1, 'n': 3}} is not one of fake's (FakeProblem.__init__() got an "
        f"unexpected keyword argument 'm')"])


def test_only_the_named_buckets_are_checked_and_the_refusal_lists_what_the_table_has(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry(), _entry("big", 3))
    r, runner = _run(path, tmp_path, buckets=("big",))
    assert r.exit_code == EXIT_OK and [e.bucket for e in r.entries] == ["big"]
    assert {req.bucket for req in runner.requests} == {"big"} and runner.closed
    r, _ = _run(path, tmp_path, buckets=("big", "huge", "absent"))
    assert (r.table, r.entries, r.exit_code, r.notes) == (
        path, [], EXIT_BAD_INPUT, [f"{path}: no entry for bucket absent, huge (have ['big', 'small'])"])


def test_an_entry_that_breaks_the_schema_fails_the_table_first_and_the_rest_are_checked(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry())
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
    path = _table_of(tmp_path / "t.json", _entry(config={"mode": "slow", "work": 2}, runner_ups=[
        {"config": {"mode": "good", "work": 2}, "median_us": 100.0, "spread": 0.01}], n=3, bucket={"n": 3},
        problem={"n": 3}))
    class StampsLast(_Scripted):  # every config is handed to the compile pool before the worker's stamps
        def stamps(self):
            assert len(self.prefetched) == 3, "stamps asked before every config was handed over to compile"
            return super().stamps()

    runner = StampsLast({}, default=_ok(100.0))
    r = verify.verify_table(FAKE, path, tmp_path / "w", runner=runner)
    assert r.exit_code == EXIT_OK
    assert [dict(q.config) for q in runner.prefetched] == [{"mode": "slow", "work": 2}, {"mode": "good", "work": 1},
                                                          {"mode": "good", "work": 2}]
    assert [dict(q.config) for q in runner.requests if q.op == "measure"] == [dict(q.config) for q in runner.prefetched]
    assert not runner.closed, "a runner handed in belongs to the caller"


def test_without_the_hardware_and_without_a_small_check_verify_cannot_run(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry())
    r = verify.verify_table("tests.tuning.fake_kernel:NEEDS_GPU", path, tmp_path / "w",
                            runner_factory=lambda *a: _Scripted({}, default=_ok(100.0)))
    assert (r.table, r.exit_code, r.entries, r.notes) == (path, EXIT_CANNOT_RUN, [], [
        f"verifying fake needs {NEED}"])


def test_the_tables_ceilings_are_handed_to_the_worker_from_the_first_entry_that_has_them(tmp_path):
    logs = tmp_path / "logs"
    table = {"entries": {"a": {"stamps": {"gpu": "x"}}, "b": {"stamps": {"bf16_tflops_ceiling": 700.0, "gpu": "y"}},
                         "c": {"stamps": {"bf16_tflops_ceiling": 1.0}}}}
    table["entries"] = {k: Entry.build(e) for k, e in table["entries"].items()}
    assert verify._seed_ceilings(table, logs) is True
    assert json.loads((logs / "ceilings.json").read_text()) == {"bf16_tflops_ceiling": 700.0, "gpu": "y"}
    assert verify._seed_ceilings(table, logs) is True, "the logs folder of an earlier run is reused"
    assert verify._seed_ceilings({"entries": {"a": Entry()}}, tmp_path / "none") is False
    assert not (tmp_path / "none").exists()


def test_a_named_table_is_verified_alone_without_looking_for_others(tmp_path, monkeypatch):
    """With the caller's buckets and its callback for each verdict."""
    monkeypatch.setattr(verify, "_tables_of", lambda name: pytest.fail("looked for tables"))
    path = _table_of(tmp_path / "t.json", _entry(), _entry("big", 3))
    runner, seen = _Scripted({}, default=_ok(100.0)), []
    run = verify.verify_tables(FAKE, path, tmp_path / "w", buckets=("big",), on_entry=seen.append,
                               runner_factory=lambda *a: runner)
    assert run.tables == [path] and [r.exit_code for r in run.reports] == [EXIT_OK] and runner.closed
    assert [e.bucket for e in run.reports[0].entries] == ["big"] and seen == run.reports[0].entries


def _roots(tmp_path, monkeypatch, *kinds):
    """A user and a shipped root, a fake table in each for ``kinds``: the runtime's places."""
    user, shipped = tmp_path / "user", tmp_path / "shipped"
    monkeypatch.setattr(verify, "table_roots", lambda: (user, shipped))
    monkeypatch.setattr(verify, "shipped_tables_dir", lambda: shipped)
    paths = []
    for root in (user, shipped):
        for kind in kinds:
            (root / kind).mkdir(parents=True)
            paths.append(_table_of(root / kind / "fake.json", _entry(stamps={"kernel_hash": "fakehash",
                                                                          "bf16_tflops_ceiling": float(len(paths))})))
    return paths


def test_without_a_table_each_runtime_table_of_the_workers_device_is_verified_on_one_runner(tmp_path, monkeypatch):
    user_cpu, _, shipped_cpu, _ = _roots(tmp_path, monkeypatch, "cpu", "nvidia-b200")
    runner, seen, started = _Scripted({}, default=_ok(100.0)), [], []
    run = verify.verify_tables(FAKE, None, tmp_path / "w", on_entry=seen.append,
                               runner_factory=lambda *a: (started.append(a), runner)[1])
    assert run.tables == [user_cpu, shipped_cpu] and [r.table for r in run.reports] == run.tables
    assert [r.exit_code for r in run.reports] == [EXIT_OK, EXIT_OK] and runner.closed
    assert seen == [e for r in run.reports for e in r.entries] and len(seen) == 2
    [(name, kernel, work)] = started
    assert (name, kernel.name, work) == (FAKE, "fake", tmp_path / "w")
    # The first readable table's ceilings (any device kind, in path order) are seeded before the worker starts.
    assert json.loads((tmp_path / "w/logs/ceilings.json").read_text())["bf16_tflops_ceiling"] == 2.0
    run = verify.verify_tables(FAKE, None, tmp_path / "w", buckets=("absent",), runner_factory=lambda *a: runner)
    assert [r.exit_code for r in run.reports] == [EXIT_BAD_INPUT, EXIT_BAD_INPUT], "the buckets reach every table"


def test_an_unreadable_table_is_passed_over_for_the_ceilings(tmp_path, monkeypatch):
    _, shipped_cpu = _roots(tmp_path, monkeypatch, "cpu")
    shipped_cpu.write_text("{")  # the first in the search's order
    run = verify.verify_tables(FAKE, None, tmp_path / "w", runner_factory=lambda *a: _Scripted({}, default=_ok(100.0)))
    assert json.loads((tmp_path / "w/logs/ceilings.json").read_text())["bf16_tflops_ceiling"] == 0.0
    assert [r.exit_code for r in run.reports] == [EXIT_OK, EXIT_BAD_INPUT]


def test_an_interrupt_stops_before_the_next_table(tmp_path, monkeypatch):
    _roots(tmp_path, monkeypatch, "cpu")
    runner = _Scripted({}, default=_ok(100.0), interrupt_at=0)
    run = verify.verify_tables(FAKE, None, tmp_path / "w", runner_factory=lambda *a: runner)
    assert len(run.tables) == 2 and [r.exit_code for r in run.reports] == [EXIT_INTERRUPTED] and runner.closed


def test_a_kernel_this_machine_cannot_run_nor_check_small_is_refused_naming_the_cpu_checks(tmp_path, monkeypatch):
    _roots(tmp_path, monkeypatch, "cpu")
    runner = _Scripted({}, default=_ok(100.0))
    with pytest.raises(verify.VerifyRefused) as e:
        verify.verify_tables("tests.tuning.fake_kernel:NEEDS_GPU", None, tmp_path / "w",
                             runner_factory=lambda *a: runner)
    assert e.value.exit_code == EXIT_CANNOT_RUN and runner.closed
    assert str(e.value) == f"verify fake: needs {NEED}; this machine cannot run it"
    with pytest.raises(verify.VerifyRefused) as e:
        verify.verify_tables("tests.tuning.fake_kernel:EMULATED", None, tmp_path / "w",
                             runner_factory=lambda *a: runner)
    assert str(e.value) == (f"verify fake: needs {NEED}; this machine cannot run it "
                            "(`--emulate` or `--interpret` checks the launch on the CPU)")


ON_ITS_GPU = "tests.tuning.fake_kernel:ON_ITS_GPU"


def test_where_the_worker_has_the_kernel_s_gpu_entries_are_timed_and_elsewhere_checked_small(tmp_path):
    """The kernel judges the worker's stamps: on its GPU every entry is checked and timed; on another machine
    each is checked small on the CPU and the report says what was not checked and why (exit 2)."""
    path = _table_of(tmp_path / "t.json", _entry())
    there = _Scripted({}, default=_ok(100.0), gpu=FAKE_GPU)
    r = verify.verify_table(ON_ITS_GPU, path, tmp_path / "w", runner=there)
    assert (r.table, r.exit_code, r.notes, r.timing_absent) == (path, EXIT_OK, [], None)
    assert [(e.correctness, e.now_us) for e in r.entries] == [("ok", 100.0)]
    assert [p.bucket for p in r.phases] == ["small"]
    here = _Scripted({}, default={"status": "ok"})
    r = verify.verify_table(ON_ITS_GPU, path, tmp_path / "w", runner=here)
    assert (r.table, r.exit_code, r.timing_absent, r.phases) == (path, EXIT_CANNOT_RUN, f"needs {NEED}", [])
    assert r.notes == [f"timing not checked: it needs {NEED}; correctness checked on the CPU at small shapes "
                       f"(interpret mode)"]
    assert [(e.correctness, e.now_us, e.failed) for e in r.entries] == [("ok (interpret mode, small shape)", None,
                                                                         False)]
    assert [(q.op, q.kernel) for q in here.requests] == [("check_small", ON_ITS_GPU)]


def test_an_interrupted_small_check_keeps_its_verdicts_and_names_unnamed_entries(tmp_path):
    def interrupt(report):
        raise KeyboardInterrupt

    unnamed = [{k: v for k, v in _entry(n=n, bucket={"n": n}, problem={"n": n}).items() if k != "bucket_name"}
               for n in (2, 3)]
    path = _table_of(tmp_path / "t.json", *unnamed)
    r = verify.verify_table(ON_ITS_GPU, path, tmp_path / "w", runner=_Scripted({}, default={"status": "ok"}),
                            on_entry=interrupt)
    assert (r.table, r.exit_code, r.timing_absent, r.phases) == (path, EXIT_INTERRUPTED, f"needs {NEED}", [])
    assert r.notes == [f"timing not checked: it needs {NEED}; correctness checked on the CPU at small shapes "
                       f"(interpret mode)", "interrupted after 1 of 2 items"]
    assert [(e.bucket, e.checked, e.verdict) for e in r.entries] == [("?", True, "ok"),
                                                                     ("?", False, NOT_CHECKED_INTERRUPTED)]


def test_on_its_gpu_without_a_table_for_it_verify_refuses_rather_than_check_another_gpu_s(tmp_path, monkeypatch):
    """Only where the kernel's GPU is absent are the shipped tables of every device kind checked (small)."""
    user_cpu, shipped_cpu = _roots(tmp_path, monkeypatch, "cpu")
    runner = _Scripted({}, default=_ok(100.0), gpu=FAKE_GPU)
    with pytest.raises(verify.VerifyRefused) as e:
        verify.verify_tables(ON_ITS_GPU, None, tmp_path / "w", runner_factory=lambda *a: runner)
    assert e.value.exit_code == EXIT_BAD_INPUT and str(e.value).startswith("no tuned table for fake on fakegpu-9000")
    run = verify.verify_tables(ON_ITS_GPU, None, tmp_path / "w",
                               runner_factory=lambda *a: _Scripted({}, default={"status": "ok"}))
    assert run.tables == [user_cpu, shipped_cpu]
    assert [r.exit_code for r in run.reports] == [EXIT_CANNOT_RUN, EXIT_CANNOT_RUN]


@pytest.mark.parametrize("work", ["a-file", "nul\x00"])
def test_ceilings_that_cannot_be_written_do_not_stop_verify(tmp_path, monkeypatch, work):
    """A work folder whose logs cannot be made (a file in the way, a name the OS refuses): the worker measures
    its ceilings itself."""
    _roots(tmp_path, monkeypatch, "cpu")
    (tmp_path / "a-file").write_text("")
    run = verify.verify_tables(FAKE, None, tmp_path / work, runner_factory=lambda *a: _Scripted({}, default=_ok(1.0)))
    assert [r.exit_code for r in run.reports] == [EXIT_OK, EXIT_OK]


def test_a_table_verified_on_its_own_worker_hands_it_the_table_s_ceilings(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry(stamps={"kernel_hash": "fakehash", "bf16_tflops_ceiling": 7.0}))
    r, runner = _run(path, tmp_path)
    assert r.exit_code == EXIT_OK and runner.closed
    assert json.loads((tmp_path / "w/logs/ceilings.json").read_text())["bf16_tflops_ceiling"] == 7.0


def test_verify_s_own_worker_runs_on_the_kernel_s_gpus_and_logs_in_the_work_folder(tmp_path, monkeypatch):
    from kerneltune.seams.registry import load_kernel

    made = []
    monkeypatch.setattr(verify, "LiveRunner", lambda *a: made.append(a))
    verify._live_runner(FAKE, load_kernel(FAKE), tmp_path)
    [(name, routes, _, logs, compile_cache, *_)] = made
    assert (name, routes, logs, compile_cache) == (FAKE, ["0"], tmp_path / "logs", None)


def test_a_config_is_measured_once_whatever_the_order_of_its_fields():
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.tuning.verify import _Measurements

    runner = _Scripted({1: _ok(100.0)})
    measured = _Measurements("fake", runner, MeasureSettings())
    measured(_entry(), {"mode": "good", "work": 1})
    measured(_entry(), {"work": 1, "mode": "good"})
    assert len(runner.requests) == 1


def test_the_heuristic_rival_is_the_kernel_s_for_the_entry_s_problem():
    from tests.tuning.fake_kernel import FakeProblem

    class ByProblem:
        def problem(self, fields):
            return FakeProblem(**fields)

        def heuristic(self, problem):
            return {"mode": "good", "work": problem.n}

    assert verify._timed_configs(ByProblem(), True, _entry(n=3, problem={"n": 3})) == [
        ("the item", {"mode": "good", "work": 1}), ("the heuristic", {"mode": "good", "work": 3})]


def test_where_times_mean_nothing_verify_checks_correctness_says_why_once_and_exits_2(tmp_path):
    """Two Triton tables on a CPU runner exited 4 on every run, correct: a CPU job had to accept "unsettled". Now
    each entry is checked (never timed: a slower winner passes as far as this machine can tell), the note says why
    speed was not judged, and the exit is 2, the one a CPU job gates on; a wrong entry still fails (1)."""
    path = _table_of(tmp_path / "t.json", _entry(config={"mode": "slow", "work": 1}), _entry("big", 3))
    runner = _Scripted({}, default=_ok(100.0))
    r = verify.verify_table("tests.tuning.fake_kernel:INTERPRETED", path, tmp_path / "w", runner=runner)
    assert r.exit_code == verify.EXIT_CANNOT_RUN and r.timing_absent == "fake runs in its interpreter on this CPU"
    assert r.notes == ["speed not judged: fake runs in its interpreter on this CPU; correctness checked "
                       "(--require-timing times and judges it anyway)"]
    assert [(e.correctness, e.verdict, e.speed_judged, e.now_us) for e in r.entries] == [
        ("ok", "ok; speed not judged here", False, None)] * 2
    assert {q.op for q in runner.requests} == {"check"}
    wrong = _Scripted({}, default={"status": "correctness", "error": "3 elements beyond atol"})
    r = verify.verify_table("tests.tuning.fake_kernel:INTERPRETED", path, tmp_path / "w", runner=wrong)
    assert r.exit_code == EXIT_FAIL and r.entries[0].verdict == "correctness: 3 elements beyond atol"


def test_require_timing_times_and_judges_where_times_would_mean_nothing(tmp_path):
    path = _table_of(tmp_path / "t.json", _entry())
    runner = _Scripted({}, default=_ok(100.0))
    r = verify.verify_table("tests.tuning.fake_kernel:INTERPRETED", path, tmp_path / "w", runner=runner,
                            require_timing=True)
    assert (r.exit_code, r.notes, r.timing_absent) == (EXIT_OK, [], None)
    assert r.entries[0].now_us == 100.0 and "measure" in {q.op for q in runner.requests}
    tuned_there = _table_of(tmp_path / "v.json", _entry(void_timings="fake runs in its interpreter on this CPU"))
    r = verify.verify_table("tests.tuning.fake_kernel:INTERPRETED", tuned_there, tmp_path / "w",
                            runner=_Scripted({}, default=_ok(100.0)), require_timing=True)
    assert r.notes == ["its entries were tuned in an interpreter (fake runs in its interpreter on this CPU): their "
                       "recorded times, and the winners chosen on them, say nothing of its speed"]
    there = _Scripted({}, default=_ok(100.0), gpu=FAKE_GPU)  # on a GPU its times count: judged as any
    assert verify.verify_table("tests.tuning.fake_kernel:INTERPRETED", path, tmp_path / "w",
                               runner=there).exit_code == EXIT_OK


def test_a_check_only_request_is_checked_by_the_worker_and_never_timed():
    from kerneltune.seams.measure import MeasureSettings
    from kerneltune.seams.wire import Op, candidate_request
    from kerneltune.tuning.worker import handle

    req = candidate_request("tests.tuning.fake_kernel:PLUGIN", "b", {"n": 4}, {"mode": "good", "work": 1}, {}, 1,
                            MeasureSettings(), Op.CHECK)
    reply = handle(req)
    assert reply.ok and reply.timing is None and "timing_s" not in (reply.phases or {})
    bad = handle(candidate_request("tests.tuning.fake_kernel:PLUGIN", "b", {"n": 4}, {"mode": "garbage", "work": 1},
                                   {}, 1, MeasureSettings(), Op.CHECK))
    assert bad.status == "correctness"
