"""On a Hopper GPU: every baseline runs on a small shape and agrees with its reference."""

import re
import time

import pytest

from kerneltune.kernels.ranker_attention.bench.runner import BASELINES, run_bench
from kerneltune.seams.measure import MeasureSettings

SHAPES = """
[[shapes]]
name = "small"
problem = { batch = 4, seq_len = 1024, q_heads = 4, kv_heads = 2, head_dim = 128 }
bounds = { history = [700, 700], candidates = 128 }

[[shapes]]
name = "ragged"
problem = { batch = 4, seq_len = 1024, q_heads = 4, kv_heads = 2, head_dim = 128 }
bounds = { history = [256, 896], candidates = 128, ragged = true }

[caps]
tanh = 30.0
none = 0.0

[[targets]]
name = "FlexAttention without a cap"
metric = "speedup"
over = "flex"
caps = ["none"]
head_dims = [128]
at_least = 1.0
"""


@pytest.mark.gpu
@pytest.mark.timing  # its paired and settled fractions are ratios of times: no other test on the GPU meanwhile
def test_every_baseline_runs_and_agrees(tmp_path):
    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)
    path, rows, _ = run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3))
    assert path.exists()
    assert not [r for r in rows if "error" in r], [r.get("error") for r in rows]
    for r in rows:
        assert r["rel_error"] < 2e-2 and r["median_ms"] > 0

    def impls(shape, cap):
        return {r["impl"] for r in rows if r["shape"] == shape and r["cap_method"] == cap}

    # The composite runs without a cap on even rows only, cuDNN with sequence lengths without a cap. The LSE
    # call is timed where it launches another config: under tanh, where the shipped table's entries use the
    # tanh instruction and its LSE bound sends the call to the exact fallback.
    assert impls("small", "none") == {"kerneltune", *BASELINES}
    assert impls("ragged", "none") == {"kerneltune", *BASELINES} - {"composite"}
    for shape in ("small", "ragged"):
        assert impls(shape, "tanh") == {"kerneltune", "kerneltune_lse", *BASELINES} - {"composite", "cudnn_varlen"}
    # The vendor's ragged path does the history work only: fewer pairs than ours, counted as its own.
    for shape in ("small", "ragged"):
        work = {r["impl"]: r["useful_tflops"] * r["median_ms"] for r in rows
                if r["shape"] == shape and r["cap_method"] == "none"}
        ours, varlen = work["kerneltune"], work["cudnn_varlen"]
        assert 0.5 * ours < varlen < ours
    for r in (r for r in rows if r["impl"] == "kerneltune_lse"):
        assert r["lse_max_abs"] < 1e-3
    for r in (r for r in rows if r["impl"] == "kerneltune"):  # the user's call timed beside the kernel
        assert r["call_loop_us"] > 0 and r["call_single_us"] > 0 and r["call_kernels"]
        assert 0 < r["kernel_over_call"] < 1.2 and len(r["kernel_over_call_rounds"]) == 7
        # Ours and each dense baseline in turns: the fraction from the rounds is near the unpaired one.
        assert set(r["paired_dense"]) == {"cudnn_dense", "jax_mgpu_dense"}, r.get("paired_dense_error")
        dense = [d for d in rows if d["shape"] == r["shape"] and d["cap_method"] == r["cap_method"]
                 and d["impl"] in r["paired_dense"]]
        unpaired = r["useful_tflops"] / max(d["dense_tflops"] for d in dense)
        assert 0.7 * unpaired < r["paired_dense_fraction"] < 1.3 * unpaired
        # The settled rounds: each turn timed after its clock followed it, the clocks read at its end.
        assert set(r["settled_dense"]) == {"cudnn_dense", "jax_mgpu_dense"}, r.get("settled_dense_error")
        assert 0.7 * unpaired < r["settled_dense_fraction"] < 1.3 * unpaired
        assert all(s["ours_sm_mhz"] > 0 and s["dense_sm_mhz"] > 0 for s in r["settled_dense"].values())


