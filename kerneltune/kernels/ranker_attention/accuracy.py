"""The accuracy contract under which the tuner may pick a faster cap implementation.

A candidate's check measures, on the same inputs, its own errors against the reference and the
no-cap kernel's (``PLUGIN.check``): ``out_rel`` (relative Frobenius error of ``out`` over the valid
rows) and ``lse_abs`` (largest ``|lse - ref|`` over the valid rows), each the worst over the check's
bounds and gains. The ratios of the two are what a budget bounds, so the budget means the same thing
at every shape: "no worse than k times the no-cap kernel", which is what users of the no-cap kernel
accept today.

Default budget, per output the call returns:
- ``out``: 2x. The exact tanh kernel itself measures 1.12x on ``out`` (a capped softmax is flatter,
  so the bf16 rounding of P weighs more) and ``static_max`` 1.6x (on the H200:
  1371b475c129:results/ranker_attention/2026-12-01-h200-run-l/);
- ``lse``: 1x, when the caller gets the LSE back (``return_lse=True``) and names ``tanh``. The exact
  tanh measures 0.7x; the tanh instruction 10-13x, so it is refused there and kept where only
  ``out`` is returned (its ``out`` error equals the exact one's to three digits).
``cap_method="tanh_approx"`` is tanh under the looser budget: ``out`` only, the LSE held to
verification's fixed tolerance alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cap import CapImpl, CapMethod

OUT_RATIO = "out_ratio"
LSE_RATIO = "lse_ratio"


@dataclass(frozen=True)
class ErrorBudget:
    """Largest errors a launch accepts, as multiples of the no-cap kernel's on the same inputs;
    ``lse=None`` leaves the LSE to verification's fixed tolerance."""

    out: float = 2.0
    lse: float | None = 1.0

    def __post_init__(self) -> None:
        for name in ("out", "lse"):
            value = getattr(self, name)
            if value is None and name == "lse":
                continue
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"error_budget.{name}: must be a finite number > 0, got {value!r}")


def budget_for(cap_method: CapMethod, return_lse: bool, given: ErrorBudget | None = None) -> ErrorBudget:
    """The budget of a call: the caller's, else the default for the outputs it gets back."""
    if given is not None:
        return given
    bounds_lse = return_lse and cap_method is not CapMethod.TANH_APPROX
    return ErrorBudget() if bounds_lse else ErrorBudget(lse=None)


def ratios(errors: Mapping[str, float]) -> dict[str, float]:
    """A check's measured errors as multiples of the no-cap kernel's (empty where there is none to
    compare with: the no-cap kernel itself)."""
    out: dict[str, float] = {}
    for mine, base, key in (("out_rel", "nocap_out_rel", OUT_RATIO), ("lse_abs", "nocap_lse_abs", LSE_RATIO)):
        if mine in errors and base in errors:
            out[key] = errors[mine] / max(errors[base], 1e-12)
    return out


def budget_refusal(item: Mapping[str, Any], budget: ErrorBudget) -> str | None:
    """Why a tuned entry (its ``config`` and the ``accuracy`` its sweep measured) misses ``budget``,
    or None. An entry measured without errors is taken as today's verification passed it, except the
    tanh instruction, whose LSE error is known to be over the default budget."""
    measured = item.get("accuracy")
    if not measured:
        if item["config"].get("cap_impl") == CapImpl.TANH_INSTR.value and budget.lse is not None:
            return "cap_impl: 'tanh_instr' has no measured error to hold against the LSE budget"
        return None
    r = ratios(measured)
    if OUT_RATIO in r and r[OUT_RATIO] > budget.out:
        return f"out error {r[OUT_RATIO]:.2f}x the no-cap kernel's, over the budget of {budget.out:g}x"
    if budget.lse is not None and LSE_RATIO in r and r[LSE_RATIO] > budget.lse:
        return f"lse error {r[LSE_RATIO]:.2f}x the no-cap kernel's, over the budget of {budget.lse:g}x"
    return None
