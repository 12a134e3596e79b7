"""Waves as the unit of ordering: LDS shared between the waves of a block needs a barrier between a write and
another wave's access, and every wave must reach each barrier."""

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.races import BarrierDivergence, Race

from .helpers import launch
from .kernels import lds_same_bytes, lds_share


def test_with_both_barriers_the_waves_swap_words_and_nothing_races():
    out = np.full(128, -1, np.int32)
    launch(lds_share(), {"out": out})
    np.testing.assert_array_equal(out, (np.arange(128) + 64) % 128)


def test_a_deleted_barrier_before_the_other_waves_read_is_a_race_naming_both_lines_and_waves():
    with pytest.raises(Race, match=r"LDS race in rank 0 block 0: wave 0's read at llvm.load at -:(\d+) and wave 1's "
                                   r"write at llvm.store at -:(\d+), byte 256 of the block's LDS, with no barrier"):
        launch(lds_share(first_barrier=False), {"out": np.zeros(128, np.int32)})


def test_a_deleted_barrier_before_overwriting_what_the_other_wave_read_is_a_race():
    with pytest.raises(Race, match=r"wave 0's write at llvm.store at -:\d+ and wave 1's read at llvm.load at -:\d+, "
                                   r"byte 0 "):
        launch(lds_share(second_barrier=False), {"out": np.zeros(128, np.int32)})


def test_the_race_check_can_be_turned_off_and_then_lockstep_hides_the_bug():
    """Without the check, the lockstep run gives the right words: the bug only shows as a race."""
    out = np.full(128, -1, np.int32)
    launch(lds_share(first_barrier=False), {"out": out}, races=False)
    np.testing.assert_array_equal(out, (np.arange(128) + 64) % 128)


def test_a_barrier_only_one_wave_reaches_is_a_divergence():
    with pytest.raises(BarrierDivergence, match=r"gpu.barrier at -:\d+: rank 0 block 0: waves \[0\] reach it and "
                                                r"waves \[1\] skip it"):
        launch(lds_share(uniform_barrier=False), {"out": np.zeros(128, np.int32)})


@pytest.mark.parametrize("access", ["store", "store unaligned"])
def test_two_waves_lanes_of_one_store_at_the_same_bytes_are_a_race(access):
    """Aligned (a row a lane) and unaligned (byte by byte): either wave's value may land."""
    with pytest.raises(Race, match=r"wave 0's write at llvm.store at -:(\d+) and wave 1's write at llvm.store at "
                                   r"-:\1, byte [0-9]+ of the block's LDS"):
        launch(lds_same_bytes(access), {"out": np.zeros(128, np.int32)})


def test_a_word_both_waves_read_in_one_op_then_one_wave_writes_races_unless_a_barrier_lies_between():
    with pytest.raises(Race, match=r"wave 0's write at llvm.store at -:\d+ and another wave's read at llvm.load"):
        launch(lds_same_bytes("read then write"), {"out": np.zeros(128, np.int32)})
    out = np.full(128, -1, np.int32)
    launch(lds_same_bytes("read then write", barrier=True), {"out": out})
    np.testing.assert_array_equal(out, np.full(128, -1))  # LDS starts as 0xFF bytes: every lane read -1


def test_a_word_both_waves_read_in_one_op_is_read_by_another_wave_for_the_last_wave_too():
    """The last lane to read a word is of wave 1; wave 1 then writing it still races with wave 0's read."""
    with pytest.raises(Race, match=r"wave 1's write at llvm.store at -:\d+ and another wave's read at llvm.load"):
        launch(lds_same_bytes("read then write", writer=64), {"out": np.zeros(128, np.int32)})
