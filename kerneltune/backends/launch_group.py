"""One launch spanning N GPUs: N rank processes (one per GPU), a rendezvous, symmetric peer buffers
with flag words, and event timing of each step across the group.

A multi-GPU kernel (the drafter's TP4 megakernel) is a :class:`RankProgram`: each rank process builds
it, allocates its symmetric buffers through :class:`RankContext`, and launches one step at a time. The
parent (:class:`LaunchGroup`) runs a checked step (outputs poisoned first) and timed steps, each rank
timing its own steps with device events; a step's time is the slowest rank's. A rank that does not
answer in time ends the whole group, so a kernel that hangs its flags costs a timeout, never the
worker.

Devices:
- ``cuda`` / ``rocm``: torch.distributed (NCCL/RCCL) for the rendezvous, events for timing; the peer buffers
  in torch symmetric memory on ``cuda``, uncached HIP memory over HIP IPC on ``rocm`` (``hip_peer_memory``).
  ``cuda`` is how the group is proven on NVIDIA GPUs with a stand-in kernel (``kerneltune/kernels/peer_exchange``);
  ``rocm`` is what the drafter needs and has never run here (no AMD GPU in this workplace).
- ``emulated`` (``KERNELTUNE_GROUP_DEVICE=emulated``): CPU processes stand in for the GPUs, POSIX
  shared memory for the peer buffers, gloo for the rendezvous, the host clock for timing. It runs
  the same orchestration, so everything up to the device calls is tested on CPUs.
- ``interpret`` (``KERNELTUNE_GROUP_DEVICE=interpret``): the same CPU processes, where a kernel that has a
  CPU interpreter run (the drafter) runs its compiled program there instead of its emulation.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import shutil
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kerneltune.seams.protocols import TakeBatch
from kerneltune.tables.stamps import device_kind

from .host import wall_clock_sampler

DEVICE_ENV = "KERNELTUNE_GROUP_DEVICE"
MATCHED = ("gpu", "gpu_count", "group_device", "runtime", "torch", "kernel_hash")
EMULATED_RANKS = 8  # the most ranks an emulated group offers
CPU_DEVICES = ("emulated", "interpret")  # CPU processes stand in for the GPUs


class GroupError(RuntimeError):
    """A rank failed or gave no answer in time; the message names the rank and what it said."""


# ----------------------------------------------------------------------------- rank side

class SymmetricBuffer(Protocol):
    """int32 words every rank allocated under one name: its own and, for each peer, the peer's."""

    local: Any  # numpy array (emulated) or torch tensor (GPU)
    ptrs: list[int]  # device addresses of every rank's buffer (GPU); [] emulated

    def peer(self, rank: int) -> Any: ...


@dataclass
class _SharedMemoryBuffer:
    local: Any
    peers: list[Any]
    handles: list[Any]
    ptrs: list[int] = field(default_factory=list)

    def peer(self, rank: int) -> Any:
        return self.peers[rank]


@dataclass
class _TorchSymmetricBuffer:
    local: Any
    handle: Any
    words: int

    @property
    def ptrs(self) -> list[int]:
        return list(self.handle.buffer_ptrs)

    def peer(self, rank: int) -> Any:
        import torch

        return self.handle.get_buffer(rank, (self.words,), torch.int32)


