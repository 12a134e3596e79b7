"""The authoring API's defaults and its check: what a kernel author leaves out is filled in, and the check
fails a kernel that leaves outputs unwritten, is off by more than its dtype allows, or returns nothing."""

import logging

import numpy as np
import pytest

import kerneltune as kt
from kerneltune.author.check import compare, tolerance_for
from kerneltune.seams.protocols import Capability

from .numpy_kernels import Allocates, OffByAThousandth, RefusesLoudly, ReturnsNothing, RowScale, SkipsARow


def checked(kernel, rows=8, config=None):
    p = kernel.problem({"rows": rows, "cols": 16, "dtype": "float32"})
    built = kernel.build(p, config or {"block": 2, "order": "forward"})
    return kernel.check(built, p, kernel.make_inputs(p, {}, 7))


def test_what_an_author_leaves_out_is_filled_in():
    k = RowScale()
    assert k.name == "row-scale"  # the class name in kebab case
    assert k.backend == "host"  # numpy: the module imports neither torch nor jax
    assert k.tunables == {"block", "order"} and k.problem_fields == {"rows", "cols", "dtype"}
    assert k.hard_bucket_fields == ("dtype",)  # a config never crosses a non-numeric field
    assert Capability.OWN_SPACE in k.capabilities
    assert k.heuristic(k.problem({"rows": 6, "cols": 1, "dtype": "float32"})) == {"block": 1, "order": "forward"}
    assert len(k.source_hash()) == 16


def test_a_problem_must_have_exactly_the_buckets_fields():
    with pytest.raises(ValueError, match=r"missing \['dtype'\]"):
        RowScale().problem({"rows": 8, "cols": 16})
    with pytest.raises(ValueError, match=r"unknown \['batch'\]"):
        RowScale().problem({"rows": 8, "cols": 16, "dtype": "float32", "batch": 1})


def test_hooks_get_a_problem_and_a_config_with_named_fields():
    k = RowScale()
    p = k.problem({"rows": 8, "cols": 16, "dtype": "float32"})
    assert k.infeasibility(p, {"block": 3, "order": "forward"}) == "block 3 does not divide 8 rows"
    assert k.infeasibility(p, {"block": 4, "order": "forward"}) is None
    assert k.flops(p, None) == 128.0
    assert isinstance(k.tuned(p), kt.Config)


def test_a_refusal_that_raises_is_named_not_raised():
    k = RefusesLoudly()
    why = k.infeasibility(k.problem({"rows": 8, "cols": 16, "dtype": "float32"}), {"block": 8, "order": "forward"})
    assert why.startswith("RefusesLoudly.refuses raised ValueError: invalid literal")


def test_a_right_kernel_passes_every_config():
    k = RowScale()
    for block in (1, 2, 4, 8):
        for order in ("forward", "backward"):
            result = checked(k, config={"block": block, "order": order})
            assert result.error is None and result.rel_error == 0.0


def test_an_unwritten_row_fails_even_where_the_buffer_held_the_answer():
    """The output argument is NaN before the judged call: a first call's right values cannot pass for it."""
    result = checked(SkipsARow())
    assert result.error.startswith("the output: 16 of 128 elements NaN or never written (the first at (7, 0))")


def test_an_error_over_the_dtypes_tolerance_fails_and_one_under_passes():
    assert tolerance_for("float32") == 1e-4 and tolerance_for("bfloat16") == 3e-2 and tolerance_for("int32") == 0
    result = checked(OffByAThousandth())
    assert "error 0.001 of the reference's largest magnitude, over the tolerance 0.0001" in result.error

    class Loose(OffByAThousandth):
        tolerance = 2e-3

    assert checked(Loose()).error is None


def test_a_kernel_that_returns_nothing_is_told_what_to_return():
    assert checked(ReturnsNothing()).error.startswith("build's callable must return its output array(s)")


def test_a_kernel_that_allocates_its_output_is_checked_on_it():
    assert checked(Allocates()).error is None


@pytest.mark.parametrize(("out", "ref", "says"), [
    (np.ones(3), np.ones(4), "has shape (3,), the reference (4,)"),
    (np.array([1.0, np.inf]), np.array([1.0, 2.0]), "infinities differ"),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0]), None),
    (np.zeros(0), np.zeros(0), None),
    (np.array([1, 2]), np.array([1, 3]), "error 0.333"),  # integers are exact
])
def test_compare_judges_shapes_infinities_and_integers(out, ref, says):
    error, _ = compare([out], [ref], [str(out.dtype)], None)
    assert (error is None) if says is None else (says in error)


def test_the_heuristic_that_a_problem_refuses_is_replaced_by_one_it_runs(caplog):
    class BadGuess(RowScale):
        def heuristic(self, p):
            return {"block": 8, "order": "forward"}

    k = BadGuess()
    with caplog.at_level(logging.WARNING, logger="kerneltune.tables"):
        config = k.tuned(rows=6, cols=4, dtype="float32")
    assert config == {"block": 1, "order": "forward"}
    assert "the heuristic config {'block': 8, 'order': 'forward'} does not run" in caplog.text


def test_no_config_runs_the_problem_is_one_clear_error():
    class EvenBlocks(RowScale):
        params = {"block": [2, 4], "order": ["forward"]}

    with pytest.raises(ValueError, match=r"even-blocks: no config of .*:EvenBlocks runs Problem\(rows=7"):
        EvenBlocks().tuned(rows=7, cols=4, dtype="float32")


def test_fields_are_immutable_hashable_and_equal_to_their_dict():
    c = kt.Config(block=2, order="forward")
    assert c.block == 2 and c["order"] == "forward" and c == {"block": 2, "order": "forward"}
    assert hash(c) == hash(kt.Config({"order": "forward", "block": 2}))
    with pytest.raises(AttributeError, match="immutable"):
        c.block = 3
    with pytest.raises(AttributeError, match="no field 'warps'"):
        _ = c.warps


def test_a_triton_or_pallas_kernel_s_times_on_a_cpu_are_void_and_a_numpy_one_s_are_not(monkeypatch):
    """Judged by what the defining module imports (``interpreted`` overrides it), and only on a CPU."""
    import sys
    import types

    def kernel_in(module_name, imported, **attrs):
        module = types.ModuleType(module_name)
        for alias, name in imported.items():
            setattr(module, alias, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, module_name, module)
        return type("K", (kt.Kernel,), {"__module__": module_name, "params": {"a": [1]}, "buckets": {"b": {"n": 1}},
                                        **attrs})()

    cpu, gpu = {"device_kind": "cpu"}, {"device_kind": "nvidia-h200"}
    triton = kernel_in("kt_test_triton", {"triton": "triton", "tl": "triton.language"})
    assert triton.void_timings(cpu) == ("k runs in Triton's interpreter on this CPU, so its times here say nothing "
                                        "of its speed on the GPU it is written for")
    assert triton.void_timings(gpu) is None
    assert "Pallas' interpreter" in kernel_in("kt_test_pallas", {"pl": "jax.experimental.pallas"}).void_timings(cpu)
    plain = kernel_in("kt_test_numpy", {"np": "numpy"})
    assert plain.void_timings(cpu) is None and Capability.VOID_TIMINGS in plain.capabilities
    assert kernel_in("kt_test_own", {}, interpreted=True).void_timings(cpu).startswith(
        "k runs in an interpreter on this CPU")
    assert kernel_in("kt_test_off", {"triton": "triton"}, interpreted=False).void_timings(cpu) is None
