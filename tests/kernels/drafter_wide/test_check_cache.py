"""The references verify --interpret judges by are kept under a key of what computes them, and of nothing else."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from kerneltune.kernels.drafter_wide import check_cache
from kerneltune.kernels.drafter_wide.reference import Dims, make_inputs, make_weights


def test_the_key_covers_every_module_the_references_import_and_no_kernel_or_interpreter_module():
    sources = set(check_cache.model_sources())
    assert {"emulation.py", "error_model.py", "reference.py", "numerics.py", "indexing.py", "packing.py"} <= sources
    never = {"kernel.py", "gemv_role.py", "attention_role.py", "norm_role.py", "merge_role.py", "device.py",
             "block.py", "interpreted.py", "interpret_check.py", "shape_matrix.py", "plugin.py"}
    assert not sources & never
    # The plugin's check reference (``plugin._reference``): the float64 model and what it imports.
    assert {"numerics.py", "reference.py"} <= set(check_cache.model_sources(("numerics.py",))) <= sources


def test_a_function_level_import_is_followed(tmp_path, monkeypatch):
    (tmp_path / "check_cache.py").write_text("def f():\n    from .b import x\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("from kerneltune.kernels.drafter_wide.c import y\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("from . import d\n", encoding="utf-8")
    (tmp_path / "d.py").write_text("", encoding="utf-8")
    (tmp_path / "unused.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(check_cache, "HERE", tmp_path)
    check_cache.model_sources.cache_clear()
    try:
        assert check_cache.model_sources(("check_cache.py",)) == ("b.py", "c.py", "check_cache.py", "d.py")
    finally:
        check_cache.model_sources.cache_clear()


def _arrays(x) -> list[np.ndarray]:
    if isinstance(x, torch.Tensor):
        return [x.numpy()]
    if dataclasses.is_dataclass(x):
        x = [getattr(x, f.name) for f in dataclasses.fields(x)]
    if isinstance(x, dict):
        x = [x[k] for k in sorted(x)]
    return [a for v in x for a in _arrays(v)] if isinstance(x, list | tuple) else []


def test_one_recipe_draws_the_same_bytes_so_its_key_names_them():
    """What makes a key of the recipe sound: two draws from it are equal to the bit."""
    dims = Dims(hidden=256, q_heads=8, kv_heads=4, intermediate=512, window=64)
    one, two = (_arrays([make_weights(dims, 0), make_inputs(dims, 2, 2, [3, 20], 1)]) for _ in range(2))
    assert len(one) >= 16 and all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))


def test_the_recipe_key_sees_the_dims_the_recipe_the_drawing_code_and_torch(monkeypatch):
    dims = Dims(hidden=256, q_heads=8, kv_heads=4, intermediate=512, window=64)
    recipe = {"shape": {"requests": 2, "context": (3, 20)}, "seeds": [0, 1]}
    key = check_cache.recipe_key(dims, recipe, "def setup(): ...")
    assert key == check_cache.recipe_key(dims, dict(recipe), "def setup(): ...")
    others = [check_cache.recipe_key(dataclasses.replace(dims, eps=1e-5), recipe, "def setup(): ..."),
              check_cache.recipe_key(dims, {**recipe, "seeds": [0, 2]}, "def setup(): ..."),
              check_cache.recipe_key(dims, {**recipe, "shape": {"requests": 2, "context": (3, 21)}}, "def setup(): .."),
              check_cache.recipe_key(dims, recipe, "def setup(): return 1")]
    monkeypatch.setattr(check_cache.torch, "__version__", "0.0")
    others.append(check_cache.recipe_key(dims, recipe, "def setup(): ..."))
    assert len({key, *others}) == 6


def test_the_check_shapes_recipe_sees_its_seeds(monkeypatch):
    from kerneltune.kernels.drafter_wide import interpreted

    key = interpreted.recipe(interpreted.CHECK_SHAPE)
    assert key != interpreted.recipe({**interpreted.CHECK_SHAPE, "layers": 1})
    monkeypatch.setattr(interpreted, "INPUTS_SEED", 2)
    assert interpreted.recipe(interpreted.CHECK_SHAPE) != key


def test_a_cached_element_model_is_read_without_drawing_its_weights(tmp_path, monkeypatch):
    dims = Dims(hidden=256, q_heads=8, kv_heads=4, intermediate=512, window=64)
    drawn = []

    def draw():
        drawn.append(1)
        return make_weights(dims, 0), make_inputs(dims, 2, 2, [3, 20], 1)

    first = check_cache.element_model(tmp_path, {"requests": 2}, dims, "k", draw)
    again = check_cache.element_model(tmp_path, {"requests": 2}, dims, "k", draw)
    assert len(drawn) == 1 and np.array_equal(first.h_out, again.h_out)


def test_a_torn_file_is_computed_again(tmp_path):
    calls = []

    class Emulated:
        h_out = [np.ones(3)] * 4
        caches = [[np.zeros(2)]] * 4

    def run():
        calls.append(1)
        return Emulated()

    shape = {"requests": 1}
    h, c = check_cache.emulated(tmp_path, shape, "gfx942", run, "k")
    assert len(calls) == 1 and len(h) == 4 and len(c[0]) == 1
    check_cache.emulated(tmp_path, shape, "gfx942", run, "k")
    assert len(calls) == 1  # kept
    check_cache.emulated(tmp_path, shape, "gfx942", run, "other inputs")
    assert len(calls) == 2
    torn = list(tmp_path.glob("*.npz"))
    assert len(torn) == 2
    for f in torn:
        f.write_bytes(f.read_bytes()[:40])
    check_cache.emulated(tmp_path, shape, "gfx942", run, "k")
    assert len(calls) == 3
