"""The output check can fail, at each of its bounds: the seed's double counting, NaN, padding that is not
exactly 0 with an LSE of -inf, and errors just over each tolerance (just under it passes)."""

import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.cap import CapMethod
from kerneltune.kernels.ranker_attention.inputs import ranker_bounds
from kerneltune.kernels.ranker_attention.reference import reference_f64
from kerneltune.kernels.ranker_attention.verify import compare

from .test_reference import RNG, _qkv

# bfloat16's bounds in verify._TOLERANCE: per element |err| <= ATOL + RTOL * |ref|, and the whole output's
# relative Frobenius error <= FRO. Written here, not imported: a loosened table must fail these tests.
ATOL, RTOL, FRO = 2e-2, 2e-2, 1e-2
# The LSE's absolute bound, and what a cap method adds to both bounds (cap.CAP_TOLERANCE): written out too.
LSE_ATOL = 1e-3
CAP_TOLERANCE = {CapMethod.NONE: 0.0, CapMethod.TANH: 0.0, CapMethod.TANH_APPROX: 2e-2}


@pytest.fixture(scope="module")
def case():
    """One row with history, candidates and padding on both sides, and its float64 reference."""
    q, k, v = _qkv(1, 128, 2, 1, 64)
    b = np.array([[8, 60, 60, 100]], np.int32)
    o, lse = reference_f64(q, k, v, b, sm_scale=0.125)
    return o, lse, b


def _check(out, lse, case, method=CapMethod.NONE):
    o, ref_lse, b = case
    return compare(out, lse, o, ref_lse, b, "bfloat16", method)


def test_check_rejects_double_counted_pairs():
    """Counting the history keys of a block twice (the seed's hazard) must fail the check."""
    q, k, v = _qkv(2, 128, 2, 2, 64)
    b = ranker_bounds(2, 128, (60, 70), 20, RNG)
    ref_o, ref_l = reference_f64(q, k, v, b, sm_scale=0.125)
    dup_o, dup_l = reference_f64(np.concatenate([q, q], axis=1), np.concatenate([k, k], axis=1),
                                 np.concatenate([v, v], axis=1), b, sm_scale=0.125)
    # Same softmax weights, but the lse grows by log 2 for rows with history: the check must see it.
    c = compare(dup_o[:, :128], dup_l[:, :, :128] + np.log(2.0), ref_o, ref_l, b, "bfloat16", CapMethod.NONE)
    assert not c.ok and any("lse" in e for e in c.errors)


def test_the_reference_passes_itself(case):
    o, lse, _ = case
    assert _check(o, lse, case).ok


def test_nan_fails(case):
    o, lse, _ = case
    bad = o.copy()
    bad[0, 30, 0, 0] = np.nan
    assert "NaN" in _check(bad, lse, case).errors[0]
    bad_lse = lse.copy()
    bad_lse[0, 1, 30] = np.nan
    assert "NaN" in _check(o, bad_lse, case).errors[0]


@pytest.mark.parametrize("row", [0, 7, 100, 127])  # padding before the history and after the candidates
def test_padding_rows_must_be_exactly_zero(case, row):
    o, lse, _ = case
    bad = o.copy()
    bad[0, row, 1, 5] = 1e-6
    assert any("padding" in e and "out" in e for e in _check(bad, lse, case).errors)


@pytest.mark.parametrize("value", [-1e30, 0.0, np.inf])
def test_padding_rows_must_have_an_lse_of_minus_infinity(case, value):
    o, lse, _ = case
    bad = lse.copy()
    bad[0, 0, 110] = value
    assert any("padding rows: lse" in e for e in _check(o, bad, case).errors)


@pytest.mark.parametrize(("scale", "ok"), [(0.9, True), (1.1, False)])
def test_one_element_at_the_elementwise_bound(case, scale, ok):
    o, lse, _ = case
    bad = o.copy()
    bad[0, 40, 0, 3] += scale * (ATOL + RTOL * abs(o[0, 40, 0, 3]))
    c = _check(bad, lse, case)
    assert c.ok is ok, c.errors
    if not ok:
        assert any("beyond" in e for e in c.errors)


