"""Bench targets: parsed with errors that name the entry, judged on a run's rows (CPU)."""

import json

import pytest

from kerneltune.kernels.ranker_attention.bench.runner import BASELINES
from kerneltune.kernels.ranker_attention.bench.spec import load_spec, result_verdicts
from kerneltune.kernels.ranker_attention.bench.targets import Target, evaluate, parse_targets

from ....paths import REPO


def row(shape, cap, impl, ms, **extra):
    return {"shape": shape, "cap_method": cap, "impl": impl, "median_ms": ms, **extra}


ROWS = [
    row("a", "tanh", "kerneltune", 1.0, useful_tflops=450.0),
    row("a", "tanh", "flex", 2.4),
    row("a", "tanh", "cudnn_dense", 0.7, dense_tflops=640.0),
    row("a", "tanh", "jax_mgpu_dense", 0.8, dense_tflops=500.0),
    row("a", "none", "kerneltune", 0.5, useful_tflops=600.0),
    row("a", "none", "flex", 0.8),
    {"shape": "a", "cap_method": "none", "impl": "cudnn_dense", "error": "RuntimeError: no cuDNN"},
    row("b", "tanh", "kerneltune", 1.0, useful_tflops=200.0),
    row("b", "tanh", "flex", 4.5),
]
HEAD_DIMS = {"a": 128, "b": 64}


def test_speedups_and_dense_fractions_are_judged_per_shape_and_cap():
    targets = [Target("flex tanh D128", "speedup", ("tanh",), (128,), 2.5, over="flex"),
               Target("flex tanh D64", "speedup", ("tanh",), (64,), 4.0, over="flex"),
               Target("dense D128", "dense_fraction", ("tanh", "none"), (128,), 0.7),
               Target("dense D64", "dense_fraction", ("tanh",), (64,), 0.7)]
    v = {(x["target"], x["shape"], x["cap_method"]): (x["value"], x["verdict"])
         for x in evaluate(targets, ROWS, HEAD_DIMS)}
    assert v[("flex tanh D128", "a", "tanh")] == (pytest.approx(2.4), "missed")
    assert v[("flex tanh D64", "b", "tanh")] == (pytest.approx(4.5), "met")
    # Against the faster dense rate (cuDNN's 640), not the slower one.
    assert v[("dense D128", "a", "tanh")] == (pytest.approx(450 / 640), "met")
    # cuDNN failed on the no-cap row, but the dense problem is the shape's, timed on the tanh row.
    assert v[("dense D128", "a", "none")] == (pytest.approx(600 / 640), "met")
    # No dense baseline ran on the shape at all: nothing to judge against, which is not a pass.
    assert v[("dense D64", "b", "tanh")] == (None, "n/a")
    assert len(v) == 5


def test_the_dense_bound_is_the_fastest_timing_of_the_shapes_dense_problem():
    # Run F's bench: cuDNN's dense T=8k took 3.27 ms on one cap's row and 3.62 on another's.
    rows = [row("a", "tanh", "kerneltune", 1.0, useful_tflops=400.0),
            row("a", "tanh", "cudnn_dense", 3.62, dense_tflops=500.0),
            row("a", "none", "cudnn_dense", 3.27, dense_tflops=553.0)]
    [v] = evaluate([Target("dense", "dense_fraction", ("tanh",), (128,), 0.9)], rows, HEAD_DIMS)
    assert v["value"] == pytest.approx(400 / 553) and v["verdict"] == "missed"
    # A slow machine's rates: under 1 TFLOP/s the bound is still the dense timing's, nothing else.
    slow = [row("a", "tanh", "kerneltune", 1.0, useful_tflops=0.3),
            row("a", "tanh", "cudnn_dense", 3.0, dense_tflops=0.5)]
    [v] = evaluate([Target("dense", "dense_fraction", ("tanh",), (128,), 0.5)], slow, HEAD_DIMS)
    assert v["value"] == pytest.approx(0.3 / 0.5) and v["verdict"] == "met"


