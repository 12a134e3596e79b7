"""The references verify --interpret judges by are kept under a key of what computes them, and of nothing else."""

from __future__ import annotations

import dataclasses

import numpy as np

from kerneltune.kernels.drafter_wide import check_cache
from kerneltune.kernels.drafter_wide.reference import Dims, make_inputs, make_weights


def test_the_key_covers_every_module_the_references_import_and_no_kernel_or_interpreter_module():
    sources = set(check_cache.model_sources())
    assert {"emulation.py", "error_model.py", "reference.py", "numerics.py", "indexing.py", "packing.py"} <= sources
    never = {"kernel.py", "gemv_role.py", "attention_role.py", "norm_role.py", "merge_role.py", "device.py",
             "block.py", "interpreted.py", "interpret_check.py", "shape_matrix.py", "plugin.py"}
    assert not sources & never


def test_a_function_level_import_is_followed(tmp_path, monkeypatch):
    (tmp_path / "check_cache.py").write_text("def f():\n    from .b import x\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("from kerneltune.kernels.drafter_wide.c import y\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("from . import d\n", encoding="utf-8")
    (tmp_path / "d.py").write_text("", encoding="utf-8")
    (tmp_path / "unused.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(check_cache, "HERE", tmp_path)
    monkeypatch.setattr(check_cache, "ROOTS", ("check_cache.py",))
    check_cache.model_sources.cache_clear()
    try:
        assert check_cache.model_sources() == ("b.py", "c.py", "check_cache.py", "d.py")
    finally:
        check_cache.model_sources.cache_clear()


def test_the_inputs_key_sees_one_changed_weight_or_input_element():
    dims = Dims(hidden=256, q_heads=8, kv_heads=4, intermediate=512, window=64)
    weights, inputs = make_weights(dims, 0), make_inputs(dims, 2, 2, [3, 20], 1)
    key = check_cache.inputs_key(dims, weights, inputs)
    assert key == check_cache.inputs_key(dims, make_weights(dims, 0), make_inputs(dims, 2, 2, [3, 20], 1))
    weights.layers[0]["down"][3, 4] += 1e-9
    assert check_cache.inputs_key(dims, weights, inputs) != key
    weights.layers[0]["down"][3, 4] -= 1e-9
    inputs.k_cache[0][0, 0, 0, 0] += 1
    assert check_cache.inputs_key(dims, weights, inputs) != key
    assert check_cache.inputs_key(dataclasses.replace(dims, eps=1e-5), weights, inputs) != key


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
    for f in tmp_path.glob("emulation-*.npz"):
        f.write_bytes(f.read_bytes()[:40])
    check_cache.emulated(tmp_path, shape, "gfx942", run, "k")
    assert len(calls) == 3