@pytest.mark.parametrize(("rel", "ok"), [(0.5 * FRO, True), (1.5 * FRO, False)])
def test_a_small_error_everywhere_at_the_frobenius_bound(case, rel, ok):
    """Every element within its own bound, the whole output off by ``rel``: only the Frobenius norm sees it."""
    o, lse, _ = case
    c = _check(o * (1 + rel), lse, case)
    assert c.ok is ok, c.errors
    if not ok:
        assert c.errors == (f"out: relative Frobenius error {c.rel_fro:.3g} > {FRO:g}",)


@pytest.mark.parametrize("method", [CapMethod.NONE, CapMethod.TANH_APPROX])
@pytest.mark.parametrize(("scale", "ok"), [(0.9, True), (1.1, False)])
def test_the_lse_at_its_bound(case, method, scale, ok):
    """One valid row's LSE off by just under / over its bound (the cap's own tolerance added)."""
    o, lse, _ = case
    bad = lse.copy()
    bad[0, 1, 70] += scale * (LSE_ATOL + CAP_TOLERANCE[method])
    c = _check(o, bad, case, method)
    assert c.ok is ok, c.errors
    if not ok:
        assert c.errors[0].startswith("lse: max error")


def test_an_infinite_lse_on_a_valid_row_fails(case):
    o, lse, b = case
    bad = lse.copy()
    bad[0, 0, 20] = -np.inf
    assert any(e.startswith("lse:") for e in _check(o, bad, case).errors)
    # Every valid row sees at least one key, so its LSE is finite even where a reference says otherwise.
    assert any(e.startswith("lse:") for e in compare(o, bad, o, bad, b, "bfloat16", CapMethod.NONE).errors)


def test_the_figures_it_reports(case):
    o, lse, _ = case
    c = _check(o, lse, case)
    assert (c.max_abs, c.rel_fro, c.lse_max_abs) == (0.0, 0.0, 0.0)
    bad, bad_lse = o.copy(), lse.copy()
    bad[0, 40, 0, 3] += 0.25
    bad_lse[0, 1, 70] += 0.5
    c = _check(bad, bad_lse, case)
    assert c.max_abs == pytest.approx(0.25) and c.lse_max_abs == pytest.approx(0.5)
    assert c.errors[0].startswith("out: 1 elements beyond atol=0.02 + rtol=0.02*|ref|; "
                                  "first at [b,t,h,d]=[0, 40, 0, 3]")
    nan = o.copy()
    nan[0, 30, 0, 0] = np.nan
    assert _check(nan, lse, case).rel_fro == np.inf


def test_exactly_at_a_bound_passes(case):
    """A reference of exactly 0 makes the elementwise bound exactly ATOL, and of the LSE exactly its bound."""
    o, lse, b = case
    ref, ref_lse = o.copy(), lse.copy()
    ref[0, 40, 0, 3], ref_lse[0, 1, 70] = 0.0, 0.0
    out, out_lse = ref.copy(), ref_lse.copy()
    out[0, 40, 0, 3], out_lse[0, 1, 70] = ATOL, LSE_ATOL
    assert compare(out, out_lse, ref, ref_lse, b, "bfloat16", CapMethod.NONE).ok


def test_the_cap_s_tolerance_widens_the_elementwise_bound_too(case):
    o, lse, _ = case
    bad = o.copy()
    bad[0, 40, 0, 3] += 0.9 * (ATOL + CAP_TOLERANCE[CapMethod.TANH_APPROX] + RTOL * abs(o[0, 40, 0, 3]))
    assert _check(bad, lse, case, CapMethod.TANH_APPROX).ok
    assert not _check(bad, lse, case, CapMethod.TANH).ok


def test_the_padding_messages_count_what_they_found(case):
    o, lse, _ = case
    bad, bad_lse = o.copy(), lse.copy()
    bad[0, 100:103, 1, 5] = 1e-6
    bad_lse[0, 0, 110] = 0.0
    assert _check(bad, bad_lse, case).errors == ("padding rows: 3 elements of out are not exactly 0",
                                                 "padding rows: lse is not -inf")


