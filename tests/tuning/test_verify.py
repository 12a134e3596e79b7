"""kerneltune verify: each of its three exit codes."""

import os

import pytest

from kerneltune.tables.locations import shipped_tables_dir
from kerneltune.tables.lookup import bucket_key
from kerneltune.tables.store import update_table
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


@pytest.fixture(autouse=True)
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def table(tmp_path, mode, recorded_us=1000.0, fallbacks=(), runner_ups=()):
    path = tmp_path / "fake.json"
    entry = {"bucket": {"n": 2}, "bucket_name": "small", "problem": {"n": 2}, "config": {"mode": mode, "work": 1},
             "median_us": recorded_us, "spread": 0.01, "stamps": {"kernel_hash": "fakehash"},
             "fallbacks": [{"config": {"mode": m, "work": 1}, "median_us": 50_000.0, "spread": 0.01}
                           for m in fallbacks],
             "runner_ups": [{"config": {"mode": m, "work": w}, "median_us": recorded_us, "spread": 0.01}
                            for m, w in runner_ups]}
    update_table(path, "fake", "cpu", lambda t: t["entries"].update({bucket_key(entry["bucket"]): entry}))
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
    assert r.exit_code == EXIT_FAIL and "slower than the heuristic timed beside it" in r.entries[0].verdict
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
    assert r.notes[-1] == "interrupted after 1 of 3 items"
    assert worst_exit_code([EXIT_OK, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_BAD_INPUT]) == EXIT_INTERRUPTED


def test_each_items_configs_and_the_nexts_compile_before_they_are_timed(tmp_path):
    """As a sweep's worker does: an item's rivals and the next item's configs compile on the worker's threads
    while this one is timed (verify timed up to four configs per item, each compiled only when it was due)."""
    import concurrent.futures as cf

    from kerneltune.tuning.journal import config_key

    events = []

    class Recorder:
        parallel_measures, compiles_ahead = 1, True

        def stamps(self):
            return {"backend": "host", "matched": ["kernel_hash"], "device_kind": "cpu"}

        def prefetch(self, req, route):
            events.append(("compile", req.bucket, config_key(req.tiles)))

        def measure(self, req, route=0):
            events.append(("time", req.bucket, config_key(req.tiles)))
            done = cf.Future()
            done.set_result({"status": "ok", "timing": {"median_us": 1000.0, "spread": 0.01}})
            return done

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
    assert ("`kerneltune rekey fake` carries it if its programs did not change" in verdict) == (kernel == "DIGESTING")


def test_exit_2_without_the_hardware(tmp_path):
    r = verify_table("tests.tuning.fake_kernel:NEEDS_GPU", table(tmp_path, "good"), tmp_path / "w")
    assert r.exit_code == EXIT_CANNOT_RUN and "FakeGPU 9000" in r.notes[0]


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
    from kerneltune.measure import MeasureSettings
    from kerneltune.registry import load_kernel
    from kerneltune.tuning.verify import _Measurements, _timed_configs, _verify_entry

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = {"bucket_name": "small", "problem": {"n": 2}, "config": {"mode": "slow", "work": 1},
             "median_us": 10.0, "spread": 0.01, "stamps": {"kernel_hash": "fakehash"},
             "runner_ups": [{"config": {"mode": "good", "work": 2}}]}
    want = {"matched": ["kernel_hash"], "kernel_hash": "fakehash"}
    runner = _Scripted({w: {"status": "ok", "timing": {"median_us": 10.0, "spread": 0.01}} for w in (1, 2)})
    measured = _Measurements("fake", runner, MeasureSettings())
    for i, checked in enumerate([entry, {**entry, "config": {"mode": "good", "work": 2}}]):
        _verify_entry(kernel, measured, checked, want, True, MeasureSettings(), i == 0,
                      _timed_configs(kernel, i == 0, checked))
    seeds = [r.seed for r in runner.requests]
    assert len(seeds) == 3 and len(set(seeds)) == 1  # winner, heuristic, runner-up
    # The fallback's config is the runner-up's: measured once on the bucket's one seed of inputs, its reply
    # serves both, and every measurement's phases are kept with its wall.
    assert [dict(r.tiles) for r in runner.requests].count({"mode": "good", "work": 2}) == 1
    assert len(measured.phases) == 3 and all("wall_s" in p["phases"] for p in measured.phases)


