import numpy as np
import pytest

from kerneltune.interpreter.machine import Deadlock

from .helpers import launch


def _handoff(same_word: bool, deadline: int = 0, seed: int | None = None) -> tuple:
    from .kernels import HANDOFF

    flag, other, data = np.zeros(2, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
    buffers = {"flag": flag, "data": data, "other": other}
    from kerneltune.interpreter.machine import Grid, Launch
    from kerneltune.interpreter.memory import GlobalMemory
    from kerneltune.interpreter.program import Program

    mem = GlobalMemory()
    a = {k: mem.allocate(k, v) for k, v in buffers.items()}
    run = Launch(Program(HANDOFF), mem, "gfx942", seed=seed)
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
    _, data = _handoff(same_word=False, deadline=1_000_000)
    assert data.tolist() == [42, -1]


def test_unknown_op_names_itself_and_its_line():
    from kerneltune.interpreter.program import Program, UnknownOp

    from .kernels import UNKNOWN

    with pytest.raises(UnknownOp, match=r"arith.ceildivsi .* at -:\d+"):
        Program(UNKNOWN)


def test_launch_helper_runs_many_blocks():
    from .kernels import DIVERGENT_STORE

    out = np.zeros(8, np.int32)
    run, _ = launch(DIVERGENT_STORE, {"out": out}, [8], blocks=3)
    assert run.resumes == 3
