"""What stood between an existing kernel and a sweep (issue 96): a list of configs as a space (a Triton
autotuner's included), the framework read from the kernel's own code, a kernel file importing its neighbours, and an
import-time failure said in one line."""

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from kerneltune.author.listed import config_fields
from kerneltune.seams.registry import UnknownName, load_kernel
from kerneltune.tuning.space import SpaceError, load_space

KERNEL_HEAD = """
import numpy as np
import kerneltune as kt


class Listed(kt.Kernel):
    {space}
    buckets = {{"n8": {{"n": 8}}}}

    def build(self, p, c):
        return lambda x: x * 2

    def inputs(self, p, seed):
        return (np.ones(p.n),)

    def reference(self, x):
        return x * 2


KERNEL = Listed()
"""


def kernel_file(tmp_path, space, name="listed.py"):
    path = tmp_path / name
    path.write_text(KERNEL_HEAD.format(space=space))
    return load_kernel(str(path))


def test_a_list_of_configs_is_the_space_in_its_order(tmp_path):
    kernel = kernel_file(tmp_path, 'configs = [{"block": 64, "warps": 4}, {"block": 32, "warps": 8}, '
                                   '{"block": 64, "warps": 8}]')
    space = kernel._parsed_space
    assert list(space.configs({"n": 8})) == [{"block": 64, "warps": 4}, {"block": 32, "warps": 8},
                                             {"block": 64, "warps": 8}]
    assert space.size == 3 and space.params == {"block": [64, 32], "warps": [4, 8]}
    assert space.excluded_by({"block": 32, "warps": 4}, {"n": 8}) == "not one of the space's listed configs"
    assert kernel.tuned(n=8) == {"block": 64, "warps": 4}  # the heuristic: the first listed


@pytest.mark.parametrize(("space", "why"), [
    ('configs = [{"block": 64}, {"warps": 8}]', "every config sets the same tunables"),
    ('configs = [{"block": 64}, {"block": 64}]', "listed twice"),
    ('configs = [{"block": [64]}]', r"configs\[0\].block: list \[64\] is not a string, number or bool"),
    ('configs = [{"block": 64}]\n    params = {"block": [1]}', "not both"),
    ('params = {"config": [object()]}',
     r"params.config\[0\]: .* is object, not a string, number or bool.*configs = fn.configs"),
    ('configs = [3]', r"configs\[0\]: int 3 is not a config"),
])
def test_what_a_list_of_configs_refuses_in_one_line(tmp_path, space, why):
    kernel = kernel_file(tmp_path, space)
    with pytest.raises(SpaceError, match=why):
        assert kernel._parsed_space  # the property raises


def test_a_space_file_takes_a_list_of_configs(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('configs = [{block = 64, warps = 4}, {block = 32, warps = 8}]\n'
                    '[[buckets]]\nname = "n8"\nproblem = {n = 8}\n')
    space = load_space(path, {"block", "warps"}, {"n"}, "k")
    assert space.listed == ({"block": 64, "warps": 4}, {"block": 32, "warps": 8})
    path.write_text('configs = [{block = 64, nope = 4}]\n')
    with pytest.raises(SpaceError, match=r"s.toml:1: configs\[0\].nope: unknown parameter"):
        load_space(path, {"block"}, {"n"}, "k")


def test_a_triton_config_is_its_kwargs_and_launch_options():
    triton = pytest.importorskip("triton")
    assert config_fields(triton.Config({"BLOCK": 64}, num_warps=8), "here") == {
        "BLOCK": 64, "num_warps": 8, "num_stages": 3, "num_ctas": 1}
    assert config_fields(triton.Config({}, num_warps=2, maxnreg=128), "here")["maxnreg"] == 128
    with pytest.raises(ValueError, match="here: a config with a pre_hook"):
        config_fields(triton.Config({}, pre_hook=lambda args: None), "here")


FRAMEWORK = """
from jax.random import key, normal
import kerneltune as kt


class Named(kt.Kernel):
    params = {{"b": [1]}}
    buckets = {{"n8": {{"n": 8}}}}

    def build(self, p, c):
        return {build}

    def inputs(self, p, seed):
        return ({inputs},)

    def reference(self, x):
        return x


KERNEL = Named()
"""


def test_the_framework_comes_from_the_kernels_own_code(tmp_path):
    """The module never imports jax by that name (the issue's case: it became a NumPy kernel)."""
    path = tmp_path / "named.py"
    path.write_text(FRAMEWORK.format(build="lambda x: x", inputs="normal(key(seed), (p.n,))"))
    assert load_kernel(str(path)).backend == "cuda-jax"


def test_a_guess_is_said_with_how_to_set_it(tmp_path, caplog):
    path = tmp_path / "guessed.py"
    path.write_text(FRAMEWORK.format(build="lambda x: x", inputs="[1.0] * p.n"))
    with caplog.at_level(logging.WARNING, "kerneltune.tables"):
        assert load_kernel(str(path)).backend == "host"
    assert "framework guessed as 'numpy' from its module's imports" in caplog.text
    assert 'set framework = "torch", "jax" or "numpy" on Named' in caplog.text


def test_a_kernel_file_imports_the_modules_beside_it(tmp_path):
    (tmp_path / "helper_for_listed.py").write_text("CONFIGS = [{'block': 8}, {'block': 16}]\n")
    path = tmp_path / "uses_helper.py"
    path.write_text(KERNEL_HEAD.format(space="from helper_for_listed import CONFIGS as configs"))
    assert load_kernel(str(path))._parsed_space.listed == ({"block": 8}, {"block": 16})


def test_an_import_time_failure_is_one_line_and_debug_shows_it_whole(tmp_path):
    path = tmp_path / "fails.py"
    path.write_text(textwrap.dedent("""
        def driver():
            raise RuntimeError("0 active drivers ([]). There should only be one.")
        driver()
    """))
    with pytest.raises(UnknownName, match=r"importing .*fails.py raised RuntimeError: 0 active drivers .*--debug"):
        load_kernel(str(path))
    env = {**os.environ, "KERNELTUNE_TABLES": str(tmp_path / "t")}
    run = [sys.executable, "-m", "kerneltune"]
    r = subprocess.run([*run, "sweep", str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1 and "0 active drivers" in r.stderr
    r = subprocess.run([*run, "--debug", "sweep", str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" in r.stderr and 'raise RuntimeError("0 active drivers' in r.stderr