class RankContext:
    """What a rank program may use: its rank, the group, symmetric buffers, a barrier and its device."""

    def __init__(self, rank: int, size: int, device: str, workdir: Path, group_id: str):
        self.rank, self.size, self.device, self.workdir, self.group_id = rank, size, device, workdir, group_id
        self._owned: list[Any] = []
        self._opened: list[Any] = []
        self._hip_buffers: list[Any] = []
        self.torch_device: Any = None

    @property
    def on_gpu(self) -> bool:
        return self.device in ("cuda", "rocm")

    def start(self) -> None:
        import torch
        import torch.distributed as dist

        if self.on_gpu:
            torch.cuda.set_device(self.rank)
            self.torch_device = torch.device("cuda", self.rank)
        dist.init_process_group("nccl" if self.on_gpu else "gloo", init_method=f"file://{self.workdir}/rendezvous",
                                rank=self.rank, world_size=self.size)

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def symmetric(self, name: str, words: int) -> SymmetricBuffer:
        """Collective: every rank allocates ``words`` int32 words under ``name``, zeroed, and sees its peers'.
        On ``rocm`` they are uncached device memory shared over HIP IPC (``hip_peer_memory``: why)."""
        if self.device == "rocm":
            from .hip_peer_memory import allocate

            buffer = allocate(words, self.rank, self.size, self.torch_device)
            self._hip_buffers.append(buffer)
            return buffer
        if self.on_gpu:
            import torch
            import torch.distributed as dist
            import torch.distributed._symmetric_memory as symm_mem

            group = dist.group.WORLD.group_name
            with contextlib.suppress(AttributeError):  # needed before torch 2.7, a no-op after
                symm_mem.enable_symm_mem_for_group(group)
            local = symm_mem.empty(words, dtype=torch.int32, device=self.torch_device)
            handle = symm_mem.rendezvous(local, group)
            local.zero_()
            torch.cuda.synchronize()
            self.barrier()
            return _TorchSymmetricBuffer(local, handle, words)
        from multiprocessing import shared_memory

        import numpy as np

        def shm_name(rank: int) -> str:
            return f"kt{self.group_id}{name}{rank}"

        mine = shared_memory.SharedMemory(shm_name(self.rank), create=True, size=4 * words)
        self._owned.append(mine)
        local = np.ndarray((words,), np.int32, mine.buf)
        local[:] = 0
        self.barrier()
        peers, handles = [], []
        for r in range(self.size):
            shm = mine if r == self.rank else shared_memory.SharedMemory(shm_name(r))
            if r != self.rank:
                self._opened.append(shm)
            handles.append(shm)
            peers.append(local if r == self.rank else np.ndarray((words,), np.int32, shm.buf))
        return _SharedMemoryBuffer(local, peers, handles)

    def synchronize(self) -> None:
        if self.on_gpu:
            import torch

            torch.cuda.synchronize()

    def time_steps(self, launch: Any, n: int) -> list[float]:
        """n steps, each timed on this rank (device events, or the host clock emulated), in ms."""
        self.barrier()
        if not self.on_gpu:
            return wall_clock_sampler(launch)(n)
        import torch

        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            start.record()
            launch()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in events]

    def close(self) -> None:
        import torch.distributed as dist

        with contextlib.suppress(Exception):
            self.barrier()  # no rank unlinks a buffer a peer still reads
        for buffer in self._hip_buffers:
            buffer.close()
        for shm in self._opened:
            shm.close()
        for shm in self._owned:
            shm.close()
            shm.unlink()
        if dist.is_initialized():
            dist.destroy_process_group()


class RankProgram(Protocol):
    """One rank's part of a multi-GPU kernel."""

    def setup(self, ctx: RankContext) -> None: ...
    def load(self, ctx: RankContext, spec: Any) -> None:
        """Take a candidate's inputs (a picklable description each rank builds its tensors from)."""
        ...
    def poison(self, ctx: RankContext) -> None:
        """Fill the outputs with values no correct launch writes."""
        ...
    def launch(self, ctx: RankContext) -> None:
        """One step, asynchronous on the device; every step carries new flag tags."""
        ...
    def output(self, ctx: RankContext) -> Any:
        """After a synchronized step: what the parent checks (picklable), health words included."""
        ...


def _load(path: str) -> Any:
    module, attr = path.split(":", 1)
    return getattr(importlib.import_module(module), attr)


@functools.cache
def _processes(device: str) -> Any:
    """How a group's rank processes start. On the CPU devices, forked from a server that has imported torch once
    (``forkserver``, started on first use with this process's environment): a fresh Python imported torch for each
    rank (3.6 s on the CPU machine; four ranks on two cores about 7 s a group). On GPUs a fresh Python each
    (``spawn``), as they were proven on the H200s (a fork server has not run there)."""
    if device not in CPU_DEVICES:
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch.distributed", "kerneltune.backends.launch_group"])
    return ctx


