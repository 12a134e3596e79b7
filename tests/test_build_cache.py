"""Builds kept in the user's cache: loaded only under their own key, intact and loadable; anything else is one
warning and a recompile, never a verdict; the folder stays under its size."""

import logging
import os

import numpy as np
import pytest

from kerneltune.files.build_cache import BuildCache, build_key

KEY = build_key("fake", "src1", {"n": 2}, {"mode": "good", "work": 1},
                {"gpu": "H200", "jax": "0.11.2", "kernel_hash": "abc", "clocks": 1980}, ("gpu", "jax", "kernel_hash"))


def test_the_key_holds_the_matched_stamps_but_the_kernels_own_hash():
    assert KEY["system"] == {"gpu": "H200", "jax": "0.11.2"} and KEY["source"] == "src1"


class Compiles:
    def __init__(self, data=b"\x00build-bytes\xff"):
        self.data, self.calls = data, 0

    def __call__(self):
        self.calls += 1
        return self.data


def loads(data):
    if not data.startswith(b"\x00build"):
        raise ValueError("not a build")
    return data


def test_a_second_build_of_the_same_key_is_loaded_not_compiled(tmp_path):
    compiles = Compiles()
    assert BuildCache(tmp_path).build(KEY, compiles, loads) == (compiles.data, False)
    assert BuildCache(tmp_path).build(KEY, compiles, loads) == (compiles.data, True)
    assert compiles.calls == 1


@pytest.mark.parametrize("field, value", [("source", "src2"), ("tiles", {"mode": "good", "work": 2}),
                                          ("system", {"gpu": "H200", "jax": "0.11.3"}), ("problem", {"n": 3})])
def test_another_source_tile_system_or_problem_compiles_again(tmp_path, field, value):
    compiles = Compiles()
    BuildCache(tmp_path).build(KEY, compiles, loads)
    assert BuildCache(tmp_path).build({**KEY, field: value}, compiles, loads)[1] is False
    assert compiles.calls == 2


def test_an_edited_or_torn_file_is_one_warning_and_a_recompile(tmp_path, caplog):
    compiles = Compiles()
    cache = BuildCache(tmp_path)
    cache.build(KEY, compiles, loads)
    path = cache.path(KEY)
    raw = bytearray(path.read_bytes())
    i = raw.find(b"build-bytes")
    raw[i] ^= 1  # one bit of the executable
    path.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, "kerneltune.builds"):
        assert cache.build(KEY, compiles, loads) == (compiles.data, False)
    assert compiles.calls == 2 and f"build cache {path}" in caplog.text  # the zip CRC or the digest
    path.write_bytes(path.read_bytes()[:40])
    assert cache.build(KEY, compiles, loads)[1] is False and compiles.calls == 3
    assert cache.build(KEY, compiles, loads)[1] is True  # rewritten whole


def test_a_file_under_another_key_is_never_used(tmp_path, caplog):
    compiles = Compiles()
    cache = BuildCache(tmp_path)
    other = {**KEY, "tiles": {"mode": "good", "work": 9}}
    cache.build(other, Compiles(b"\x00build-of-another-config"), loads)
    os.replace(cache.path(other), cache.path(KEY))  # a hand-copied file, or a collision of names
    with caplog.at_level(logging.WARNING, "kerneltune.builds"):
        assert cache.build(KEY, compiles, loads) == (compiles.data, False)
    assert "another key" in caplog.text


def test_a_build_that_no_longer_loads_is_recompiled(tmp_path, caplog):
    cache = BuildCache(tmp_path)
    cache.build(KEY, Compiles(b"stale executable"), lambda data: data)  # loadable by the system that wrote it
    compiles = Compiles()
    with caplog.at_level(logging.WARNING, "kerneltune.builds"):
        assert cache.build(KEY, compiles, loads) == (compiles.data, False)
    assert "does not load here (ValueError)" in caplog.text
    assert cache.build(KEY, compiles, loads)[1] is True


def test_no_folder_keeps_nothing():
    compiles = Compiles()
    for _ in range(2):
        assert BuildCache(None).build(KEY, compiles, loads)[1] is False
    assert compiles.calls == 2


def test_the_folder_is_trimmed_to_its_size_least_recently_used_first(tmp_path):
    cache = BuildCache(tmp_path)
    keys = [{**KEY, "tiles": {"work": i}} for i in range(4)]
    for i, key in enumerate(keys):
        cache.build(key, Compiles(b"\x00build" + bytes(4000)), loads)
        os.utime(cache.path(key), (1000 + i, 1000 + i))
    cache.build(keys[0], Compiles(), loads)  # used again: now the most recent
    size = cache.path(keys[0]).stat().st_size
    cache.trim(max_bytes=2 * size)
    assert [cache.path(k).exists() for k in keys] == [True, False, False, True]


def test_the_file_holds_arrays_only(tmp_path):
    """What the cache reads back is loaded without pickles: the file cannot carry code of its own."""
    cache = BuildCache(tmp_path)
    cache.build(KEY, Compiles(), loads)
    with np.load(cache.path(KEY), allow_pickle=False) as f:
        assert all(f[name].dtype == np.uint8 for name in f.files)
