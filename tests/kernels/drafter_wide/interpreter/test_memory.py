import numpy as np
import pytest

from kerneltune.kernels.drafter_wide.interpreter.memory import GlobalMemory, MemoryFault, SharedMemory


def test_allocations_share_the_callers_bytes_and_fault_past_their_end():
    mem = GlobalMemory()
    a = np.arange(4, dtype=np.int32)
    base = mem.allocate("a", a)
    b = mem.allocate("b", np.zeros(4, np.int32))
    got = mem.load(np.array([base, base + 12]), 4, "here").view(np.int32)
    assert got.ravel().tolist() == [0, 3]
    mem.store(np.array([base + 4]), np.array([[9, 0, 0, 0]], np.uint8), "here")
    assert a[1] == 9
    with pytest.raises(MemoryFault, match=r"here: a 4-byte access at .* 16 bytes into a"):
        mem.load(np.array([base, base + 16]), 4, "here")
    with pytest.raises(MemoryFault, match="below every allocation"):
        mem.load(np.array([16]), 4, "here")
    assert mem.load(np.array([b]), 4, "here").shape == (1, 4)


def test_lds_starts_as_nan_and_faults_outside_the_block():
    lds = SharedMemory(16)
    assert np.isnan(lds.load(np.array([4]), 4, "x").view(np.float32)).all()
    with pytest.raises(MemoryFault, match="LDS access at offset 16 leaves the block's 16 bytes"):
        lds.store(np.array([16]), np.zeros((1, 4), np.uint8), "x")
