"""Strategies are found by name in the modules of ``kerneltune/tuning/strategies``; the CLI's help lists
them from there."""

import pytest
from typer.testing import CliRunner

from kerneltune.cli import app
from kerneltune.tuning import strategies


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
