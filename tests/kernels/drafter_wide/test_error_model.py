"""The formats' error model per element (``error_model.py``) on a tiny model: its values are the float64 model's,
its checks pass errors of the size the interpreted kernel has, and fail errors that the global Frobenius bound lets
through: 20% on one row, or every element's error three times its size."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.error_model import (
    compare,
    element_model,
    judge_step,
    rms_limit,
    z_limit,
)
from kerneltune.kernels.drafter_wide.numerics import bounded_reference, frobenius_error
from kerneltune.kernels.drafter_wide.reference import Dims, forward_f64, make_inputs, make_weights

TINY = Dims(hidden=256, intermediate=4 * 128, window=64, layers=2)
MEASURED = 0.42  # the interpreted kernel's rms error in units of the model's σ, every shape of the matrix


@pytest.fixture(scope="module")
def tiny():
    weights = make_weights(TINY, 0)
    inputs = make_inputs(TINY, 2, 3, [5, 70], 1)
    caches: list = []
    ref = forward_f64(TINY, weights, inputs, caches=caches)
    _, bound = bounded_reference(TINY, weights, inputs)
    return {"model": element_model(TINY, weights, inputs), "ref": ref.numpy(), "caches": caches, "bound": bound}


def _noisy(model, scale: float, seed: int = 0) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """The model's outputs with Gaussian errors of ``scale`` times each element's σ."""
    rng = np.random.default_rng(seed)
    h = model.h_out + scale * model.h_sigma * rng.standard_normal(model.h_out.shape)
    caches = [[c + scale * s * rng.standard_normal(c.shape) for c, s in zip(rc, rs, strict=True)]
              for rc, rs in zip(model.cache, model.cache_sigma, strict=True)]
    return h, caches


def test_the_models_values_are_the_float64_models(tiny):
    model = tiny["model"]
    np.testing.assert_allclose(model.h_out, tiny["ref"], rtol=0, atol=1e-12 * np.abs(tiny["ref"]).max())
    for layer, (k, v) in enumerate(tiny["caches"]):
        for rank in range(4):
            np.testing.assert_allclose(model.cache[rank][layer], np.stack([k[:, :, rank], v[:, :, rank]]),
                                       rtol=1e-12, atol=1e-15)


def test_sigma_is_positive_exactly_where_the_step_writes(tiny):
    model = tiny["model"]
    assert (model.h_sigma > 0).all()
    assert model.written.sum() == 2 * 6 * TINY.head_dim  # K and V of 6 rows
    for rs in model.cache_sigma:
        for s in rs:
            assert (s[model.written] > 0).all() and (s[~model.written] == 0).all()


def test_errors_of_the_measured_size_pass(tiny):
    h, caches = _noisy(tiny["model"], MEASURED)
    judged = judge_step([h] * 4, caches, tiny["model"])
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]


def test_every_element_erring_three_times_more_fails_the_rms_the_global_bound_passes(tiny):
    model = tiny["model"]
    h, _ = _noisy(model, 3 * MEASURED)
    assert frobenius_error(h, model.h_out) <= tiny["bound"]  # the old check lets it through
    check = compare("h_out", h, model.h_out, model.h_sigma)
    assert check.z_rms > check.rms_bound, check


def test_one_row_twenty_percent_off_fails_the_rows_bound_the_global_bound_passes(tiny):
    model = tiny["model"]
    h, _ = _noisy(model, MEASURED)
    h[4] *= 1.2
    assert frobenius_error(h, model.h_out) <= tiny["bound"]
    check = compare("h_out", h, model.h_out, model.h_sigma)
    assert check.row_rms > check.row_bound and check.worst_row == 4, check


def test_one_element_off_by_one_and_a_half_times_its_rows_rms_fails_the_element_bound(tiny):
    model = tiny["model"]
    h, _ = _noisy(model, MEASURED)
    h[2, 7] += 1.5 * np.sqrt(np.mean(model.h_out[2] ** 2))
    check = compare("h_out", h, model.h_out, model.h_sigma)
    assert check.z_max > check.z_bound and check.worst == (2, 7) and check.row_rms <= check.row_bound, check


def test_a_slot_the_step_must_not_write_and_a_written_row_off_both_fail(tiny):
    model = tiny["model"]
    h, caches = _noisy(model, MEASURED)
    at = np.argwhere(~model.written)[0]
    caches[2][1][tuple(at)] += 1.0
    row = np.argwhere(model.written)[0]
    caches[1][0][row[0], row[1], row[2]] *= 1.2  # one written K row 20% off
    failed = [j.what for j in judge_step([h] * 4, caches, model) if not j.ok]
    assert any("must not write" in w for w in failed), failed
    assert any("rows the step writes" in w and "worst row" in w for w in failed), failed


def test_a_rank_whose_copy_differs_fails(tiny):
    model = tiny["model"]
    h, caches = _noisy(model, MEASURED)
    other = h.copy()
    other[0, 0] = np.nextafter(other[0, 0], np.inf)
    failed = [j.what for j in judge_step([h, h, other, h], caches, model) if not j.ok]
    assert failed == ["h_out elements where the ranks' copies differ"], failed


def test_the_limits_hold_for_gaussian_draws_and_grow_slowly():
    rng = np.random.default_rng(1)
    z = rng.standard_normal(100_000)
    assert np.abs(z).max() <= z_limit(z.size) and np.sqrt(np.mean(z * z)) <= rms_limit(z.size)
    assert 6.5 < z_limit(10_000) < z_limit(1_000_000) < 8.0


def test_against_the_emulation_ties_pass_and_an_independent_error_fails(tiny):
    """The kernel-emulation bound (``tie_rms``) sits below two independent draws of the formats' error (rms
    0.59 σ apart): a kernel whose error is its own, not the emulation's but for ties, fails it."""
    model = tiny["model"]
    h, caches = _noisy(model, MEASURED)
    rng = np.random.default_rng(5)
    tie = h + np.where(rng.random(h.shape) < 0.01, 0.5 * model.h_sigma, 0.0)  # 1% of the elements flipped
    judged = judge_step([h] * 4, caches, model, ([tie] * 4, caches))
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]
    other, other_caches = _noisy(model, MEASURED, seed=9)
    failed = [j.what for j in judge_step([h] * 4, caches, model, ([other] * 4, other_caches)) if not j.ok]
    assert any("h_out of rank 0 against the emulation's, rms" in w for w in failed), failed
    assert any("layer 0's K/V cache rows written" in w for w in failed), failed
