"""Each example is swept, installed, looked up, verified and reported, as a user would from a shell, on its
small bucket: the JAX one natively on the CPU, the Pallas and Triton ones in their interpreters."""

import json
import os
import subprocess
import sys

import pytest

from ..paths import REPO
from ..verdicts import only_slower

EXAMPLES = REPO / "examples"
FAST = ("--max-seconds", "0.2", "--compile-workers", "0")


def kerneltune(*args, env, cwd, allowed=(0,)):
    r = subprocess.run([sys.executable, "-m", "kerneltune", *args], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=600)
    assert r.returncode in allowed, f"kerneltune {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.mark.parametrize(("example", "bucket", "extra"), [
    pytest.param("jax_matmul", "m256", (), marks=pytest.mark.slow, id="jax"),
    pytest.param("pallas_matmul", "m256", ("--budget", "3"), marks=pytest.mark.slow, id="pallas-interpret"),
    pytest.param("triton_softmax", "r16-c256", ("--budget", "2"), marks=pytest.mark.slow, id="triton-interpret"),
])
def test_an_example_goes_from_sweep_to_report(tmp_path, example, bucket, extra):
    env = {**os.environ, "KERNELTUNE_TABLES": str(tmp_path / "tables"), "TRITON_INTERPRET": "1"}
    source = EXAMPLES / f"{example}.py"
    assert len(source.read_text().splitlines()) <= 40  # kernel and space, the budget for an example
    out = kerneltune("sweep", str(source), "--bucket", bucket, "--out", str(tmp_path / "out"), *FAST, *extra,
                     env=env, cwd=tmp_path)
    [table] = (tmp_path / "out/tables/cpu").glob("*.json")
    assert f"table: {table}" in " ".join(out.split()), out  # lines wrap between words
    assert "exhaustive sweep" in out, out
    kerneltune("install", str(table), env=env, cwd=tmp_path)

    lookup = (f"import sys, json; sys.path.insert(0, {str(EXAMPLES)!r}); from {example} import KERNEL; "
              f"print(json.dumps(dict(KERNEL.tuned(KERNEL.buckets[{bucket!r}]))))")
    found = subprocess.run([sys.executable, "-c", lookup], capture_output=True, text=True, env=env, timeout=300)
    entry = next(iter(json.loads(table.read_text())["entries"].values()))
    assert json.loads(found.stdout) == entry["config"], found.stderr
    # A sweep in an interpreter says once that its times mean nothing here, and its table's entries say so too.
    interpreted = example != "jax_matmul"
    assert " ".join(out.split()).count("say nothing of its speed") == interpreted, out
    assert ("void_timings" in entry) == interpreted and ("timed in an interpreter" in found.stderr) == interpreted

    # Correct on fresh inputs; on a busy test machine its speed may be unsettled (exit 4), never wrong or slower
    # (a correct entry judged slower is timed once more: ``only_slower``). In an interpreter its times mean nothing:
    # correctness only, said once, exit 2 (the code a CPU job gates on).
    verify = ("verify", str(source), "--junit", str(tmp_path / "verify.xml"))
    if example != "jax_matmul":
        verified = kerneltune(*verify, env=env, cwd=tmp_path, allowed=(2,))
        assert " ".join(verified.split()).count("interpreter on this CPU, so its times here say nothing") == 1
    else:
        verified = kerneltune(*verify, env=env, cwd=tmp_path, allowed=(0, 1, 4))
        if only_slower(verified):
            verified = kerneltune(*verify, env=env, cwd=tmp_path, allowed=(0, 4))
    assert "(correctness: ok)" in verified and 'failures="0"' in (tmp_path / "verify.xml").read_text()

    kerneltune("report", str(tmp_path / "out"), "--csv", str(tmp_path / "r.csv"), "--html", str(tmp_path / "r.html"),
               env=env, cwd=tmp_path)
    rows = (tmp_path / "r.csv").read_text().splitlines()
    assert len(rows) >= 2 and rows[1].split(",")[2] == bucket


@pytest.mark.slow
def test_a_triton_kernel_on_a_cpu_without_the_interpreter_is_hardware_absent(tmp_path):
    """Not "0 active drivers" and exit 1: the sweep says what it needs, exit 2, which a CPU CI job accepts."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-m", "kerneltune", "sweep", str(EXAMPLES / "triton_softmax.py"), "--bucket",
                        "r16-c256", "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 2, r.stderr
    assert "needs a GPU Triton has a driver for, or Triton's interpreter on the CPU (TRITON_INTERPRET=1)" in r.stderr
