"""Warm start: a new bucket first measures the nearest tuned buckets' winners, runner-ups and fallbacks, and a
replay's winners are the same with it and without it."""

import json

import pytest

from kerneltune.seams.registry import load_kernel
from kerneltune.tables.store import table_path, update_table
from kerneltune.tuning.journal import Journal
from kerneltune.tuning.sweep import run_sweep
from kerneltune.tuning.warm_start import warm_configs, warm_start

from .test_sweep import FAKE, options

PARAMS = {"mode": ["good", "slow", "bad"], "work": [1, 2, 3]}


def _table(root, entries, kind="cpu"):
    def put(table):
        for n, (config, runner_ups) in entries.items():
            table["entries"][f"n={n}"] = {
                "bucket": {"n": n}, "config": config, "median_us": 10.0, "spread": 0.01,
                "runner_ups": [{"config": c, "median_us": 10.0, "spread": 0.01} for c in runner_ups],
                "fallbacks": [{"config": {"mode": "bad", "work": 1}, "median_us": 12.0, "spread": 0.01}]}
    update_table(table_path(root, kind, "fake"), "fake", kind, put)


def test_the_nearest_buckets_first_each_config_once_refused_ones_repaired(tmp_path, monkeypatch):
    kernel = load_kernel(FAKE)
    monkeypatch.setattr(kernel, "hard_bucket_fields", ())  # n as a size: buckets of other n are near ones
    _table(tmp_path / "tables", {4: ({"mode": "slow", "work": 2}, [{"mode": "good", "work": 3}]),
                                 64: ({"mode": "good", "work": 1}, []),
                                 3: ({"mode": "good", "work": 2}, [{"mode": "slow", "work": 2}])})
    got = warm_configs(kernel, kernel.problem({"n": 2}), "cpu", tmp_path, PARAMS,
                       lambda t: "too much work" if t["work"] > 2 else None)
    # n=3 (distance log2 1.5) then n=4 (1); n=64 is third and left out; each config once; work 3 refused, and
    # repaired in the field its refusal names (n=4's runner-up good/3 becomes good/1, not slow/3 or bad/3).
    assert got == ({"mode": "good", "work": 2}, {"mode": "slow", "work": 2}, {"mode": "bad", "work": 1},
                   {"mode": "good", "work": 1})


def test_a_refused_config_beyond_one_change_is_left_out(tmp_path):
    kernel = load_kernel(FAKE)
    _table(tmp_path / "tables", {2: ({"mode": "slow", "work": 3}, [])})
    only_good_1 = warm_configs(kernel, kernel.problem({"n": 2}), "cpu", tmp_path, PARAMS,
                               lambda t: None if t == {"mode": "good", "work": 1} else "refused")
    assert only_good_1 == ({"mode": "good", "work": 1},)  # the fallback bad/1, one change away; slow/3 is two
    unnamed = warm_configs(kernel, kernel.problem({"n": 2}), "cpu", tmp_path, PARAMS,
                           lambda t: None if t["mode"] == "good" else "excluded by a constraint of the space")
    assert unnamed == ({"mode": "good", "work": 3}, {"mode": "good", "work": 1})  # the first field that will do


@pytest.mark.parametrize("kind", ["../../escaped", "/abs", "", "UPPER"])
def test_a_device_kind_from_data_names_no_folder(tmp_path, kind):
    kernel = load_kernel(FAKE)
    assert warm_configs(kernel, kernel.problem({"n": 2}), kind, tmp_path, PARAMS, lambda t: None) == ()


def test_an_unusable_table_only_costs_the_warm_start(tmp_path):
    kernel = load_kernel(FAKE)
    path = table_path(tmp_path / "tables", "cpu", "fake")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff\xfe not json")
    assert warm_configs(kernel, kernel.problem({"n": 2}), "cpu", tmp_path, PARAMS, lambda t: None) == ()


@pytest.mark.parametrize("strategy", ["exhaustive", "tpe"])
def test_the_warm_configs_are_measured_first_and_the_winner_is_the_same(tmp_path, strategy):
    """Recorded once exhaustively; replayed with and without the warm start: the warm configs come first (after
    the heuristic, for a sampler), and an exhaustive replay's table is the same either way."""
    (tmp_path / "live").mkdir()
    live = options(tmp_path / "live", ["good", "slow"])
    run_sweep(live)
    tables = {}
    for warm in (True, False):
        out = tmp_path / f"replay-{warm}"
        out.mkdir()
        _table(out / "out" / "tables", {2: ({"mode": "slow", "work": 2}, [])})  # this bucket, tuned before
        opts = options(out, ["good", "slow"], replay=live.journal_path, strategy=strategy,
                       budget=None if strategy == "exhaustive" else 4)
        opts = type(opts)(**{**opts.__dict__, "search": type(opts.search)(
            **{**opts.search.__dict__, "warm_start": warm})})
        run_sweep(opts)
        order = [r["tiles"] for r in Journal(opts.journal_path).records() if r["status"] != "constraint"]
        first = order[0] if strategy == "exhaustive" else order[1]  # a sampler starts at the heuristic
        assert (first == {"mode": "slow", "work": 2}) is warm, order
        tables[warm] = json.loads(table_path(out / "out" / "tables", "cpu", "fake").read_text())["entries"]["n=2"]
    if strategy == "exhaustive":
        assert tables[True]["config"] == tables[False]["config"]
        assert tables[True]["runner_ups"] == tables[False]["runner_ups"]


def test_the_warm_start_names_each_table_file_and_entry_it_read(tmp_path, monkeypatch):
    """A fresh --out is no independent run: the installed tables warm-start it too, and the sweep says which."""
    from kerneltune.tuning import warm_start as module

    kernel = load_kernel(FAKE)
    installed, shipped = tmp_path / "installed", tmp_path / "shipped"
    monkeypatch.setattr(module, "table_roots", lambda: (installed, shipped))
    _table(installed, {2: ({"mode": "good", "work": 2}, [{"mode": "good", "work": 1}])})
    found = warm_start(kernel, kernel.problem({"n": 2}), "cpu", tmp_path / "out", PARAMS, lambda t: None)
    assert [s.text() for s in found.sources] == [
        f"n=2 (3 configs) of {table_path(installed, 'cpu', 'fake')} (the installed tables)"]
    assert len(found.configs) == 3
    _table(tmp_path / "out" / "tables", {2: ({"mode": "slow", "work": 2}, [])})  # the sweep's own comes first
    found = warm_start(kernel, kernel.problem({"n": 2}), "cpu", tmp_path / "out", PARAMS, lambda t: None)
    assert [s.where for s in found.sources] == ["this sweep's --out"]


def test_a_sweep_says_where_its_warm_start_came_from(tmp_path):
    (tmp_path / "out" / "tables").mkdir(parents=True)
    _table(tmp_path / "out" / "tables", {2: ({"mode": "slow", "work": 2}, [])})
    [result] = run_sweep(options(tmp_path, ["good", "slow"]))
    assert result.prior == [f"small: warm start from 1 tuned entry, measured first: n=2 (1 config) of "
                            f"{table_path(tmp_path / 'out' / 'tables', 'cpu', 'fake')} (this sweep's --out) "
                            f"(--no-warm-start: an independent sweep)"]