def test_a_paired_fraction_is_judged_before_the_unpaired_bound_and_says_so():
    # The unpaired bound (cuDNN's one lucky 640) reads 0.70; the rounds taken in turns read 0.74.
    rows = [{**ROWS[0], "paired_dense_fraction": 0.74}, *ROWS[1:4]]
    target = Target("dense", "dense_fraction", ("tanh",), (128,), 0.72)
    [v] = evaluate([target], rows, HEAD_DIMS)
    assert (v["value"], v["verdict"], v["bound"]) == (pytest.approx(0.74), "met", "paired")
    assert v["unpaired_value"] == pytest.approx(450 / 640) and v["note"] == "rounds in turns; unpaired 0.70"
    [old] = evaluate([target], ROWS[:4], HEAD_DIMS)  # a result from before the paired rounds
    assert (old["value"], old["verdict"], old["bound"]) == (pytest.approx(450 / 640), "missed", "fastest unpaired")


def test_a_settled_fraction_is_judged_before_the_short_turns_and_carries_both_others():
    # Run AJ: in short turns each kernel ran at the clock the other left; settled turns time each at its own.
    rows = [{**ROWS[0], "paired_dense_fraction": 0.74, "settled_dense_fraction": 0.83}, *ROWS[1:4]]
    [v] = evaluate([Target("dense", "dense_fraction", ("tanh",), (128,), 0.8)], rows, HEAD_DIMS)
    assert (v["value"], v["verdict"], v["bound"]) == (pytest.approx(0.83), "met", "settled")
    assert v["paired_value"] == pytest.approx(0.74) and v["unpaired_value"] == pytest.approx(450 / 640)
    assert v["note"] == "settled turns; short turns 0.74; unpaired 0.70"


def test_a_failed_kerneltune_row_is_not_judged_met():
    rows = [{**ROWS[0], "error": "RuntimeError: launch failed"}, ROWS[1]]
    [v] = evaluate([Target("t", "speedup", ("tanh",), (128,), 1.0, over="flex")], rows, HEAD_DIMS)
    assert v["verdict"] == "n/a"
    # Every row of a shape and cap failed: judged n/a, not a crash.
    [v] = evaluate([Target("t", "speedup", ("tanh",), (128,), 1.0, over="flex")], rows[:1], HEAD_DIMS)
    assert v["verdict"] == "n/a"


@pytest.mark.parametrize(("entry", "message"), [
    ({"metric": "speedup", "over": "flex", "caps": ["tanh"], "head_dims": [128], "at_least": 2},
     "missing field 'name'"),
    ({"name": "x", "metric": "fastness", "caps": [], "head_dims": [], "at_least": 1},
     "metric: 'fastness' is not one of speedup, dense_fraction, kernel_over_call"),
    ({"name": "x", "metric": "speedup", "caps": [], "head_dims": [], "at_least": 1},
     "over: a speedup names the implementation it is over; a dense fraction does not$"),
    ({"name": "x", "metric": "dense_fraction", "caps": [], "head_dims": [], "at_least": 0}, "at_least"),
])
def test_malformed_targets_name_the_entry(entry, message):
    with pytest.raises(ValueError, match=message) as e:
        parse_targets([entry], "bench.toml")
    assert str(e.value).startswith("bench.toml: targets[0]" + (f" ({entry['name']}): " if "name" in entry else ": "))


def test_a_result_without_recorded_targets_is_judged_against_its_bench_file(tmp_path):
    spec = tmp_path / "bench.toml"
    spec.write_text('[[shapes]]\nname = "a"\nproblem = { batch = 1, seq_len = 256, q_heads = 1, kv_heads = 1, '
                    'head_dim = 128 }\nbounds = { history = [100, 100], candidates = 8 }\n'
                    '[[targets]]\nname = "flex"\nmetric = "speedup"\nover = "flex"\ncaps = ["tanh"]\n'
                    'head_dims = [128]\nat_least = 2.0\n')
    result = {"shapes": str(spec), "rows": ROWS[:2]}
    verdicts, source = result_verdicts(result)
    assert [v["verdict"] for v in verdicts] == ["met"] and str(spec) in source
    assert load_spec(spec).verdicts(ROWS[:2]) == verdicts
    recorded = {**result, "targets": [{"target": "t", "verdict": "missed"}]}
    assert result_verdicts(json.loads(json.dumps(recorded)))[0] == recorded["targets"]
    assert result_verdicts({"shapes": str(tmp_path / "gone.toml"), "rows": ROWS})[0] == []


