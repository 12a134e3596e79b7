"""kernel.py itself with one barrier deleted from its captured program: the waves of a block then share LDS with
nothing ordering them, which the interpreter reports as a race (the kernel as compiled runs clean:
``tests/kernels/drafter_wide/test_interpreted.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drafter-interpret")]

ARCH = "gfx942"


def _barrier_after(file: str, anchor: str) -> int:
    """The line of the first ``gpu.barrier()`` after the line of ``file`` that holds ``anchor``."""
    from kerneltune.kernels.drafter_wide import kernel

    lines = (Path(kernel.__file__).parent / file).read_text(encoding="utf-8").splitlines()
    start = next(i for i, text in enumerate(lines) if anchor in text)
    return next(i + 1 for i in range(start, len(lines)) if lines[i].strip() == "gpu.barrier()")


def _without_barrier(program, file: str, line: int) -> int:
    """Delete every ``gpu.barrier`` whose call chain passes ``file:line``; the count deleted."""
    gone = 0

    def walk(region) -> None:
        nonlocal gone
        keep = []
        for op in region.ops:
            if op.name == "gpu.barrier" and (file, line) in op.lines:
                gone += 1
                continue
            keep.append(op)
            for r in op.regions:
                walk(r)
        region.ops[:] = keep

    walk(program.body)
    return gone


@pytest.mark.parametrize(("file", "anchor", "race"), [
    # after the waves' partial tiles of QKV go to LDS, before tile_value sums them: a read of another wave's write
    ("gemv_role.py", "self.gemv(wq, chunks, scales, 0)",
     r"wave \d's read at llvm.load at device.py:\d+ <- gemv_role.py:\d+ .* and wave \d's write at llvm.store at "
     r"device.py:\d+ <- gemv_role.py:\d+ "),
    # block_reduce's first barrier: a wave's word overwritten while another wave may still read the last sum
    ("block.py", "def block_reduce", r"wave \d's write at llvm.store at .*block.py:\d+.* and (wave \d|another "
                                     r"wave)'s read at llvm.load"),
])
def test_the_drafter_with_one_barrier_deleted_is_a_race(file, anchor, race):
    from kerneltune.kernels.drafter_wide.interpreted import (
        CHECK_SHAPE,
        capture_program,
        run_step,
        small_dims,
        small_layout,
    )
    from kerneltune.kernels.drafter_wide.interpreter.races import Race
    from kerneltune.kernels.drafter_wide.reference import make_inputs, make_weights

    s = CHECK_SHAPE  # the interpreted tests' shape: one capture serves both
    layout, dims = small_layout(s["qpr"], s["layers"], s["w_na"]), small_dims(s["layers"])
    weights, inputs = make_weights(dims, 0), make_inputs(dims, s["requests"], s["qpr"], list(s["context"]), 1)
    program = capture_program(layout, ARCH, Path(os.environ["KERNELTUNE_CACHE"]) / "interpret")
    assert _without_barrier(program, file, _barrier_after(file, anchor)) >= 1
    with pytest.raises(Race, match=r"LDS race in rank \d block \d+: " + race):
        run_step(program, layout, dims, weights, inputs, ARCH)
