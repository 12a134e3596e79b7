"""The accuracy contract: budgets per call, ratios to the no-cap kernel, refusals, and the shipped table."""

import json

import pytest

from kerneltune.kernels.ranker_attention.accuracy import ErrorBudget, budget_for, budget_refusal, ratios
from kerneltune.kernels.ranker_attention.cap import CapMethod
from kerneltune.tables.locations import shipped_tables_dir

SHIPPED_TABLE = shipped_tables_dir() / "nvidia-h200/ranker_attention.json"

EXACT = {"cap_impl": "exact"}
INSTR = {"cap_impl": "tanh_instr"}


def measured(out_ratio, lse_ratio):
    return {"out_rel": 1e-3 * out_ratio, "lse_abs": 2e-5 * lse_ratio, "nocap_out_rel": 1e-3, "nocap_lse_abs": 2e-5}


@pytest.mark.parametrize(("method", "return_lse", "lse"), [
    ("tanh", True, 1.0), ("tanh", False, None), ("tanh_approx", True, None), ("tanh_approx", False, None),
    ("softsign", True, 1.0), ("none", True, 1.0)])
def test_default_budget_bounds_the_lse_only_when_the_call_gets_it_and_names_tanh(method, return_lse, lse):
    budget = budget_for(CapMethod(method), return_lse)
    assert (budget.out, budget.lse) == (2.0, lse)


def test_a_given_budget_wins_over_the_default():
    given = ErrorBudget(out=1.5, lse=3.0)
    assert budget_for(CapMethod.TANH_APPROX, False, given) is given


@pytest.mark.parametrize(("fields", "name"), [({"out": 0}, "out"), ({"out": float("nan")}, "out"),
                                              ({"lse": -1.0}, "lse"), ({"lse": float("inf")}, "lse"),
                                              ({"out": "2"}, "out")])
def test_a_budget_that_cannot_be_met_names_its_field(fields, name):
    with pytest.raises(ValueError, match=f"error_budget.{name}"):
        ErrorBudget(**fields)


def test_ratios_are_to_the_no_cap_kernel_on_the_same_inputs():
    assert ratios(measured(1.5, 7.0)) == pytest.approx({"out_ratio": 1.5, "lse_ratio": 7.0})
    assert ratios({"out_rel": 1e-3, "lse_abs": 1e-5}) == {}, "the no-cap kernel has nothing to compare with"


@pytest.mark.parametrize(("out_ratio", "lse_ratio", "budget", "why"), [
    (2.0, 1.0, ErrorBudget(), None),  # at the budget: kept
    (2.01, 0.5, ErrorBudget(), "out error 2.01x"),
    (1.0, 1.01, ErrorBudget(), "lse error 1.01x"),
    (1.0, 7.0, ErrorBudget(lse=None), None),  # the LSE not returned: not bounded
    (1.0, 7.0, ErrorBudget(lse=8.0), None),
    (2.5, 0.1, ErrorBudget(out=3.0, lse=None), None),
])
def test_budget_refusal_holds_each_measured_ratio_to_its_budget(out_ratio, lse_ratio, budget, why):
    got = budget_refusal({"config": INSTR, "accuracy": measured(out_ratio, lse_ratio)}, budget)
    assert got == why if why is None else why in got


def test_an_entry_measured_without_errors_is_kept_unless_it_is_the_tanh_instruction_under_an_lse_budget():
    assert budget_refusal({"config": EXACT}, ErrorBudget()) is None
    assert budget_refusal({"config": INSTR}, ErrorBudget(lse=None)) is None
    assert "no measured error" in budget_refusal({"config": INSTR}, ErrorBudget())


def test_shipped_tanh_entries_give_the_instruction_to_out_only_calls_and_an_exact_fallback_to_lse_calls():
    """Run P's table: per tanh bucket, the winner (tanh instruction) meets the out-only budget and misses
    the LSE one; its fastest fallback that meets the LSE budget is the exact tanh, and every entry records
    the errors it was chosen on."""
    entries = json.loads(SHIPPED_TABLE.read_text())["entries"].values()
    tanh = [e for e in entries if e["bucket"]["cap_method"] in ("tanh", "tanh_approx")]
    assert len(tanh) == 4
    for e in tanh:
        assert e["config"]["cap_impl"] == "tanh_instr" and "accuracy" in e, e["bucket_name"]
        assert budget_refusal(e, ErrorBudget(lse=None)) is None
        assert "lse error" in budget_refusal(e, ErrorBudget())
        strict = next(fb for fb in e["fallbacks"] if budget_refusal(fb, ErrorBudget()) is None)
        assert strict["config"]["cap_impl"] == "exact" and strict["median_us"] > e["median_us"]
    for e in entries:
        if e["bucket"]["cap_method"] != "none":
            assert set(ratios(e["accuracy"])) == {"out_ratio", "lse_ratio"}, e["bucket_name"]
