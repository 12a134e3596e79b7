"""Peer buffers on AMD GPUs allocated the way AMD's own cross-GPU kernels allocate them: uncached device memory
shared over HIP IPC. Never run: no AMD GPU exists in this workplace.

A rank polls flag words its peers write over the fabric, then reads the data behind them. Memory from
``hipMalloc`` is coarse-grained: HIP promises it coherent across devices only at kernel boundaries, so within a
kernel a GPU's L2 may answer a read of a peer's buffer from a line it cached before the peer wrote. AMD's own
kernels avoid that by allocating their IPC buffers uncached: aiter's custom all-reduce and FlyDSL's all-reduce
call ``hipExtMallocWithFlags(..., hipDeviceMallocUncached)`` for the buffers and flags every rank maps, and read
the peers' data with loads that bypass the caches (``sc1``). LLVM's AMDGPU memory model (AMDGPUUsage, "Memory
Model GFX942") keeps L2s of different agents coherent only for memory mapped uncached (MTYPE UC) or non-coherent
with the PTE C-bit set, and gives a system-scope atomic load the ``sc0 sc1`` bits; the drafter does both: these
buffers, and system-scope loads for every word a peer wrote (``kernels/drafter_wide/device.py``).

The calls are HIP's documented C API through ctypes: ``hipExtMallocWithFlags``, ``hipMemset``,
``hipIpcGetMemHandle``, ``hipIpcOpenMemHandle`` (``hipIpcMemLazyEnablePeerAccess``), ``hipIpcCloseMemHandle`` and
``hipFree``; the 64-byte handles go round the group with torch.distributed.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass, field
from typing import Any

DEVICE_MALLOC_UNCACHED = 0x3  # hipDeviceMallocUncached (hip_runtime_api.h)
IPC_LAZY_ENABLE_PEER_ACCESS = 0x1  # hipIpcMemLazyEnablePeerAccess
IPC_HANDLE_BYTES = 64  # HIP_IPC_HANDLE_SIZE


class HipError(RuntimeError):
    pass


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]  # bytes, NULs included (c_char would cut at one)


@functools.cache
def _hip() -> Any:
    lib = ctypes.CDLL("libamdhip64.so")
    lib.hipGetErrorString.restype = ctypes.c_char_p
    return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise HipError(f"{call}: {_hip().hipGetErrorString(status).decode()} (hipError {status})")


class _Words:
    """int32 words at a device address, as the CUDA array interface describes them (torch reads it on ROCm)."""

    def __init__(self, ptr: int, words: int):
        self.__cuda_array_interface__ = {"shape": (words,), "typestr": "<i4", "data": (ptr, False), "version": 2}


def as_tensor(ptr: int, words: int, device: Any) -> Any:
    import torch

    return torch.as_tensor(_Words(ptr, words), device=device)


@dataclass
class UncachedPeerBuffer:
    """A ``SymmetricBuffer``: this rank's uncached words and its peers', mapped over HIP IPC."""

    local: Any
    ptrs: list[int]
    words: int
    device: Any
    rank: int
    _opened: list[int] = field(default_factory=list)

    def peer(self, rank: int) -> Any:
        return as_tensor(self.ptrs[rank], self.words, self.device)

    def close(self) -> None:
        for ptr in self._opened:
            _check(_hip().hipIpcCloseMemHandle(ctypes.c_void_p(ptr)), "hipIpcCloseMemHandle")
        self._opened.clear()
        _check(_hip().hipFree(ctypes.c_void_p(self.ptrs[self.rank])), "hipFree")


def allocate(words: int, rank: int, size: int, device: Any) -> UncachedPeerBuffer:
    """Collective: every rank allocates ``words`` zeroed int32 words uncached and maps its peers' (in rank order)."""
    import torch.distributed as dist

    hip = _hip()
    nbytes = 4 * words
    mine = ctypes.c_void_p()
    _check(hip.hipExtMallocWithFlags(ctypes.byref(mine), ctypes.c_size_t(nbytes), DEVICE_MALLOC_UNCACHED),
           "hipExtMallocWithFlags(hipDeviceMallocUncached)")
    _check(hip.hipMemset(mine, 0, ctypes.c_size_t(nbytes)), "hipMemset")
    _check(hip.hipDeviceSynchronize(), "hipDeviceSynchronize")
    handle = _IpcHandle()
    _check(hip.hipIpcGetMemHandle(ctypes.byref(handle), mine), "hipIpcGetMemHandle")
    handles: list[Any] = [None] * size
    dist.all_gather_object(handles, bytes(handle.reserved))
    ptrs, opened = [], []
    for r, raw in enumerate(handles):
        if r == rank:
            ptrs.append(int(mine.value or 0))
            continue
        theirs, peer = _IpcHandle.from_buffer_copy(raw), ctypes.c_void_p()
        _check(hip.hipIpcOpenMemHandle(ctypes.byref(peer), theirs, IPC_LAZY_ENABLE_PEER_ACCESS),
               f"hipIpcOpenMemHandle(rank {r})")
        ptrs.append(int(peer.value or 0))
        opened.append(int(peer.value or 0))
    dist.barrier()
    return UncachedPeerBuffer(as_tensor(ptrs[rank], words, device), ptrs, words, device, rank, opened)
