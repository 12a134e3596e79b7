"""References kept on disk are data: used only under their own key and digest, never trusted otherwise, and a
cache that cannot be written never fails a check."""

import os

import numpy as np
import pytest

from kerneltune.files.reference_cache import ReferenceCache

KEY = {"kernel": "k", "seed": 3}


def _compute(calls, value=1.0):
    def compute():
        calls.append(1)
        return {"out": np.full((2, 3), value, np.float32), "lse": np.arange(4, dtype=np.float32)}

    return compute


def test_computed_once_then_loaded(tmp_path):
    calls = []
    cache = ReferenceCache(tmp_path)
    first = cache.get(KEY, _compute(calls))
    again = ReferenceCache(tmp_path).get(KEY, _compute(calls, 2.0))
    assert len(calls) == 1 and np.array_equal(first["out"], again["out"]) and again["out"].dtype == np.float32
    assert cache.seconds > 0


def test_without_a_folder_nothing_is_kept(tmp_path):
    calls = []
    ReferenceCache(None).get(KEY, _compute(calls))
    ReferenceCache(None).get(KEY, _compute(calls))
    assert len(calls) == 2


def test_a_file_under_another_key_is_recomputed(tmp_path, caplog):
    calls = []
    cache = ReferenceCache(tmp_path)
    cache.get(KEY, _compute(calls))
    other = {"kernel": "k", "seed": 4}
    cache.path(KEY).rename(cache.path(other))  # a copied or colliding file
    with caplog.at_level("WARNING", logger="kerneltune.references"):
        got = cache.get(other, _compute(calls, 5.0))
    assert len(calls) == 2 and got["out"][0, 0] == 5.0 and "another key" in caplog.text
    assert ReferenceCache(tmp_path).get(other, _compute(calls))["out"][0, 0] == 5.0 and len(calls) == 2


@pytest.mark.parametrize("damage", ["truncate", "edit", "pickle"])
def test_a_damaged_file_is_one_warning_and_a_recompute(tmp_path, caplog, damage):
    calls = []
    cache = ReferenceCache(tmp_path)
    cache.get(KEY, _compute(calls))
    path = cache.path(KEY)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "edit":  # the arrays changed, the key and digest kept: the digest says so
        with np.load(path) as f:
            arrays = {n: f[n] for n in f.files}
        arrays["out"] = arrays["out"] + 1
        np.savez(path, **arrays)
    else:  # an object array needs a pickle: never loaded
        np.savez(path, out=np.array([object()], dtype=object))
    with caplog.at_level("WARNING", logger="kerneltune.references"):
        got = cache.get(KEY, _compute(calls))
    assert len(calls) == 2 and got["out"][0, 0] == 1.0
    assert len([r for r in caplog.records if r.name == "kerneltune.references"]) == 1


def test_a_folder_that_cannot_be_written_costs_the_cache_not_the_check(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    calls = []
    with caplog.at_level("WARNING", logger="kerneltune.references"):
        got = ReferenceCache(blocker / "references").get(KEY, _compute(calls))
    assert got["out"].shape == (2, 3) and "not written" in caplog.text


@pytest.mark.timeout(60)
def test_a_fifo_in_an_entrys_place_is_nothing_stored_and_is_not_read(tmp_path):
    calls = []
    cache = ReferenceCache(tmp_path)
    os.mkfifo(cache.path(KEY))
    assert cache.get(KEY, _compute(calls))["out"].shape == (2, 3) and calls == [1]  # a read would block
