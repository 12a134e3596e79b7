"""The ROCm peer buffers up to the HIP calls (never run on an AMD GPU here): each rank allocates uncached memory,
zeroes it, hands its IPC handle round the group, opens every peer's with lazy peer access, and on close unmaps
the peers' and frees its own; a failing call is one error naming it."""

import ctypes

import pytest

from kerneltune.backends import hip_peer_memory as hpm

SIZE = 4


class FakeHip:
    """libamdhip64 as far as the calls go: device memory as addresses, IPC handles naming them."""

    def __init__(self, base: int):
        self.base, self.calls, self.fail = base, [], None

    def _ret(self, name: str) -> int:
        return 1 if name == self.fail else 0

    def hipExtMallocWithFlags(self, out, size, flags):
        self.calls.append(("malloc", size.value, flags))
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = self.base
        return self._ret("hipExtMallocWithFlags")

    def hipMemset(self, ptr, value, size):
        self.calls.append(("memset", ptr.value, value, size.value))
        return self._ret("hipMemset")

    def hipDeviceSynchronize(self):
        return 0

    def hipIpcGetMemHandle(self, out, ptr):
        ctypes.memmove(out, ptr.value.to_bytes(8, "little") + bytes(56), hpm.IPC_HANDLE_BYTES)
        return self._ret("hipIpcGetMemHandle")

    def hipIpcOpenMemHandle(self, out, handle, flags):
        owner = int.from_bytes(bytes(handle.reserved)[:8], "little")
        self.calls.append(("open", owner, flags))
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = owner + 0x100  # mapped elsewhere in this process
        return self._ret("hipIpcOpenMemHandle")

    def hipIpcCloseMemHandle(self, ptr):
        self.calls.append(("close", ptr.value))
        return 0

    def hipFree(self, ptr):
        self.calls.append(("free", ptr.value))
        return 0

    def hipGetErrorString(self, status):
        return b"hipErrorInvalidValue"


@pytest.fixture
def group(monkeypatch):
    """Rank 1 of 4; every rank's own allocation at 0x1000 * (rank + 1)."""
    fake = FakeHip(0x2000)
    monkeypatch.setattr(hpm, "_hip", lambda: fake)
    monkeypatch.setattr(hpm, "as_tensor", lambda ptr, words, device: ("tensor", ptr, words))
    import torch.distributed as dist

    def all_gather_object(out, mine):
        for r in range(SIZE):
            out[r] = mine if r == 1 else (0x1000 * (r + 1)).to_bytes(8, "little") + bytes(56)

    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    monkeypatch.setattr(dist, "barrier", lambda: None)
    return fake


def test_every_rank_allocates_uncached_zeroed_memory_and_maps_its_peers(group):
    buf = hpm.allocate(1000, rank=1, size=SIZE, device="rocm:1")
    assert group.calls[0] == ("malloc", 4000, hpm.DEVICE_MALLOC_UNCACHED)
    assert group.calls[1] == ("memset", 0x2000, 0, 4000)
    opened = [c for c in group.calls if c[0] == "open"]
    assert opened == [("open", a, hpm.IPC_LAZY_ENABLE_PEER_ACCESS) for a in (0x1000, 0x3000, 0x4000)]
    assert buf.ptrs == [0x1100, 0x2000, 0x3100, 0x4100] and buf.local == ("tensor", 0x2000, 1000)
    assert buf.peer(3) == ("tensor", 0x4100, 1000)
    buf.close()
    assert group.calls[-4:] == [("close", 0x1100), ("close", 0x3100), ("close", 0x4100), ("free", 0x2000)]


@pytest.mark.parametrize("call", ["hipExtMallocWithFlags", "hipMemset", "hipIpcGetMemHandle", "hipIpcOpenMemHandle"])
def test_a_failing_hip_call_is_one_error_naming_it(group, call):
    group.fail = call
    with pytest.raises(hpm.HipError, match=f"^{call}.*hipErrorInvalidValue"):
        hpm.allocate(8, rank=1, size=SIZE, device="rocm:1")