def test_a_failing_shape_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    """On CPU: a shape whose reference runs out of memory leaves an error row; the next shape still runs."""
    import kerneltune.kernels.ranker_attention.bench.runner as bench

    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)

    def fake(shape, method, cap, which, settings, seed=0):
        if method.value == "tanh":
            raise MemoryError("reference: 16 GiB")
        return [{"shape": shape.name, "cap_method": method.value, "cap": cap, "impl": "kerneltune",
                 "median_ms": 1.0}]

    monkeypatch.setattr(bench, "bench_shape", fake)
    monkeypatch.setattr(bench, "system_stamps", lambda: {"gpu": "NVIDIA H200"})
    path, rows, verdicts = run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3))
    assert [(r["shape"], r["cap_method"], r["impl"]) for r in rows] == [
        ("small", "tanh", "reference"), ("small", "none", "kerneltune"),
        ("ragged", "tanh", "reference"), ("ragged", "none", "kerneltune")]
    assert [v["verdict"] for v in verdicts] == ["n/a"] * 2  # flex never ran: no speedup to judge
    assert "MemoryError: reference: 16 GiB" in rows[0]["error"]
    assert path.read_text().count('"impl"') == 4


def test_a_resumed_bench_keeps_the_shapes_it_holds_and_reruns_failed_ones(tmp_path, monkeypatch):
    """On CPU: a first run whose ragged shape failed (its reference), then ``resume``: only the ragged shape runs
    again and the small one's rows are the first run's. Without ``resume`` every shape runs again."""
    import kerneltune.kernels.ranker_attention.bench.runner as bench

    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)
    ran, failing = [], [True]

    def fake(shape, method, cap, which, settings, seed=0):
        ran.append((shape.name, method.value))
        if shape.name == "ragged" and failing[0]:
            raise MemoryError("reference: 16 GiB")
        return [{"shape": shape.name, "cap_method": method.value, "cap": cap, "impl": "kerneltune",
                 "median_ms": float(len(ran))}]

    monkeypatch.setattr(bench, "bench_shape", fake)
    monkeypatch.setattr(bench, "system_stamps", lambda: {"gpu": "NVIDIA H200", "driver": "580"})
    first, rows, _ = run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3))
    assert [r["impl"] for r in rows] == ["kerneltune", "kerneltune", "reference", "reference"]
    ran.clear()
    failing[0] = False
    path, rows, _ = run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3), resume=True)
    assert path == first and ran == [("ragged", "tanh"), ("ragged", "none")]
    assert [(r["shape"], r["impl"], r["median_ms"]) for r in rows] == [
        ("small", "kerneltune", 1.0), ("small", "kerneltune", 2.0), ("ragged", "kerneltune", 1.0),
        ("ragged", "kerneltune", 2.0)]
    ran.clear()
    run_bench(shapes, BASELINES, tmp_path, MeasureSettings(max_seconds=0.3))
    assert len(ran) == 4


@pytest.mark.parametrize(("stamps", "culprit"), [
    ({"gpu": "NVIDIA H200", "driver": "581"}, "its driver is '580', this run's '581'"),
    ({"gpu": "NVIDIA H200", "driver": "580", "jax": "0.12"}, "its jax is None, this run's '0.12'"),
])
def test_a_bench_is_not_resumed_on_another_system(tmp_path, monkeypatch, stamps, culprit):
    import kerneltune.kernels.ranker_attention.bench.runner as bench

    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)
    monkeypatch.setattr(bench, "bench_shape", lambda shape, method, *a, **k: [
        {"shape": shape.name, "cap_method": method.value, "impl": "kerneltune", "median_ms": 1.0}])
    monkeypatch.setattr(bench, "system_stamps", lambda: {"gpu": "NVIDIA H200", "driver": "580"})
    path, _, _ = run_bench(shapes, BASELINES, tmp_path)
    monkeypatch.setattr(bench, "system_stamps", lambda: stamps)
    with pytest.raises(ValueError, match=re.escape(f"{path}: not resumed: {culprit}")):
        run_bench(shapes, BASELINES, tmp_path, resume=True)
    monkeypatch.setattr(bench, "system_stamps", lambda: {"gpu": "NVIDIA H200", "driver": "580"})
    other = tmp_path / "other.toml"
    other.write_text(SHAPES)
    with pytest.raises(ValueError, match=r"not resumed: it benched .*shapes\.toml, this run .*other\.toml"):
        run_bench(other, BASELINES, tmp_path, resume=True)
    path.write_text("{")
    with pytest.raises(ValueError, match="cannot resume it"):
        run_bench(shapes, BASELINES, tmp_path, resume=True)


