"""The Optuna-backed strategies, directly: what they tell the study, what they never propose, where
the study lives, and how a seed fixes the proposals."""

import warnings

import optuna
import pytest

from kerneltune.seams.protocols import StrategyContext
from kerneltune.tuning.journal import config_key
from kerneltune.tuning.strategies import make_strategy
from kerneltune.tuning.strategies.optuna_samplers import _MAX_REJECTS, OptunaStrategy, make_sampler

PARAMS = {"x": [1, 2, 3], "y": ["a", "b"]}
ALL = [{"x": x, "y": y} for x in PARAMS["x"] for y in PARAMS["y"]]
COMPLETE, FAIL = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL


def context(storage, strategy_feasible=ALL, known=None, seed=0, start=None, check=lambda c: None, name="s"):
    return StrategyContext(bucket="b", params=PARAMS, feasible=strategy_feasible, check=check, known=known or {},
                           seed=seed, start=start, study_name=name, storage=lambda: storage)


def run(strategy, n, value=lambda c: float(c["x"])):
    seen = []
    for _ in range(n):
        tiles = strategy.propose()
        if tiles is None:
            break
        seen.append(tiles)
        strategy.observe(tiles, value(tiles))
    return seen


def pinned_study(**fixed):
    """A study whose sampler proposes ``fixed`` every time (Optuna's PartialFixedSampler)."""
    index = {n: PARAMS[n].index(v) for n, v in fixed.items()}
    with warnings.catch_warnings():  # experimental since Optuna 2.4, and the simplest pinned sampler
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.PartialFixedSampler(index, optuna.samplers.RandomSampler(seed=0))
    return optuna.create_study(sampler=sampler, direction="minimize")


@pytest.mark.parametrize("name", ["random", "tpe", "gp", "cmaes"])
def test_the_study_lives_in_the_contexts_storage_and_a_rebuild_continues_it(name):
    storage = optuna.storages.InMemoryStorage()
    seen = run(make_strategy(name)(context(storage, name="ranker:b:tpe:0")), 3)
    seen += run(make_strategy(name)(context(storage, name="ranker:b:tpe:0")), 2)
    study = optuna.load_study(study_name="ranker:b:tpe:0", storage=storage)
    done = [t for t in study.trials if t.state is COMPLETE]
    assert len(done) >= 5 and study.direction is optuna.study.StudyDirection.MINIMIZE
    assert study.best_value == min(c["x"] for c in seen)


@pytest.mark.parametrize("name", ["random", "tpe", "gp", "cmaes"])
def test_a_seed_fixes_the_proposals(name):
    def proposals(seed):
        return run(make_strategy(name)(context(optuna.storages.InMemoryStorage(), seed=seed)), 5)

    assert proposals(3) == proposals(3)
    assert len({config_key(c) for c in proposals(3)}) == 5  # never the same config twice


def test_gp_and_tpe_model_after_three_startup_trials_and_tpe_models_jointly_with_liars():
    """Read from the samplers' own settings: over a few proposals these choices do not show reliably."""
    assert make_sampler("gp", 0)._n_startup_trials == 3
    tpe = make_sampler("tpe", 0)
    assert (tpe._n_startup_trials, tpe._multivariate, tpe._constant_liar) == (3, True, True)
    cmaes = make_sampler("cmaes", 0)
    assert (cmaes._n_startup_trials, cmaes._warn_independent_sampling) == (3, False)
    with pytest.raises(ValueError, match=r"^strategy: 'anneal' has no Optuna sampler$"):
        make_sampler("anneal", 0)


def test_the_random_fallback_is_seeded():
    """When the sampler only proposes measured configs, the untried config drawn instead follows the seed."""
    def fallbacks(seed):
        known = {config_key({"x": 1, "y": "a"}): 5.0}
        s = OptunaStrategy(pinned_study(x=1, y="a"), PARAMS, ALL, known, seed=seed)
        return [s.propose() for _ in range(4)]

    assert fallbacks(5) == fallbacks(5) and len({config_key(c) for c in fallbacks(5)}) == 4


@pytest.mark.filterwarnings("error::UserWarning")  # told as failed, not as a value Optuna cannot read
def test_a_failed_candidate_is_told_as_failed():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, ALL, {}, seed=0)
    tiles = s.propose()
    s.observe(tiles, None)
    assert s.study.trials[-1].state is FAIL


def test_the_heuristic_start_comes_first_unless_it_was_measured():
    start = {"x": 3, "y": "b"}
    fresh = make_strategy("random")(context(optuna.storages.InMemoryStorage(), start=start))
    assert fresh.propose() == start
    measured = make_strategy("random")(context(optuna.storages.InMemoryStorage(), start=start,
                                               known={config_key(start): 7.0}))
    assert start not in run(measured, len(ALL))


def test_observed_values_and_failures_are_told_to_the_study():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, ALL, {}, seed=0)
    a, b = s.propose(), s.propose()
    s.observe(a, 2.5)
    s.observe(b, None)
    told = [(config_key({n: PARAMS[n][i] for n, i in t.params.items()}), t.state, t.value) for t in s.study.trials]
    # The sampler may have proposed ``a`` again while it was in flight: that ask was told as failed.
    assert [t for t in told if t[1] is COMPLETE] == [(config_key(a), COMPLETE, 2.5)]
    assert (config_key(b), FAIL, None) in told
    assert s.known == {config_key(a): 2.5, config_key(b): None}