class _Scripted:
    """A runner whose replies are given per config ("work" picks it): verify's verdicts, at their bounds,
    without a worker's timing noise."""

    def __init__(self, replies):
        self.replies, self.requests = replies, []

    def measure(self, req, route=0):
        import concurrent.futures as cf

        self.requests.append(req)
        done = cf.Future()
        done.set_result(self.replies[req.tiles["work"]])
        return done

    def request(self, req):
        assert req.op == "check_small"
        return self.replies[req.tiles["work"]]


def _entry(**over):
    e = {"bucket_name": "small", "problem": {"n": 2}, "config": {"mode": "good", "work": 1}, "median_us": 100.0,
         "spread": 0.01, "inputs": {"spec": "ragged"}, "stamps": {"kernel_hash": "fakehash"}}
    e.update(over)
    return e


def _judge(replies, recorded_us=100.0, on_gpu=True, entry=None, timed=None):
    """``_check_and_time`` of ``entry`` (by default the small bucket's, work 1) on scripted replies; ``timed``: the
    item and its rivals (by default the item, then each other reply's config as a runner-up)."""
    from kerneltune.measure import MeasureSettings
    from kerneltune.registry import load_kernel
    from kerneltune.tuning.verify import HEURISTIC, _check_and_time, _Measurements

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = entry or _entry(median_us=recorded_us)
    timed = timed or [("the item", entry["config"])] + [(f"runner-up {w - 1}", {"mode": "good", "work": w})
                                                         for w in replies if w != entry["config"]["work"]]
    settings = MeasureSettings(rel_noise=0.01)
    return _check_and_time(kernel, _Measurements("fake", _Scripted(replies), settings), entry, on_gpu, settings,
                           any(name == HEURISTIC for name, _ in timed), timed)


def _ok(us, spread=0.01):
    return {"status": "ok", "timing": {"median_us": us, "spread": spread}}


@pytest.mark.parametrize(("winner_us", "failed"), [(101.5, False), (102.5, True)])
def test_a_winner_fails_past_twice_the_noise_over_its_fastest_rival(winner_us, failed):
    """Noise 1% (the spreads and the settings' bound): the winner may be 2% slower than a rival timed beside it."""
    rep = _judge({1: _ok(winner_us), 2: _ok(100.0), 3: _ok(130.0)}, recorded_us=winner_us)
    assert rep.failed is failed, rep.verdict
    assert rep.rivals_us == {"runner-up 1": 100.0, "runner-up 2": 130.0}
    if failed:
        assert rep.verdict.startswith("slower than runner-up 1 timed beside it: 102.5 against 100.0 µs")


def test_the_widest_spread_sets_the_noise():
    assert not _judge({1: _ok(104.0), 2: _ok(100.0, spread=0.025)}, recorded_us=104.0).failed
    assert _judge({1: _ok(106.0), 2: _ok(100.0, spread=0.025)}, recorded_us=106.0).failed


@pytest.mark.parametrize(("now_us", "warned"), [(80.0, "-20.0%"), (120.0, "+20.0%"), (95.0, None)])
def test_drift_either_way_past_the_spread_is_a_warning(now_us, warned):
    rep = _judge({1: _ok(now_us)})
    assert not rep.failed
    if warned:
        assert rep.verdict.startswith(f"ok; warning: {warned} against the recorded time")
    else:
        assert not rep.verdict.startswith("ok; warning")


def test_a_wrong_output_fails_on_the_cpu_and_on_the_gpu():
    wrong = {"status": "incorrect", "error": "out: 3 elements beyond atol"}
    for on_gpu in (False, True):
        rep = _judge({1: wrong}, on_gpu=on_gpu)
        assert rep.failed and rep.verdict == "incorrect: out: 3 elements beyond atol"
        assert rep.correctness == "incorrect"
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
def test_the_winner_may_be_exactly_twice_the_noise_slower(winner_us, failed):
    """Noise 25% (the rival's spread): 50% slower still passes, a hair more fails, and the verdict says so."""
    rep = _judge({1: _ok(winner_us), 2: _ok(100.0, spread=0.25)}, recorded_us=winner_us)
    assert rep.failed is failed
    if failed:
        assert rep.verdict == ("slower than runner-up 1 timed beside it: 150.1 against 100.0 µs (noise 25.0%)")


@pytest.mark.parametrize(("spread", "now_us", "warned"), [(0.25, 150.0, False), (0.25, 150.5, True),
                                                          (None, 108.5, True), (None, 107.5, False)])
