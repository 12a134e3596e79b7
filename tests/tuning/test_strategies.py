"""Strategies are found by name in the modules of ``kerneltune/tuning/strategies``; the CLI's help lists
them from there."""

import pytest
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.seams.protocols import StrategyContext
from kerneltune.tuning import strategies
from kerneltune.tuning.journal import config_key
from kerneltune.tuning.strategies import make_strategy


def test_every_strategy_module_is_found_by_name():
    assert strategies.names() == ["exhaustive", "cmaes", "gp", "random", "tpe"]


def test_a_new_module_is_a_new_strategy(tmp_path, monkeypatch):
    (tmp_path / "greedy.py").write_text("STRATEGIES = {'greedy': lambda ctx: None}\n")
    monkeypatch.setattr(strategies, "__path__", [*strategies.__path__, str(tmp_path)])
    monkeypatch.syspath_prepend(str(tmp_path))
    strategies.registry.cache_clear()
    try:
        assert "greedy" in strategies.names()
    finally:
        strategies.registry.cache_clear()


def test_an_unknown_name_says_which_exist():
    with pytest.raises(ValueError, match="'anneal' is not one of exhaustive, cmaes, gp, random, tpe"):
        strategies.make_strategy("anneal")


def test_the_help_lists_them():
    out = " ".join(CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "exhaustive, cmaes, gp, random, tpe" in out


def test_exhaustive_proposes_the_unmeasured_configs_in_space_order():
    configs = [{"x": i} for i in range(5)]
    ctx = StrategyContext(bucket="b", params={"x": list(range(5))}, feasible=configs, check=lambda c: None,
                          known={config_key({"x": 1}): 1.0, config_key({"x": 3}): None}, seed=0, start=None,
                          study_name="s", storage=lambda: None)
    s = make_strategy("exhaustive")(ctx)
    proposed = []
    while (c := s.propose()) is not None:
        proposed.append(c)
        s.observe(c, 1.0)
    assert proposed == [{"x": 0}, {"x": 2}, {"x": 4}]


def test_an_exhaustive_search_needs_the_feasible_list():
    ctx = StrategyContext(bucket="b", params={"x": [1]}, feasible=None, check=lambda c: None, known={}, seed=0,
                          start=None, study_name="s", storage=lambda: None)
    with pytest.raises(AssertionError, match=r"^an exhaustive search enumerates the space$"):
        make_strategy("exhaustive")(ctx)