def test_an_observation_of_a_config_it_did_not_propose_is_only_remembered():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, ALL, {}, seed=0)
    s.observe({"x": 1, "y": "a"}, 1.0)
    assert s.study.trials == [] and s.known == {config_key({"x": 1, "y": "a"}): 1.0}


def test_configs_in_flight_are_not_proposed_again_and_the_end_is_none():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, ALL[:2], {}, seed=0)
    first, second = s.propose(), s.propose()
    assert sorted([config_key(first), config_key(second)]) == sorted(config_key(c) for c in ALL[:2])
    assert s.propose() is None


@pytest.mark.filterwarnings("error::UserWarning")  # rejected asks told as failed, not as unreadable values
def test_a_measured_duplicate_is_told_its_recorded_value_and_a_failed_one_fails():
    known = {config_key({"x": 1, "y": "a"}): 5.0, config_key({"x": 2, "y": "a"}): None}
    s = OptunaStrategy(pinned_study(x=1, y="a"), PARAMS, ALL, known, seed=0)
    tiles = s.propose()
    assert tiles not in ({"x": 1, "y": "a"}, {"x": 2, "y": "a"})
    told = len(known)  # the journal's records, told to the study first
    assert [(t.state, t.value) for t in s.study.trials[told:-1]] == [(COMPLETE, 5.0)] * _MAX_REJECTS
    s = OptunaStrategy(pinned_study(x=2, y="a"), PARAMS, ALL, known, seed=0)
    tiles = s.propose()
    assert tiles not in ({"x": 1, "y": "a"}, {"x": 2, "y": "a"})
    assert {t.state for t in s.study.trials[told:-1]} == {FAIL}


def test_a_study_that_lost_its_log_is_told_what_the_journal_holds_once():
    known = {config_key({"x": 1, "y": "a"}): 5.0, config_key({"x": 2, "y": "a"}): None,
             config_key({"x": 9, "y": "a"}): 1.0}  # no longer in the space: not told
    s = OptunaStrategy(pinned_study(x=3, y="b"), PARAMS, ALL, known, seed=0)
    assert [(t.state, t.value) for t in s.study.trials] == [(COMPLETE, 5.0), (FAIL, None)]
    again = OptunaStrategy(s.study, PARAMS, ALL, known, seed=0)  # a resume whose study holds them
    assert len(again.study.trials) == 2


def test_after_too_many_rejects_the_nearest_untried_config_is_enqueued():
    known = {config_key({"x": 1, "y": "a"}): 5.0, config_key({"x": 1, "y": "b"}): 4.0}
    s = OptunaStrategy(pinned_study(x=1, y="a"), PARAMS, ALL, known, seed=0)
    tiles = s.propose()
    assert tiles in ({"x": 2, "y": "a"}, {"x": 3, "y": "a"})  # one parameter from the proposal, never (x, b)
    s.observe(tiles, 1.0)
    last = s.study.trials[-1]
    assert (last.state, last.value) == (COMPLETE, 1.0)
    assert {n: PARAMS[n][i] for n, i in last.params.items()} == tiles


def test_without_a_feasible_list_the_check_decides():
    refused = []

    def check(tiles):
        if tiles["y"] == "a":
            refused.append(tiles)
            return "y=a does not compile"
        return None

    s = OptunaStrategy(optuna.create_study(direction="minimize", sampler=optuna.samplers.RandomSampler(seed=1)),
                       PARAMS, None, {}, seed=0, check=check)
    seen = run(s, 10)
    assert sorted(c["x"] for c in seen) == [1, 2, 3] and all(c["y"] == "b" for c in seen) and refused
    assert s.propose() is None  # every allowed config measured: the random draws find none either


def test_without_a_feasible_list_or_a_check_nothing_is_allowed():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, None, {}, seed=0)
    assert not s._allowed({"x": 1, "y": "a"})


def test_values_outside_the_space_are_not_allowed():
    s = OptunaStrategy(optuna.create_study(direction="minimize"), PARAMS, None, {}, seed=0, check=lambda c: None)
    assert s._allowed({"x": 1, "y": "a"}) and not s._allowed({"x": 4, "y": "a"})


def test_an_untried_config_is_drawn_when_the_sampler_only_proposes_measured_ones_without_a_list():
    known = {config_key({"x": 1, "y": "a"}): 5.0}
    s = OptunaStrategy(pinned_study(x=1, y="a"), PARAMS, None, known, seed=0, check=lambda c: None)
    tiles = s.propose()
    assert tiles in ALL and config_key(tiles) not in known


def test_a_built_strategy_keeps_to_the_feasible_list_or_else_to_the_check():
    listed = make_strategy("random")(context(optuna.storages.InMemoryStorage(), strategy_feasible=ALL[:2]))
    assert len(run(listed, 10)) == 2
    checked = make_strategy("random")(context(optuna.storages.InMemoryStorage(), strategy_feasible=None,
                                              check=lambda c: None if c["y"] == "b" else "y=a is infeasible"))
    assert sorted(c["x"] for c in run(checked, 10)) == [1, 2, 3]


def test_a_built_strategys_random_fallback_follows_the_contexts_seed(monkeypatch):
    monkeypatch.setattr("kerneltune.tuning.strategies.optuna_samplers._MAX_REJECTS", 0)  # straight to the fallback

    def draws(seed):
        s = make_strategy("random")(context(optuna.storages.InMemoryStorage(), seed=seed))
        return [config_key(s.propose()) for _ in range(4)]

    assert draws(11) == draws(11)
