import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.machine import Deadlock

from .helpers import launch


def _handoff(same_word: bool, deadline: int = 0, seed: int | None = None, weak: bool = True) -> tuple:
    from .kernels import HANDOFF

    flag, other, data = np.zeros(2, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
    buffers = {"flag": flag, "data": data, "other": other}
    from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
    from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
    from kerneltune.kernels.drafter_wide.interpreter.program import Program

    mem = GlobalMemory()
    a = {k: mem.allocate(k, v) for k, v in buffers.items()}
    run = Launch(Program(HANDOFF), mem, "gfx942", seed=seed, weak=weak)
    run.run([Grid([a["flag"], a["data"], a["flag"] if same_word else a["other"], deadline], 2)])
    return run, data


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_a_block_polling_a_flag_lets_the_writer_run(seed):
    run, data = _handoff(same_word=True, seed=seed)
    assert data.tolist() == [42, 42]
    assert run.resumes >= 2


def test_a_poll_nobody_answers_is_a_deadlock_naming_each_waiter():
    with pytest.raises(Deadlock, match=r"1 blocks poll.*rank 0 block 0 at -:\d+") as e:
        _handoff(same_word=False)
    assert len(e.value.sites) == 1


def test_a_poll_with_a_deadline_ends_as_the_kernels_own_miss():
    _, data = _handoff(same_word=False, deadline=1_000_000, weak=False)
    assert data.tolist() == [42, -1]


def test_reading_the_data_after_a_missed_deadline_is_a_race():
    """The miss path still loads the data word, which the writer published through no flag this block read."""
    from kerneltune.kernels.drafter_wide.interpreter.races import Race

    with pytest.raises(Race, match=r"global race: rank 0 block 0 wave 0's read at llvm.load at -:\d+ .* block 1 "):
        _handoff(same_word=False, deadline=1_000_000)


def test_unknown_op_names_itself_and_its_line():
    from kerneltune.kernels.drafter_wide.interpreter.program import Program, UnknownOp

    from .kernels import UNKNOWN

    with pytest.raises(UnknownOp, match=r"arith.ceildivsi .* at -:\d+"):
        Program(UNKNOWN)


def test_launch_helper_runs_many_blocks():
    from .kernels import DIVERGENT_STORE

    out = np.zeros(8, np.int32)
    run, _ = launch(DIVERGENT_STORE, {"out": out}, [8], blocks=3, weak=False)  # every block writes out: a race
    assert run.resumes == 3


def _peer_read(owner: int | None) -> list[int]:
    from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
    from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
    from kerneltune.kernels.drafter_wide.interpreter.program import Program

    from .kernels import PEER_READ

    mem = GlobalMemory()
    peer, out, flag = np.full(64, 5, np.int32), np.zeros(4, np.int32), np.zeros(2, np.int32)
    a = [mem.allocate("rank 1 peer", peer, owner=owner), mem.allocate("rank 0 out", out, owner=0),
         mem.allocate("rank 1 flag", flag, owner=1)]
    Launch(Program(PEER_READ), mem, "gfx942").run([Grid([*a, 1], 1, rank=0), Grid([*a, 0], 1, rank=1)])
    return out.tolist()


def test_a_plain_load_of_a_peer_line_read_before_gets_the_stale_line():
    """Rank 0 read word 0 of rank 1's buffer before rank 1 rewrote it: a plain load after the tag's acquire still
    gets the line its L2 kept (5); a relaxed system-scope load gets the new word (7); a line read first after
    the write is fresh (9)."""
    assert _peer_read(owner=1) == [5, 5, 7, 9]


def test_a_ranks_own_memory_is_never_stale():
    assert _peer_read(owner=0) == [5, 7, 7, 9]  # the reader's own buffer
    assert _peer_read(owner=None) == [5, 7, 7, 9]  # no owner: memory as before


@pytest.mark.parametrize("seed", range(1, 9))
def test_a_random_order_that_has_not_yet_picked_the_one_block_that_can_go_on_is_no_stall(seed):
    """Seven blocks poll a flag an eighth sets after 40 loop trips: a random order may leave that block unpicked for
    many resumes; the clock must not jump (and a wait's deadline pass) before every ready block has polled with
    nothing written since, the one that can go on included (it jumped in every one of these seeds at 7d2698a)."""
    from .kernels import slow_publisher

    flag = np.zeros(1, np.int32)
    run, _ = launch(slow_publisher(40), {"flag": flag}, blocks=8, seed=seed)
    assert flag[0] == 1 and run.clock < run.stall_ticks, f"the clock jumped to {run.clock}"