def test_the_row_after_the_history_is_padding_when_no_candidate_starts_there():
    q, k, v = _qkv(1, 128, 1, 1, 64)
    b = np.array([[8, 60, 70, 100]], np.int32)  # rows 60-69: between the segments
    o, lse = reference_f64(q, k, v, b, sm_scale=0.125)
    bad = o.copy()
    bad[0, 60, 0, 0] = 1e-6
    assert compare(bad, lse, o, lse, b, "bfloat16", CapMethod.NONE).errors == (
        "padding rows: 1 elements of out are not exactly 0",)


def test_no_valid_row_and_an_empty_batch_pass_with_zero_errors():
    q, k, v = _qkv(1, 64, 1, 1, 64)
    b = np.array([[0, 0, 0, 0]], np.int32)
    o, lse = reference_f64(q, k, v, b, sm_scale=0.125)
    c = compare(o, lse, o, lse, b, "bfloat16", CapMethod.NONE)
    assert c.ok and (c.max_abs, c.rel_fro, c.lse_max_abs) == (0.0, 0.0, 0.0)
    empty = np.zeros((0, 64, 1, 64))
    c = compare(empty, np.zeros((0, 1, 64)), empty, np.zeros((0, 1, 64)), np.zeros((0, 4), np.int32), "bfloat16",
                CapMethod.NONE)
    assert c.ok and (c.max_abs, c.rel_fro, c.lse_max_abs) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("writes", ["the reference", "nothing", "another scale's reference", "no cap"])
def test_the_interpret_check_judges_what_the_kernel_wrote_over_poisoned_outputs(monkeypatch, writes):
    """``check_interpret`` on a stand-in kernel: it gets the interpreted, poisoned forward, fresh inputs of the
    seed, NaN outputs of the right shapes, and passes only the outputs of the float64 reference with the
    problem's scale and cap (a kernel that writes nothing leaves NaN, which fails)."""
    import jax.numpy as jnp

    from kerneltune.kernels.ranker_attention import kernel
    from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
    from kerneltune.kernels.ranker_attention.inputs import make_tensors
    from kerneltune.kernels.ranker_attention.verify import check_interpret

    problem = Problem(batch=1, seq_len=128, q_heads=2, kv_heads=1, head_dim=64, cap_method="tanh", cap=5.0,
                      sm_scale=0.5)
    config = KernelConfig.for_problem(problem)
    bounds = np.array([[8, 60, 60, 100]], np.int32)
    seen = {}

    def build_forward(p, c, *, interpret, poisoned):
        seen.update(problem=p, config=c, interpret=interpret, poisoned=poisoned)

        def forward(q, k, v, b, out0, lse0):
            seen.update(q=np.asarray(q.astype(jnp.float32)), out0=out0, lse0=lse0, bounds=np.asarray(b))
            if writes == "nothing":
                return out0, lse0
            scale = p.scale * (1.01 if writes == "another scale's reference" else 1.0)
            cap = {"cap_method": CapMethod.NONE} if writes == "no cap" else {"cap_method": p.cap_method, "cap": p.cap}
            o, lse = reference_f64(*(np.asarray(x.astype(jnp.float32)) for x in (q, k, v)), np.asarray(b),
                                   sm_scale=scale, **cap)
            return jnp.asarray(o, out0.dtype), jnp.asarray(lse, jnp.float32)

        return forward

    monkeypatch.setattr(kernel, "build_forward", build_forward)
    c = check_interpret(problem, config, bounds, seed=3)
    assert (seen["problem"], seen["config"], seen["interpret"], seen["poisoned"]) == (problem, config, True, True)
    q = np.asarray(jnp.asarray(make_tensors(problem, 3)[0], "bfloat16").astype(jnp.float32))
    np.testing.assert_array_equal(seen["q"], q)
    np.testing.assert_array_equal(seen["bounds"], bounds)
    assert seen["out0"].shape == (1, 128, 2, 64) and seen["out0"].dtype == jnp.bfloat16
    assert seen["lse0"].shape == (1, 2, 128) and seen["lse0"].dtype == jnp.float32
    assert bool(jnp.isnan(seen["out0"]).all()) and bool(jnp.isnan(seen["lse0"]).all())
    assert c.ok is (writes == "the reference"), c.errors