def test_drift_is_judged_against_the_entry_s_own_spread(spread, now_us, warned):
    """Twice the largest of the entry's recorded spread, this run's noise and 4%: at exactly twice, no warning.
    An entry without a spread is judged on the other two."""
    entry = _entry(spread=spread)
    if spread is None:
        del entry["spread"]
    rep = _judge({1: _ok(now_us)}, entry=entry)
    assert rep.verdict.startswith("ok; warning") is warned, rep.verdict
    if warned:
        noise = 25.0 if spread else 4.0
        assert rep.verdict == (f"ok; warning: {100 * (now_us / 100.0 - 1):+.1f}% against the recorded time (beyond "
                               f"twice the {noise:.1f}% spread across GPUs and runs)")


def test_a_failed_reply_s_error_is_cut_and_a_reply_without_status_is_named():
    long = {"status": "incorrect", "error": "x" * 1000}
    assert _judge({1: long}).verdict == "incorrect: " + "x" * 300
    assert _judge({1: long}, on_gpu=False).verdict == "incorrect: " + "x" * 200
    rep = _judge({1: {}}, on_gpu=False)
    assert (rep.failed, rep.correctness, rep.verdict) == (True, "?", "None: ")


def test_each_request_carries_the_entry_s_bucket_problem_and_inputs_on_verify_s_seed():
    from kerneltune.measure import MeasureSettings
    from kerneltune.tuning.verify import VERIFY_SEED, _measure_request

    req = _measure_request("fake", _entry(), {"mode": "good", "work": 1}, MeasureSettings())
    assert (req.bucket, dict(req.problem), dict(req.inputs), req.seed) == ("small", {"n": 2}, {"spec": "ragged"},
                                                                          VERIFY_SEED)
    bare = _measure_request("fake", {"config": {}}, {"mode": "good", "work": 1}, MeasureSettings())
    assert (bare.bucket, dict(bare.problem), dict(bare.inputs)) == ("?", {}, {})


def test_fallbacks_are_named_after_their_entry_and_an_entry_may_have_none():
    from kerneltune.tuning.verify import _items, _timed_configs

    named = _entry(fallbacks=[{"config": {"mode": "good", "work": 2}}])
    unnamed = {k: v for k, v in named.items() if k != "bucket_name"}
    items = list(_items([named, unnamed, _entry()]))
    assert [(h, i.get("bucket_name")) for h, i in items] == [
        (True, "small"), (False, "small (fallback)"), (True, None), (False, "? (fallback)"), (True, "small")]
    from kerneltune.registry import load_kernel

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    assert _timed_configs(kernel, True, _entry(config={"mode": "good", "work": 2})) == [
        ("the item", {"mode": "good", "work": 2}), ("the heuristic", {"mode": "good", "work": 1})]


def test_each_measurement_keeps_its_bucket_the_worker_s_phases_and_its_wall():
    from kerneltune.measure import MeasureSettings
    from kerneltune.tuning.verify import _Measurements

    reply = {**_ok(100.0), "phases": {"check_s": 0.5}}
    measured = _Measurements("fake", _Scripted({1: reply}), MeasureSettings())
    measured(_entry(), {"mode": "good", "work": 1})
    [p] = measured.phases
    assert p["bucket"] == "small" and p["phases"]["check_s"] == 0.5
    assert 0 <= p["phases"]["wall_s"] <= p["phases"]["since_start_s"] < 60


def test_an_unstamped_entry_is_verified_and_its_missing_stamps_named(tmp_path):
    from kerneltune.measure import MeasureSettings
    from kerneltune.registry import load_kernel
    from kerneltune.tuning.verify import _Measurements, _verify_entry

    kernel = load_kernel("tests.tuning.fake_kernel:PLUGIN")
    entry = {k: v for k, v in _entry().items() if k != "stamps"}
    settings = MeasureSettings(rel_noise=0.01)
    rep = _verify_entry(kernel, _Measurements("fake", _Scripted({1: _ok(100.0)}), settings), entry,
                        {"kernel_hash": "fakehash", "matched": ["kernel_hash"]}, True, settings, False,
                        [("the item", entry["config"])])
    assert rep.stamps == ["kernel_hash: table None, running 'fakehash'"]
    assert rep.failed and rep.verdict.startswith("stale: tuned for another kernel source (`kerneltune sweep fake "
                                                 "--contenders TABLE` re-measures the table's configs)")


def test_without_any_table_the_refusal_names_every_place_it_looked(tmp_path, monkeypatch):
    from kerneltune.tuning import verify

    monkeypatch.setattr(verify, "table_roots", lambda: [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(verify.VerifyRefused) as e:
        verify.runtime_tables("fake", "cpu", True)
    a, b = (verify.stored_table_path(tmp_path / r, "cpu", "fake") for r in "ab")
    assert str(e.value) == f"no tuned table for fake on cpu at {a} or {b}"