def _rank_main(rank: int, size: int, device: str, workdir: str, group_id: str, program: str,
               params: dict[str, Any], conn: mpc.Connection, env: dict[str, str]) -> None:
    """A rank process: build the program, then answer the parent's commands until told to close. ``env``: the
    parent's environment now (a fork server's is the one it started with)."""
    from kerneltune.seams.process import die_with_parent

    os.environ.clear()
    os.environ.update(env)
    die_with_parent()
    ctx = RankContext(rank, size, device, Path(workdir), group_id)
    try:
        ctx.start()
        prog: RankProgram = _load(program)(**params)
        prog.setup(ctx)
        ctx.synchronize()
        conn.send((True, None))
    except BaseException:
        conn.send((False, traceback.format_exc()[-3000:]))
        return
    while True:
        cmd, arg = conn.recv()
        try:
            if cmd == "close":
                ctx.close()
                conn.send((True, None))
                return
            if cmd == "load":
                prog.load(ctx, arg)
                ctx.synchronize()
                conn.send((True, None))
            elif cmd == "check":
                prog.poison(ctx)
                ctx.synchronize()
                ctx.barrier()
                prog.launch(ctx)
                ctx.synchronize()
                conn.send((True, prog.output(ctx)))
            elif cmd == "time":
                conn.send((True, ctx.time_steps(lambda: prog.launch(ctx), int(arg))))
            else:
                conn.send((False, f"unknown command {cmd!r}"))
        except BaseException:
            conn.send((False, traceback.format_exc()[-3000:]))


# ----------------------------------------------------------------------------- parent side

class LaunchGroup:
    """N rank processes running one program; ``check()`` and ``take(n)`` run steps on all of them."""

    def __init__(self, program: str, params: dict[str, Any], size: int, device: str, timeout: float = 120.0,
                 setup_timeout: float = 300.0):
        """``timeout`` bounds each command after the setup, which ``setup_timeout`` bounds (processes start,
        import their framework, meet and build the program)."""
        self.size, self.device, self.timeout = size, device, timeout
        self.workdir = Path(tempfile.mkdtemp(prefix="kerneltune-group-"))
        ctx = _processes(device)
        self.conns: list[mpc.Connection] = []
        self.procs: list[Any] = []
        # The ranks' environment, this process's own untouched. No NVLink multicast anywhere (a program using it can
        # take a host's GPUs out of service) unless the caller says otherwise.
        env = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0", **os.environ}
        try:
            group_id = uuid.uuid4().hex[:8]
            for rank in range(size):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_rank_main, daemon=True, name=f"kerneltune-rank{rank}",
                                   args=(rank, size, device, str(self.workdir), group_id, program, params, child, env))
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
            self._replies("setup", setup_timeout)
        except BaseException:
            self.close()
            raise

    def _replies(self, what: str, timeout: float | None = None) -> list[Any]:
        """Every rank's answer to the command just sent, within the timeout; else the group is ended."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        out: list[Any] = [None] * self.size
        pending = set(range(self.size))
        while pending:
            ready = mpc.wait([self.conns[r] for r in pending], timeout=max(deadline - time.monotonic(), 0))
            if not ready:
                self.kill()
                raise GroupError(f"launch group {what}: rank(s) {sorted(pending)} gave no answer within "
                                 f"{timeout:.0f} s; every rank ended")
            for conn in ready:
                r = self.conns.index(conn)
                try:
                    ok, value = conn.recv()
                except EOFError:
                    self.procs[r].join(timeout=5)
                    code = self.procs[r].exitcode
                    self.kill()
                    raise GroupError(f"launch group {what}: rank {r} died (exit code {code})") from None
                if not ok:
                    self.kill()
                    raise GroupError(f"launch group {what}: rank {r}: {value.strip().splitlines()[-1]}\n{value}")
                out[r] = value
                pending.discard(r)
        return out

    def _all(self, cmd: str, arg: Any = None) -> list[Any]:
        for conn in self.conns:
            conn.send((cmd, arg))
        return self._replies(cmd)

    def load(self, spec: Any) -> None:
        """Every rank takes the inputs ``spec`` describes."""
        self._all("load", spec)

    def check(self) -> list[Any]:
        """One step on poisoned outputs: every rank's ``output``."""
        return self._all("check")

    def take(self, n: int) -> list[float]:
        """n timed steps: per step, the slowest rank's time (ms)."""
        per_rank = self._all("time", n)
        return [max(step) for step in zip(*per_rank, strict=True)]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(timeout=10)
        self.procs = []
        shutil.rmtree(self.workdir, ignore_errors=True)

    def close(self) -> None:
        if self.procs and all(p.is_alive() for p in self.procs):
            with contextlib.suppress(GroupError, OSError):
                self._all("close")
        self.kill()