def test_bench_file_parses():
    spec = load_spec(REPO / "search_spaces/bench_ranker_attention.toml")
    assert [s.name for s in spec.shapes] == ["d128-b16-t2k-gqa", "d128-b4-t8k", "d64-b64-t1k",
                                             "d128-b8-t4k-ragged", "d64-b64-t1k-ragged", "d128-b8-t4k-gqa8"]
    assert [s.name for s in spec.shapes if s.ragged] == ["d128-b8-t4k-ragged", "d64-b64-t1k-ragged"]
    for s in spec.shapes:  # a ragged row's history spans [T/4, T - candidates]
        t = s.problem["seq_len"]
        assert not s.ragged or s.history == (t // 4, t - s.candidates)
    assert spec.caps == {"tanh": 30.0, "none": 0.0, "tanh_approx": 30.0}
    assert {t.metric for t in spec.targets} == {"speedup", "dense_fraction", "kernel_over_call"}
    assert len(spec.targets) == 12
    # Every speedup is over a baseline the bench runs.
    assert {t.over for t in spec.targets if t.metric == "speedup"} <= set(BASELINES)


def test_the_user_call_is_judged_by_kernel_time_over_call_time():
    rows = [row("a", "none", "kerneltune", 1.0, kernel_over_call=0.99),
            row("b", "none", "kerneltune", 1.0, kernel_over_call=0.90), row("b", "tanh", "kerneltune", 1.0)]
    verdicts = evaluate([Target("call", "kernel_over_call", ("none", "tanh"), (64, 128), 0.98)], rows, HEAD_DIMS)
    assert [(v["shape"], v["cap_method"], v["verdict"]) for v in verdicts] == [
        ("a", "none", "met"), ("b", "none", "missed"), ("b", "tanh", "n/a")]


@pytest.mark.parametrize(("useful", "verdict"), [(448.0, "met"), (447.0, "missed")])
def test_a_dense_fraction_is_met_from_its_threshold_on(useful, verdict):
    """0.70 of cuDNN's 640 is 448 useful TFLOP/s: met there, missed a TFLOP/s below."""
    rows = [row("a", "tanh", "kerneltune", 1.0, useful_tflops=useful), ROWS[2]]
    [v] = evaluate([Target("dense", "dense_fraction", ("tanh",), (128,), 0.7)], rows, HEAD_DIMS)
    assert v["verdict"] == verdict


def test_each_verdict_is_the_whole_record_and_a_speedup_is_their_time_over_ours():
    """Ours at 0.8 ms against flex's 2.4 ms: 3.0x (a product of the two times would read 1.92)."""
    rows = [row("a", "tanh", "kerneltune", 0.8, useful_tflops=450.0), ROWS[1], ROWS[2],
            row("b", "tanh", "flex", 4.5)]  # b: kerneltune never ran
    targets = [Target("flex", "speedup", ("tanh",), (128, 64), 2.5, over="flex"),
               Target("dense", "dense_fraction", ("tanh",), (128,), 0.8),
               Target("call", "kernel_over_call", ("tanh",), (64,), 0.98)]
    assert evaluate(targets, rows, HEAD_DIMS) == [
        {"target": "flex", "shape": "a", "cap_method": "tanh", "value": pytest.approx(3.0), "at_least": 2.5,
         "verdict": "met"},
        {"target": "flex", "shape": "b", "cap_method": "tanh", "value": None, "at_least": 2.5, "verdict": "n/a"},
        {"target": "dense", "shape": "a", "cap_method": "tanh", "value": pytest.approx(450 / 640), "at_least": 0.8,
         "verdict": "missed", "bound": "fastest unpaired", "note": "fastest unpaired timing"},
        {"target": "call", "shape": "b", "cap_method": "tanh", "value": None, "at_least": 0.98, "verdict": "n/a"}]
    [v] = evaluate([targets[1]], [{**rows[0], "paired_dense_fraction": 0.81}], HEAD_DIMS)  # no dense row ran
    assert (v["verdict"], v["bound"], v["note"], v["unpaired_value"]) == ("met", "paired", "rounds in turns", None)
