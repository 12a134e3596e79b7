"""A Triton @triton.autotune kernel adopted without a class: its configs the space, its key and dtypes the bucket, a
recorded call the problem; the check against the user's reference or, weaker and said so, the first config."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

from kerneltune.author.autotuned import CALL, NEEDS, Autotuned, check_note
from kerneltune.seams.registry import load_kernel

SOURCE = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128}, num_warps=2),
                              triton.Config({"BLOCK": 32})], key=["n"])
    @triton.jit
    def double(y_ptr, x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
''')


@pytest.fixture
def adopted(tmp_path):
    (tmp_path / "double_kernel.py").write_text(SOURCE)
    return load_kernel(f"{tmp_path / 'double_kernel.py'}:double")


def test_a_bare_autotuner_is_adopted_by_name(adopted, tmp_path):
    assert isinstance(adopted, Autotuned) and adopted.name == "double"
    assert adopted.listed == [{"BLOCK": 64, "num_warps": 4}, {"BLOCK": 128, "num_warps": 2},
                              {"BLOCK": 32, "num_warps": 4}]
    assert adopted.fixed == {"num_stages": 3, "num_ctas": 1}  # alike in every config: launched, not tuned
    assert adopted.problem_fields == {"n", "dtypes", CALL} and adopted.hard_bucket_fields == ("dtypes",)
    assert str(adopted._module_file()) == str(tmp_path / "double_kernel.py")
    assert "checked against its first config's outputs" in check_note(adopted)
    assert check_note(Autotuned(adopted.autotuner, reference=lambda *a: None)) is None


def test_a_call_is_recorded_as_its_arguments_and_each_configs_grid(adopted):
    torch = pytest.importorskip("torch")
    x = torch.zeros(8, 100)[:, :64]  # strided
    y = torch.empty(64, dtype=torch.float16)
    problem = adopted._problem_of((y, x, 64), {}, lambda meta: (triton_cdiv(64, meta["BLOCK"]),))
    call = json.loads(problem.pop(CALL))
    assert problem == {"n": 64, "dtypes": "float16 float32"}
    assert call["args"] == [{"name": "y_ptr", "tensor": {"dtype": "float16", "shape": [64], "stride": [1]}},
                            {"name": "x_ptr", "tensor": {"dtype": "float32", "shape": [8, 64], "stride": [100, 1]}},
                            {"name": "n", "value": 64}]
    assert call["grids"] == [[1], [1], [2]]
    assert list(adopted.bucket(adopted.problem({**problem, CALL: "{}"}))) == ["n", "dtypes"]
    made = adopted.inputs(adopted.problem({**problem, CALL: json.dumps(call)}), 0)
    assert made[1].stride() == (100, 1) and made[1].shape == (8, 64) and made[0].dtype == torch.float16


def triton_cdiv(a, b):
    return -(-a // b)


def test_a_call_it_cannot_record_is_left_to_triton(adopted, caplog):
    torch = pytest.importorskip("torch")
    assert adopted._problem_of((torch.empty(4), object(), 4), {}, (1,)) is None
    assert "a call not looked up in the tuned tables (argument x_ptr is a object" in caplog.text


def test_no_gpu_and_no_interpreter_is_target_hardware_absent(adopted, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert adopted.supported_on({"device_kind": "cpu"}) == NEEDS
    assert adopted.supported_on({"device_kind": "nvidia-h200"}) is None
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert adopted.supported_on({"device_kind": "cpu"}) is None


def test_on_a_cpu_an_adopted_kernel_s_times_are_void_whatever_kerneltune_s_own_module_imports(adopted):
    """Verify of ``kt.autotuned(fn)`` under TRITON_INTERPRET=1 judged the interpreter's times and exited 4: the
    class's judgement looked at the imports of the adapter's module, kerneltune's, where no Triton is."""
    assert adopted.void_timings({"device_kind": "cpu"}) == (
        "double runs in Triton's interpreter on this CPU, so its times here say nothing of its speed on the GPU it is "
        "written for")
    assert adopted.void_timings({"device_kind": "nvidia-h200"}) is None


# Run under Triton's interpreter in a process of its own (TRITON_INTERPRET is read when triton is imported): each
# config checked against the first config, then against a reference, then against a wrong reference.
CHECKS = textwrap.dedent('''
    import json, sys, torch
    from kerneltune.author.autotuned import Autotuned, WEAKER
    from kerneltune.author.fields import Config
    from kerneltune.seams.registry import load_kernel
    bare = load_kernel(sys.argv[1]).autotuner
    x, y = torch.randn(64), torch.empty(64)
    def reference(y, x, n):
        y[:n] = 2 * x[:n]
    def wrong(y, x, n):
        y[:n] = 3 * x[:n]
    out = {}
    for name, kernel in (("first", Autotuned(bare)), ("reference", Autotuned(bare, reference)),
                         ("wrong", Autotuned(bare, wrong))):
        problem = kernel.problem(kernel._problem_of((y, x, 64), {}, (1,)))
        results = []
        for config in kernel.listed:
            inputs = kernel.make_inputs(problem, {}, 0)
            check = kernel.check(kernel.build(problem, Config(config)), problem, inputs)
            results.append([check.error, WEAKER in check.accuracy])
        out[name] = results
    print(json.dumps(out))
''')


@pytest.mark.slow
def test_a_broken_config_fails_the_check_whichever_the_expectation(adopted, tmp_path):
    r = subprocess.run([sys.executable, "-c", CHECKS, f"{tmp_path / 'double_kernel.py'}:double"], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    # BLOCK 32 never writes the upper half of 64 elements: NaN where it was poisoned.
    for name in ("first", "reference"):
        (first, weak0), (wide, _), (narrow, _) = out[name]
        assert first is None and wide is None and "NaN or never written" in narrow
        assert weak0 == (name == "first")  # the weaker check says so in its accuracy figure
    assert all(error is not None for error, _ in out["wrong"])  # the reference is what is checked against
    assert "error 0.333 of the reference" in out["wrong"][0][0]