def test_paired_dense_takes_turns_per_baseline_and_reports_the_rounds_ratio(monkeypatch):
    """On CPU, with samplers standing for the GPU: each baseline alternates with ours, the turn's batch
    follows ours' time, and the ratio is the baseline's time over ours."""
    import kerneltune.kernels.ranker_attention.bench.runner as bench
    from kerneltune.kernels.ranker_attention.baselines import Runnable

    turns = []

    def sampler(runnable, cold_l2):
        assert cold_l2 is False
        def take(n):
            turns.append((runnable.fn, n))
            return [runnable.args[0]] * n  # ms

        return take

    monkeypatch.setattr(bench, "_sampler", sampler)
    ours, cudnn, mgpu = (Runnable("jax", name, (ms,)) for name, ms in (("ours", 1.0), ("cudnn", 1.25), ("mgpu", 1.5)))
    pairs = bench.paired_dense(ours, 1000.0, {"cudnn_dense": cudnn, "jax_mgpu_dense": mgpu}, rounds=4)
    assert pairs["cudnn_dense"]["ratio"] == pytest.approx(1.25)
    assert pairs["jax_mgpu_dense"]["ratio"] == pytest.approx(1.5)
    assert pairs["cudnn_dense"]["rounds"] == 4 and pairs["cudnn_dense"]["dense_us"] == pytest.approx(1250.0)
    batch = int(bench.PAIRED_TURN_S / 1e-3)
    timed = [(fn, n) for fn, n in turns if n == batch]
    assert [fn for fn, _ in timed[:8]] == ["ours", "cudnn", "cudnn", "ours", "ours", "cudnn", "cudnn", "ours"]
    assert [fn for fn, _ in timed[8:]] == ["ours", "mgpu", "mgpu", "ours", "ours", "mgpu", "mgpu", "ours"]


def test_settled_rounds_take_turns_per_baseline_settling_each_turn_and_read_its_clocks(monkeypatch):
    """On CPU, with samplers standing for the GPU: every timed batch of a turn follows an untimed stretch of the
    same implementation, and each implementation's clock is the median of its turns' readings."""
    import kerneltune.kernels.ranker_attention.bench.runner as bench
    from kerneltune.kernels.ranker_attention.baselines import Runnable

    calls, running = [], {}

    def sampler(runnable, cold_l2):
        def take(n):
            calls.append((runnable.fn, n))
            running["now"] = runnable.fn
            time.sleep(1e-3)
            return [runnable.args[0]] * n  # ms

        return take

    monkeypatch.setattr(bench, "_sampler", sampler)
    ours, cudnn = Runnable("jax", "ours", (1.0,)), Runnable("torch", "cudnn", (1.2,))
    settled = bench.paired_dense(ours, 1000.0, {"cudnn_dense": cudnn}, rounds=2, settle_s=0.01,
                                 clocks=lambda: {"sm_mhz": {"ours": "1900", "cudnn": "1780"}[running["now"]]})
    s = settled["cudnn_dense"]
    assert s["ratio"] == pytest.approx(1.2) and s["rounds"] == 2 and s["settle_s"] == 0.01
    assert (s["ours_sm_mhz"], s["dense_sm_mhz"]) == (1900.0, 1780.0)
    from kerneltune.seams.measure import Turn

    unread = [Turn("ours", 1.0, {"sm_mhz": "[N/A]"}), Turn("ours", 1.0, {}), Turn("cudnn", 1.0, {"sm_mhz": "1700"})]
    assert bench._mhz(unread, "ours") is None and bench._mhz(unread, "cudnn") == 1700.0
    turns = [fn for fn, _ in calls[2:]]  # after each sampler's warm-up
    runs = [fn for i, fn in enumerate(turns) if i == 0 or turns[i - 1] != fn]
    assert runs == ["ours", "cudnn", "ours", "cudnn"][:len(runs)] and len(runs) == 3  # A B, B A
    assert len(turns) > 3 * 4  # every turn ran its implementation several times before the timed batch


