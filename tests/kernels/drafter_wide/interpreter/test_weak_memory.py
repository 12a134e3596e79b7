"""The weak model of global memory: data published behind a flag is read safely only where a release of a scope
that reaches the reader, and the reader's acquire, order the store before the load."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerneltune.kernels.drafter_wide.interpreter.machine import Grid, Launch
from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory
from kerneltune.kernels.drafter_wide.interpreter.program import Program
from kerneltune.kernels.drafter_wide.interpreter.races import Race
from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule, exploration
from kerneltune.kernels.drafter_wide.interpreter.weak_memory import _row_stamps, scope_of

from .kernels import weak_handoff

FIXED = Schedule()


def _handoff(publish: str, schedule: Schedule = FIXED, ranks: int = 1, acquire: str = "acquire") -> int:
    """The value the reader copied (block 0 reads; block 1 writes, or with ``ranks=2`` block 0 of rank 1)."""
    mem = GlobalMemory()
    flag, data, out = np.zeros(1, np.int32), np.zeros(1, np.int32), np.full(1, -1, np.int32)
    a = [mem.allocate("flag", flag), mem.allocate("data", data), mem.allocate("out", out)]
    grids = [Grid([*a, 0], 2)] if ranks == 1 else [Grid([*a, 0], 1, rank=0), Grid([*a, 1], 1, rank=1)]
    Launch(Program(weak_handoff(publish, acquire)), mem, "gfx942", schedule=schedule).run(grids)
    return int(out[0])


@pytest.mark.parametrize("publish", ["release store", "fence then relaxed store", "agent release store"])
def test_a_release_the_reader_acquires_hands_the_data_over_in_every_interleaving(publish):
    for schedule in exploration(6, steps=20):
        assert _handoff(publish, schedule) == 42, schedule


def test_a_tag_published_before_its_data_is_a_race_or_a_wrong_value_in_every_interleaving():
    """Where the reader runs between the tag and the data it copies the old word (a wrong value the check sees);
    where it runs after both stores, the load is a race: the data store follows the release."""
    outcomes = []
    for schedule in exploration(8, steps=20):
        try:
            outcomes.append(_handoff("tag before data", schedule))
        except Race as e:
            assert "wave 0's read at llvm.load" in str(e) and "block 1 wave 0 at llvm.store" in str(e)
            outcomes.append("race")
    assert 42 not in outcomes
    assert "race" in outcomes and 0 in outcomes, outcomes


@pytest.mark.parametrize("publish", ["relaxed store, no fence", "workgroup fence"])
def test_a_missing_release_or_a_fence_of_too_narrow_a_scope_is_a_race(publish):
    with pytest.raises(Race, match=r"global race: rank 0 block 0 wave 0's read at llvm.load at -:\d+ of byte 0 of "
                                   r"data .* store by rank 0 block 1 wave 0 at llvm.store at -:\d+: no release"):
        _handoff(publish)


def test_an_agent_scope_release_reaches_its_own_gpu_but_not_a_peer():
    assert _handoff("agent release store") == 42
    with pytest.raises(Race, match="store by rank 1 block 0 wave 0"):
        _handoff("agent release store", ranks=2)
    assert _handoff("release store", ranks=2) == 42


def test_a_relaxed_poll_does_not_acquire():
    with pytest.raises(Race):
        _handoff("release store", acquire="monotonic")


def test_scopes_read_as_llvm_names_them():
    assert [scope_of(s) for s in ("one-as", "", "agent-one-as", "agent", "workgroup-one-as", "wavefront")] == \
        [3, 3, 2, 2, 1, 0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.sampled_from([1, 2, 4, 8, 16]).flatmap(
    lambda nb: st.lists(st.integers(0, 5), min_size=n * nb, max_size=n * nb).map(
        lambda xs: np.asarray(xs, np.int32).reshape(n, nb)))), st.booleans())
def test_an_accesss_stamps_are_every_stamp_its_bytes_hold(sids, reversed_rows):
    """What the checks judge of a load: fewer stamps than bytes, but each (access, stamp) pair its bytes hold."""
    sids = sids[::-1] if reversed_rows else sids
    stamps, rows = _row_stamps(sids)
    rows = np.arange(sids.shape[0]) if rows is None else rows
    assert set(zip(rows.tolist(), stamps.tolist(), strict=True)) == {
        (i, int(v)) for i in range(sids.shape[0]) for v in sids[i]}
