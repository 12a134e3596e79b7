"""A program's op tree kept beside its module: read back as it was parsed, and ignored where it is not a tree."""

import os
import pickle

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter import parsed
from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
from kerneltune.kernels.drafter_wide.interpreter.program import Program

from .kernels import DIVERGENT_STORE, LDS_ROTATE


def _run(program: Program) -> list[int]:
    mem = GlobalMemory()
    out = np.zeros(64, np.int32)
    Launch(program, mem, "gfx942").run([Grid([mem.allocate("out", out), 40], 1)])
    return out.tolist()


def _tree(program: Program) -> list[tuple]:
    return [(o.name, o.res, o.args, o.res_types, o.arg_types, o.attrs, o.where, o.lines, o.kill, o.generator)
            for o in program.ops()]


@pytest.mark.parametrize("text", [DIVERGENT_STORE, LDS_ROTATE], ids=["divergent store", "lds"])
def test_a_kept_tree_is_the_parsed_one_and_is_read_without_mlir(tmp_path, monkeypatch, text):
    first = Program(text, cache=tmp_path)
    assert len(list(tmp_path.glob("*.ops.pickle"))) == 1
    monkeypatch.setattr(Program, "_parse", lambda *a: pytest.fail("parsed again"))
    again = Program(text, cache=tmp_path)
    assert _tree(again) == _tree(first) and again.sites == first.sites and again.lds_bytes == first.lds_bytes
    assert (again.slots, again.globals, again.params, again.param_types) == (
        first.slots, first.globals, first.params, first.param_types)


def test_a_kept_tree_runs_as_the_parsed_one(tmp_path):
    first = Program(DIVERGENT_STORE, cache=tmp_path)
    assert _run(Program(DIVERGENT_STORE, cache=tmp_path)) == _run(first)


class _Shell:
    def __reduce__(self):
        return (os.system, ("echo planted > /dev/null",))


@pytest.mark.parametrize("content", [b"", b"\x80\x05garbage", pickle.dumps({"body": _Shell()}), pickle.dumps([1, 2])],
                         ids=["empty", "torn", "a foreign callable", "no dict"])
def test_a_file_that_is_no_tree_is_ignored_and_the_module_read_again(tmp_path, monkeypatch, content):
    Program(DIVERGENT_STORE, cache=tmp_path)
    [kept] = tmp_path.glob("*.ops.pickle")
    kept.write_bytes(content)
    expected, reads = _tree(Program(DIVERGENT_STORE)), []
    parse = Program._parse
    monkeypatch.setattr(Program, "_parse", lambda self, *a: (reads.append(1), parse(self, *a)))
    monkeypatch.setattr(os, "system", lambda *a: pytest.fail("ran what the file named"))
    assert _tree(Program(DIVERGENT_STORE, cache=tmp_path)) == expected
    assert reads == [1]


def test_a_fifo_in_its_place_is_not_read_and_an_unwritable_cache_costs_only_time(tmp_path):
    Program(DIVERGENT_STORE, cache=tmp_path)
    [kept] = tmp_path.glob("*.ops.pickle")
    kept.unlink()
    os.mkfifo(kept)
    Program(DIVERGENT_STORE, cache=tmp_path)  # would block on a read of the FIFO
    blocked = tmp_path / "a file"
    blocked.write_text("")
    Program(DIVERGENT_STORE, cache=blocked / "cache")


def test_a_changed_parser_does_not_read_an_old_tree(tmp_path, monkeypatch):
    Program(DIVERGENT_STORE, cache=tmp_path)
    monkeypatch.setattr(parsed, "_SOURCES", (*parsed._SOURCES, "ops.py"))
    assert parsed.load(tmp_path, DIVERGENT_STORE, None) is None
