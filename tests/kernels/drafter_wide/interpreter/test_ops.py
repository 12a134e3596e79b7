import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.memory import MemoryFault

from .helpers import launch
from .kernels import DIVERGENT_STORE, LDS_ROTATE, PER_LANE_LOOP


def test_divergent_if_merges_per_lane_and_masks_stores():
    out = np.full(40, -999, np.int32)
    launch(DIVERGENT_STORE, {"out": out}, [40])
    tid = np.arange(40)
    np.testing.assert_array_equal(out, np.where(tid % 2 == 1, 2 * tid, -tid))


def test_an_active_lane_past_its_buffer_faults_naming_the_line():
    with pytest.raises(MemoryFault, match=r"llvm.store at -:\d+: a 4-byte access at .* leaves every allocation"):
        launch(DIVERGENT_STORE, {"out": np.zeros(40, np.int32)}, [41])


def test_while_runs_each_lane_its_own_count_and_shuffle_xor_swaps_neighbours():
    out = np.full(128, -1, np.int32)
    launch(PER_LANE_LOOP, {"out": out})
    np.testing.assert_array_equal(out[:64], np.arange(64))
    np.testing.assert_array_equal(out[64:].view(np.float32), (np.arange(64) ^ 1).astype(np.float32))


def test_lds_round_trip_between_lanes():
    out = np.zeros(64, np.int32)
    launch(LDS_ROTATE, {"out": out})
    np.testing.assert_array_equal(out, (np.arange(64) + 1) % 64)
