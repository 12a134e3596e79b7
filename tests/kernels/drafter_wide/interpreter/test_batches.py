"""Blocks run as one batch (``Launch.batch``): each keeps its block id, its LDS, its barriers and its place in
the weak memory model, so a batched launch computes what the unbatched one does and finds the same bugs."""

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.machine import Deadlock, Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory, MemoryFault
from kerneltune.kernels.drafter_wide.interpreter.program import Program
from kerneltune.kernels.drafter_wide.interpreter.races import BarrierDivergence, Race
from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule

from .helpers import launch
from .kernels import block_share, weak_fanout, weak_handoff

BLOCKS = 5


def _every(rank: int, block: int) -> str:
    return "all"


def _shared(text: str, batch_size: int, **options) -> tuple[Launch, np.ndarray]:
    out = np.full(BLOCKS * 128, -1, np.int32)
    run, _ = launch(text, {"out": out}, blocks=BLOCKS, batch=_every if batch_size > 1 else None,
                    batch_size=batch_size, **options)
    return run, out


def test_a_batch_computes_what_its_blocks_compute_alone_each_with_its_id_and_lds():
    _, alone = _shared(block_share(), 1)
    run, batched = _shared(block_share(), 3)  # a batch of 3 and one of 2
    want = ((np.arange(128) + 64) % 128)[None] + 1000 * np.arange(BLOCKS)[:, None]
    np.testing.assert_array_equal(alone, want.ravel())
    np.testing.assert_array_equal(batched, alone)
    assert run.resumes < BLOCKS  # two tasks, not five


def test_a_deleted_barrier_in_a_batch_is_a_race_naming_the_block_its_waves_and_its_own_byte():
    with pytest.raises(Race, match=r"LDS race in rank 0 block 0: wave 0's read at llvm.load at -:\d+ and wave 1's "
                                   r"write at llvm.store at -:\d+, byte 256 of the block's LDS"):
        _shared(block_share(first_barrier=False), 4, weak=False)


def test_a_barrier_one_block_of_a_batch_reaches_with_one_wave_is_that_blocks_divergence():
    with pytest.raises(BarrierDivergence, match=r"rank 0 block 2: waves \[0\] reach it and waves \[1\] skip it"):
        _shared(block_share(barrier_in_block=2), 4, weak=False)


def test_an_lds_access_past_the_blocks_bytes_faults_even_where_the_batchs_next_block_lies():
    text = block_share().replace("%m = arith.remsi %n, %c128 : i32", "%m = arith.addi %n, %c128 : i32")  # word 192+
    with pytest.raises(MemoryFault, match=r"LDS access at offset \d+ leaves the block's 512 bytes"):
        _shared(text, 4, weak=False)


@pytest.mark.parametrize("schedule", [Schedule(), Schedule("random", 3), Schedule("pct", 5)], ids=str)
def test_batched_readers_acquire_a_release_and_every_one_copies_the_data(schedule):
    out = np.full(BLOCKS, -1, np.int32)
    launch(weak_fanout("release store"), {"flag": np.zeros(1, np.int32), "data": np.zeros(1, np.int32),
                                         "out": out}, blocks=BLOCKS, schedule=schedule,
           batch=lambda rank, b: "readers" if b else None, batch_size=4)
    assert out[1:].tolist() == [42] * (BLOCKS - 1)


def _fanout(publish: str) -> np.ndarray:
    out = np.full(BLOCKS, -1, np.int32)
    launch(weak_fanout(publish), {"flag": np.zeros(1, np.int32), "data": np.zeros(1, np.int32), "out": out},
           blocks=BLOCKS, batch=lambda rank, b: "readers" if b else None, batch_size=4)
    return out


@pytest.mark.parametrize("publish", ["relaxed store, no fence", "workgroup fence"])
def test_batched_readers_of_data_no_release_orders_are_a_race_naming_a_reader_block(publish):
    with pytest.raises(Race, match=r"global race: rank 0 block [1-4] wave 0's read at .* of byte 0 of data .* and "
                                   r"the store by rank 0 block 0 wave 0"):
        _fanout(publish)


def test_batched_readers_of_a_tag_published_before_its_data_read_the_old_value():
    """The publish lets the readers run before the data is stored: they see the tag and copy the old word (the
    weak model's race is for a load after the store it races with)."""
    assert _fanout("tag before data")[1:].tolist() == [0] * (BLOCKS - 1)


def test_a_block_that_waits_for_one_it_runs_in_lockstep_with_is_a_deadlock_not_a_wrong_value():
    """weak_handoff's reader polls before the writer's branch in program order: batched together, the writer's
    lanes wait for the reader's loop to end, which it never does."""
    mem = GlobalMemory()
    a = [mem.allocate(n, np.zeros(1, np.int32)) for n in ("flag", "data", "out")]
    run = Launch(Program(weak_handoff("release store")), mem, "gfx942", batch=_every, batch_size=2)
    with pytest.raises(Deadlock, match=r"rank 0 blocks 0, 1 \(a batch\) at"):
        run.run([Grid([*a, 0], 2)])


def test_batches_hold_one_ranks_blocks_with_one_key_in_launch_order():
    run = Launch(Program(block_share()), GlobalMemory(), "gfx942", batch=lambda r, b: b % 2 if b < 6 else None,
                 batch_size=2)
    grids = [Grid([0], 8, rank=0), Grid([0], 3, rank=1)]
    got = [(g.rank, bids) for g, bids, _ in run._batches([(g, b) for g in grids for b in range(g.blocks)])]
    assert got == [(0, [0, 2]), (0, [1, 3]), (0, [4]), (0, [5]), (0, [6]), (0, [7]), (1, [0, 2]), (1, [1])]