def test_the_paired_fraction_is_taken_against_the_faster_dense_baseline():
    """Ours does half the dense problem's flops; cuDNN takes 1.25x our time, JAX's kernel 1.5x: the
    fraction is our rate over cuDNN's, the faster (0.5 x 1.25)."""
    from kerneltune.kernels.ranker_attention.bench.runner import paired_fraction

    pairs = {"cudnn_dense": {"ratio": 1.25}, "jax_mgpu_dense": {"ratio": 1.5}}
    assert paired_fraction(1e12, 2e12, pairs) == pytest.approx(0.625)


def test_the_user_call_is_timed_against_its_kernels_in_the_same_rounds(monkeypatch):
    """On CPU, a call that takes ~2 ms of wall time and "kernels" CUPTI would time at 1.5 ms: the loop's
    kernel share is below 1, and the kernels are named with their median times."""
    import time

    from jax.experimental.mosaic.gpu import profiler

    import kerneltune.backends.cuda_jax as cuda_jax
    from kerneltune.kernels.ranker_attention.bench.runner import user_call_times

    class Out:
        def block_until_ready(self):
            return self

    def call():
        time.sleep(2e-3)
        return Out()

    monkeypatch.setattr(profiler, "measure", lambda fn, aggregate, iterations: lambda *a: (
        None, [[("clamp_fusion", 0.1), ("ranker_kernel", 1.4)]] * iterations))
    monkeypatch.setattr(cuda_jax, "gpu_clocks", lambda: {})
    t = user_call_times(call, (), kernel_us=20_000.0)  # a long kernel: the fewest calls a round (10)
    assert t["kernel_sustained_us"] == pytest.approx(1500.0)
    assert t["call_loop_us"] >= 2000.0 and t["call_single_us"] >= 2000.0
    assert t["kernel_over_call"] == pytest.approx(t["kernel_sustained_us"] / t["call_loop_us"])
    assert t["kernel_over_call"] < 1
    assert t["call_kernels"] == [["clamp_fusion", pytest.approx(100.0)], ["ranker_kernel", pytest.approx(1400.0)]]


def test_the_results_file_is_written_whole_and_never_through_a_link(tmp_path, monkeypatch):
    """On a CPU, with the measurement faked: each shape's rewrite of the results file goes through the tool's one
    atomic writer (no temporary file left, a link at the path refused, its target untouched)."""
    from kerneltune.files.safe_io import UnsafeFile
    from kerneltune.kernels.ranker_attention.bench import runner

    monkeypatch.setattr(runner, "system_stamps", lambda: {"gpu": "NVIDIA H200"})
    monkeypatch.setattr(runner, "bench_shape", lambda shape, method, cap, which, settings: [
        {"shape": shape.name, "cap_method": method.value, "impl": "kerneltune", "median_ms": 1.0}])
    shapes = tmp_path / "shapes.toml"
    shapes.write_text(SHAPES)
    path, rows, _ = run_bench(shapes, (), tmp_path / "out")
    assert len(rows) == 4 and sorted(p.name for p in path.parent.iterdir()) == [path.name]
    victim = tmp_path / "victim.json"
    victim.write_text("theirs")
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(UnsafeFile):
        run_bench(shapes, (), tmp_path / "out")
    assert victim.read_text() == "theirs"
