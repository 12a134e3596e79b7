"""The exchange itself, once per device: Triton on a GPU, NumPy on the emulated group.

Layout of each rank's symmetric buffer (int32 words): two halves of ``words`` data words, then two
halves of one flag word per chunk of ``block`` data words; step ``s`` uses half ``s % 2``, so a rank
one step ahead never overwrites data its peer still copies. Step ``s`` writes ``payload(src, s, i)``
into the next rank's data and then raises each chunk's flag to tag ``s`` (release); the receiver polls
its flags (acquire) for at most ``max_spins`` polls, copies the chunk out, and on a missed deadline
writes its health word (``1 + chunk``) instead of hanging.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

MASK = 0x3FFFFFFF
POISON = -1  # no payload is negative


def payload(src: int, step: int, n: int) -> np.ndarray:
    """What rank ``src`` sends at ``step``: words a wrong address, rank or step cannot reproduce."""
    i = np.arange(n, dtype=np.int64)
    return ((src * 1_000_003 + step * 7_919 + i * 2_654_435_761) & MASK).astype(np.int32)


def chunks(words: int, block: int) -> int:
    return -(-words // block)


def buffer_words(words: int, block: int) -> int:
    return 2 * (words + chunks(words, block))


def halves(buf: Any, words: int, block: int, step: int) -> tuple[Any, Any]:
    """(data, flags) of the half of ``buf`` that ``step`` uses."""
    h, n = step % 2, chunks(words, block)
    return buf[h * words:(h + 1) * words], buf[2 * words + h * n:2 * words + (h + 1) * n]


class NumpyExchange:
    """The emulated device: plain stores into shared memory, polled flags with a wall-clock deadline."""

    def __init__(self, words: int, block: int, deadline_s: float, raise_flags: bool = True):
        self.words, self.block, self.deadline_s, self.raise_flags = words, block, deadline_s, raise_flags

    def put(self, data: np.ndarray, flags: np.ndarray, src: int, step: int) -> None:
        sent = payload(src, step, self.words)
        for c in range(chunks(self.words, self.block)):
            lo, hi = c * self.block, min((c + 1) * self.block, self.words)
            data[lo:hi] = sent[lo:hi]
            if self.raise_flags:
                flags[c] = step  # x86 keeps the stores in order: the flag follows its data

    def wait_copy(self, data: np.ndarray, flags: np.ndarray, out: np.ndarray, health: np.ndarray,
                  step: int) -> None:
        for c in range(chunks(self.words, self.block)):
            end = time.monotonic() + self.deadline_s
            while flags[c] < step:
                if time.monotonic() > end:
                    health[0] = 1 + c
                    return
                time.sleep(0)
            lo, hi = c * self.block, min((c + 1) * self.block, self.words)
            out[lo:hi] = data[lo:hi]


def triton_exchange(words: int, block: int, num_warps: int, max_spins: int, raise_flags: bool = True) -> Any:
    """The GPU device: a put kernel and a wait-and-copy kernel, one program per chunk. ``raise_flags``
    False is a planted bug (data without its flag) that the deadline must catch."""
    import triton
    import triton.language as tl

    @triton.jit
    def put_kernel(data_ptr, flags_ptr, words, src, step, BLOCK: tl.constexpr, RAISE: tl.constexpr):
        c = tl.program_id(0)
        i = c * BLOCK + tl.arange(0, BLOCK)
        keep = i < words
        value = (src * 1_000_003 + step * 7_919 + i.to(tl.int64) * 2_654_435_761) & 0x3FFFFFFF
        tl.store(data_ptr + i, value.to(tl.int32), mask=keep)
        tl.debug_barrier()
        if RAISE:
            tl.atomic_xchg(flags_ptr + c, step, sem="release", scope="sys")

    @triton.jit
    def wait_copy_kernel(data_ptr, flags_ptr, out_ptr, health_ptr, words, step, max_spins, BLOCK: tl.constexpr):
        c = tl.program_id(0)
        flag = tl.atomic_add(flags_ptr + c, 0, sem="acquire", scope="sys")
        spins = 0
        while (flag < step) & (spins < max_spins):
            flag = tl.atomic_add(flags_ptr + c, 0, sem="acquire", scope="sys")
            spins += 1
        if flag < step:
            tl.atomic_max(health_ptr, 1 + c)
        else:
            i = c * BLOCK + tl.arange(0, BLOCK)
            keep = i < words
            tl.store(out_ptr + i, tl.load(data_ptr + i, mask=keep, volatile=True), mask=keep)

    grid = (chunks(words, block),)

    class TritonExchange:
        def put(self, data: Any, flags: Any, src: int, step: int) -> None:
            put_kernel[grid](data, flags, words, src, step, BLOCK=block, RAISE=raise_flags, num_warps=num_warps)

        def wait_copy(self, data: Any, flags: Any, out: Any, health: Any, step: int) -> None:
            wait_copy_kernel[grid](data, flags, out, health, words, step, max_spins, BLOCK=block,
                                   num_warps=num_warps)

    return TritonExchange()
