"""The drafter's check decides on the worst of the four ranks, at each of its bounds: float64-exact when
emulated, the formats' error bound on the GPUs, NaN never."""

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.plugin import judge_ranks

# The exact schedule's bound (emulation.EXACT_TOLERANCE), written out: a loosened bound must fail these tests.
EXACT_TOLERANCE = 1e-12

REF = np.random.default_rng(0).standard_normal((4, 64))
BOUND = 0.05


def _ranks(bad_rank: int | None = None, delta: np.ndarray | float = 0.0) -> list[np.ndarray]:
    outs = [REF.copy() for _ in range(4)]
    if bad_rank is not None:
        outs[bad_rank] = outs[bad_rank] + delta
    return outs


def test_exact_ranks_pass_both_ways():
    for exact in (True, False):
        r = judge_ranks(_ranks(), REF, BOUND, exact)
        assert r.error is None and r.rel_error == 0.0


@pytest.mark.parametrize("bad_rank", [0, 3])
@pytest.mark.parametrize(("scale", "ok"), [(0.5, True), (2.0, False)])
def test_emulated_one_rank_at_the_exact_tolerance(bad_rank, scale, ok):
    outs = _ranks(bad_rank)
    i = np.unravel_index(np.argmax(np.abs(REF)), REF.shape)
    outs[bad_rank][i] += scale * EXACT_TOLERANCE * np.abs(REF).max()
    r = judge_ranks(outs, REF, BOUND, exact=True)
    assert (r.error is None) is ok
    if not ok:
        assert r.error.endswith(f"on rank {bad_rank}") and r.rel_error == pytest.approx(2 * EXACT_TOLERANCE)


@pytest.mark.parametrize(("scale", "ok"), [(0.9, True), (1.1, False)])
def test_on_the_gpus_one_rank_at_the_formats_bound(scale, ok):
    """A relative Frobenius error of ``scale`` x the bound on rank 2, far over the exact tolerance: the
    GPUs' check takes the formats' bound, not the emulation's."""
    r = judge_ranks(_ranks(2, scale * BOUND * REF), REF, BOUND, exact=False)
    assert (r.error is None) is ok
    assert r.rel_error == pytest.approx(scale * BOUND)
    assert judge_ranks(_ranks(2, scale * BOUND * REF), REF, BOUND, exact=True).error is not None


@pytest.mark.parametrize("exact", [True, False])
def test_a_nan_on_any_rank_fails(exact):
    outs = _ranks()
    outs[1][2, 5] = np.nan
    assert "rank 1" in judge_ranks(outs, REF, BOUND, exact).error


class _Built:
    """A launch group's stand-in: four ranks' outputs as given, healthy unless told."""

    def __init__(self, device: str, h_outs: list[np.ndarray], health: list[int] | None = None):
        self.device, self.h_outs, self.health = device, h_outs, health or [0, 0, 0, 0]

    def load(self, inputs):
        self.loaded = inputs

    def check(self):
        return [{"h_out": h, "health": self.health if r == 3 else [0, 0, 0, 0]} for r, h in enumerate(self.h_outs)]


@pytest.fixture
def check(monkeypatch, tmp_path):
    """``PLUGIN.check`` on a small problem with the model's pieces recorded and served small: the full-size
    float64 model (2.6 GB of weights a layer) is the slow emulated sweep's to run
    (test_timed_path.py); here, that ``check`` asks for the step its inputs describe and judges by device."""
    import torch

    from kerneltune.kernels.drafter_wide import numerics, plugin, reference
    from kerneltune.kernels.drafter_wide.plugin import PLUGIN, DrafterProblem

    problem = DrafterProblem(requests=2, qpr=3, context=8)
    inputs = PLUGIN.make_inputs(problem, {"context": 40}, seed=5)
    monkeypatch.setenv("KERNELTUNE_CACHE", str(tmp_path / "user"))  # the references kept by an earlier test
    asked = []
    monkeypatch.setattr(reference, "make_weights", lambda d, seed: asked.append(("weights", seed)) or "W")
    monkeypatch.setattr(reference, "make_inputs", lambda d, *a: asked.append(("step", *a)) or "S")

    def served(dims, weights, step):
        assert (weights, step) == ("W", "S") and dims.layers == problem.layers
        return torch.from_numpy(REF), BOUND

    monkeypatch.setattr(numerics, "bounded_reference", served)
    plugin._reference.cache_clear()

    def run(built, again: bool = False):
        asked.clear()
        if not again:
            plugin._reference.cache_clear()
        result = PLUGIN.check(built, problem, inputs)
        assert built.loaded is inputs
        # The weights from the seed, the step from seed + 1 (none once a rank's health buffer failed, or kept from
        # the check before).
        assert sorted(asked, key=str) in ([], [("step", 2, 3, [40, 40], 6), ("weights", 5)])
        run.asked = list(asked)
        return result

    yield run
    plugin._reference.cache_clear()


def test_the_check_takes_the_exact_tolerance_emulated_and_the_formats_bound_on_the_gpus(check):
    near = [REF.copy(), REF.copy(), REF * (1 + 0.5 * BOUND), REF.copy()]  # rank 2 off by half the bound
    assert check(_Built("rocm", near)).error is None
    assert "on rank 2" in check(_Built("emulated", near)).error
    assert check(_Built("emulated", [REF.copy()] * 4)).error is None
    far = [REF.copy(), REF * (1 + 2 * BOUND), REF.copy(), REF.copy()]
    assert "on rank 1" in check(_Built("rocm", far)).error


def test_a_missed_deadline_is_the_check_s_error(check):
    r = check(_Built("emulated", [REF.copy()] * 4, health=[7, 3, 2, 1]))
    assert r.error.startswith("rank 3, site 7")


def test_a_second_check_of_the_same_inputs_draws_no_model_again(check):
    """A sweep checks each layout of a bucket on one set of inputs: the full model is drawn and run once."""
    assert check(_Built("emulated", [REF.copy()] * 4)).error is None and check.asked
    assert check(_Built("rocm", [REF.copy()] * 4), again=True).error is None and check.asked == []


def test_a_check_in_another_process_reads_the_reference_from_the_users_cache(check, monkeypatch, tmp_path):
    """A resumed sweep, another sweep of the bucket or ``verify`` (which has no folder of the run's) reads what a
    sweep's worker computed; the engine's folder of the run is not where it looks."""
    from kerneltune.files.reference_cache import ENV
    from kerneltune.kernels.drafter_wide import plugin

    monkeypatch.setenv(ENV, str(tmp_path / "run"))
    assert check(_Built("emulated", [REF.copy()] * 4)).error is None and check.asked
    assert len(list((tmp_path / "user/references").glob("*.npz"))) == 1 and not (tmp_path / "run").exists()
    monkeypatch.delenv(ENV)  # verify's worker
    plugin._reference.cache_clear()  # as a new process
    assert check(_Built("emulated", [REF.copy()] * 4), again=True).error is None and check.asked == []
    near = [REF.copy(), REF.copy(), REF * (1 + 0.5 * BOUND), REF.copy()]  # the bound came back too
    assert check(_Built("rocm", near), again=True).error is None
    assert "on rank 1" in check(_Built("rocm", [REF.copy(), REF * (1 + 2 * BOUND), REF.copy(), REF.copy()]),
                                again=True).error