# ----------------------------------------------------------------------------- the backend

@functools.cache
def group_device() -> str:
    """``emulated`` or ``interpret`` where asked for, else ``rocm`` or ``cuda`` where torch sees GPUs, else
    ``none``."""
    if os.environ.get(DEVICE_ENV) in CPU_DEVICES:
        return str(os.environ[DEVICE_ENV])
    try:
        import torch
    except ImportError:
        return "none"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "rocm" if torch.version.hip else "cuda"
    return "none"


class LaunchGroupBackend:
    name = "launch-group"
    matched_stamps = MATCHED

    def stamps(self) -> dict[str, Any]:
        device = group_device()
        base = {"backend": self.name, "matched": list(MATCHED), "group_device": device}
        if device == "none" or device in CPU_DEVICES:
            import torch

            return {**base, "gpu": device, "device_kind": device,
                    "gpu_count": EMULATED_RANKS if device in CPU_DEVICES else 0, "runtime": "none",
                    "torch": torch.__version__}
        import torch

        props = torch.cuda.get_device_properties(0)
        stamps = {**base, "gpu": props.name, "device_kind": device_kind(props.name),
                  "gpu_count": torch.cuda.device_count(), "torch": torch.__version__,
                  "runtime": torch.version.hip if device == "rocm" else torch.version.cuda}
        if device == "rocm":
            stamps["arch"] = props.gcnArchName.split(":")[0]
            stamps["cu_count"] = props.multi_processor_count
        else:
            stamps["sm_count"] = props.multi_processor_count
        return stamps

    def ceilings(self) -> dict[str, float]:
        return {}

    def sampler(self, fn: Any, args: tuple[Any, ...], cold_l2: bool) -> TakeBatch:
        """``fn`` is the built :class:`LaunchGroup`; each rank times its own steps."""
        group: LaunchGroup = fn
        return group.take

    def worker_env(self, devices: str | None) -> dict[str, str]:
        """The group's GPUs, named for CUDA and for HIP (ROCm honours both; an NVIDIA machine ignores HIP's)."""
        return {} if devices is None else {"CUDA_VISIBLE_DEVICES": devices, "HIP_VISIBLE_DEVICES": devices}

    def prepare_worker(self, compile_cache: str | None) -> None:
        pass

    def is_sticky(self, error: BaseException) -> bool:
        device = group_device()
        if device == "cuda":
            from .cuda_jax import cuda_error_is_sticky

            return cuda_error_is_sticky(error)
        if device == "rocm":
            from .rocm_torch import hip_error_is_sticky

            return hip_error_is_sticky(error)
        return False

    def clocks(self) -> dict[str, Any]:
        device = group_device()
        if device == "cuda":
            from .cuda_jax import gpu_clocks

            return gpu_clocks()
        if device == "rocm":
            from .rocm_torch import rocm_clocks

            return rocm_clocks()
        return {}


BACKEND = LaunchGroupBackend()
