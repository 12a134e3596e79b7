"""``verify --interpret``'s checks: the compiled kernel's interpreted steps, each judged against the float64 model
and the emulation, or against its own fixed order. Every step is an independent launch, so they run side by side
in worker processes (one a core, ``KERNELTUNE_INTERPRET_WORKERS`` to change that), as do the references they are
judged against (``check_cache``); the verdicts come back in one fixed order whatever finished first."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import math
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule
from kerneltune.seams.protocols import EmulationCheck

from . import memory_plan
from .interpreted import (
    CHECK_EXTRA,
    CHECK_RUNS,
    CHECK_SHAPE,
    SAME_BITS,
    capture_program,
    capture_text,
    layout_of,
    recipe,
    setup,
)
from .layout import TP

WORKERS_ENV = "KERNELTUNE_INTERPRET_WORKERS"


@dataclass(frozen=True)
class Stepped:
    """What a worker sends back of one interpreted step: the outputs, or the one line that ended it."""

    h_out: list[np.ndarray]
    caches: list[list[np.ndarray]]
    resumes: int
    error: str | None = None


_SETUPS: dict[tuple, tuple] = {}  # the last two shapes' setups, oldest first


def _setup(key: tuple) -> tuple:
    """``setup`` of a shape (its ``_key``), kept for the worker's next job of that shape (a second schedule of a
    step, its references): the weights and inputs are read, never written, by a step. Its weights hold their norm
    vectors and the last matrix read (``master_weights``); ``_release`` lets that matrix go after each job."""
    if key not in _SETUPS:
        while len(_SETUPS) >= 2:
            del _SETUPS[next(iter(_SETUPS))]
        _SETUPS[key] = setup(dict(key))
    return _SETUPS[key]


def _release() -> None:
    """Every kept shape's last weight matrix let go, and the memory the job freed given back to the system (glibc's
    ``malloc_trim``, where the C library has it): a job is done with them, and the worker's next job, or the other
    worker's, needs them."""
    for kept in _SETUPS.values():
        kept[2].release()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError, TypeError):  # no C library found, or one without it (musl)
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)


@functools.lru_cache(maxsize=2)
def _program(cache: Path, key: tuple, arch: str) -> Any:
    """The shape's program for ``arch``, read once a worker (3-6 s a read), as ``_setup`` keeps the inputs."""
    return capture_program(_setup(key)[0], arch, cache)


def capture(cache: Path, shape: dict, arch: str) -> str | None:
    """The shape's program for ``arch`` captured into ``cache`` (its steps then read it there); its failure. An
    op the interpreter lacks is found by the steps, which read the program."""
    from kerneltune.kernels.drafter_wide.interpreter.program import CaptureFailed

    try:
        capture_text(layout_of(shape)[0], arch, cache)
    except CaptureFailed as e:
        return f"{type(e).__name__}: {e}"
    return None


def step(cache: Path, shape: dict, arch: str, schedule: Schedule) -> Stepped:
    """One interpreted step of ``shape`` on ``arch`` in ``schedule``'s order; a fault, a deadlock, a race, a missed
    deadline or an op the interpreter lacks is its ``error``."""
    from kerneltune.kernels.drafter_wide.interpreter.machine import Deadlock
    from kerneltune.kernels.drafter_wide.interpreter.memory import MemoryFault
    from kerneltune.kernels.drafter_wide.interpreter.program import CaptureFailed, UnknownOp
    from kerneltune.kernels.drafter_wide.interpreter.races import BarrierDivergence, Race

    from .health import DeadlineMissed, check_health
    from .interpreted import run_step

    layout, dims, weights, inputs = _setup(_key(shape))
    try:
        got = run_step(_program(cache, _key(shape), arch), layout, dims, weights, inputs, arch, schedule=schedule)
        check_health(got.health)
    except (MemoryFault, Deadlock, DeadlineMissed, Race, BarrierDivergence, CaptureFailed, UnknownOp) as e:
        return Stepped([], [], 0, f"{type(e).__name__}: {e}")
    finally:
        _release()
    return Stepped(got.h_out, got.caches, got.launch.resumes)


def element_model(cache: Path, shape: dict) -> Any:
    """The shape's float64 element model, cached; its weights are drawn only where it is not."""
    from . import check_cache

    try:
        return check_cache.element_model(cache, shape, layout_of(shape)[1], recipe(shape),
                                         lambda: _setup(_key(shape))[2:])
    finally:
        _release()


def emulated(cache: Path, shape: dict, arch: str) -> tuple[list, list]:
    """The shape's emulation on ``arch``, cached like ``element_model``."""
    from . import check_cache

    def run() -> Any:
        from .emulation import Launch as Emulation

        return Emulation(*_setup(_key(shape)), numbers=arch).run()
    try:
        return check_cache.emulated(cache, shape, arch, run, recipe(shape))
    finally:
        _release()


class _Here(Executor):
    """One worker: every job in this process, at once (what a pool of one would do, without its start)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:
            f.set_exception(e)
        return f


def workers(jobs: int) -> int:
    """How many processes run ``jobs`` jobs: one a core, at most ``KERNELTUNE_INTERPRET_WORKERS``, and no more
    than this machine's memory holds (``memory_plan``: a ValueError where it holds none)."""
    return memory_plan.plan(_wanted(jobs)).workers


def _wanted(jobs: int) -> int:
    cores = len(os.sched_getaffinity(0))  # the cores this process may run on (Linux, as the interpreter's users)
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{WORKERS_ENV}={raw!r}: a whole number of processes, at least 1")
        cores = int(raw)
    return max(1, min(cores, jobs))


def plan(runs: tuple = CHECK_RUNS, extra: tuple = CHECK_EXTRA) -> memory_plan.Plan:
    """The memory plan of ``check_interpreted(cache, runs, extra=extra)``: its workers and its peak."""
    steps, fixed = _jobs(runs, extra)
    return memory_plan.plan(_wanted(steps + fixed))


# A worker's libraries each on one thread: one worker a core already (their own thread pools only contend).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# And glibc's malloc keeping what a step frees for its next op's arrays: by default an array over 128 KiB to 32 MiB
# is mapped and unmapped each time, and its pages faulted in again (half a step's system time: 4.6 s of a 512-thread
# layer's 35 s, 2.2 s so). Up to 32 MiB, the ops' arrays: above it (weight matrices, a rank's packed rows) mapped
# and given back when freed, and what a job leaves free given back when it ends (``_release``); with 256 MiB and
# 1 GiB, as before 2026-12-07's evening, a worker kept every matrix it had freed (issue 98: 2-3 GB a worker).
KEEP_FREED = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}
WORKER_ENV = {**ONE_THREAD, **KEEP_FREED}


class _Pool(ProcessPoolExecutor):
    """Spawned workers (the parent holds torch and FlyDSL's MLIR context, which a fork must not copy mid-use),
    started with ``WORKER_ENV`` in their environment (where the caller has not set them), the caller's own left
    as it was."""

    def __init__(self, n: int) -> None:
        super().__init__(n, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        saved = {k: os.environ.get(k) for k in WORKER_ENV}
        os.environ.update({k: os.environ.get(k) or v for k, v in WORKER_ENV.items()})
        try:
            return super().submit(fn, *args, **kwargs)  # workers start here, as jobs need them
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _executor(n: int) -> Executor:
    return _Here() if n == 1 else _Pool(n)


def _result(future: Future) -> tuple[Any, str | None]:
    try:
        return future.result(), None
    except BrokenProcessPool:
        return None, "the worker process running it died (killed for memory?); run again with " \
                     f"{WORKERS_ENV}=1 to run the checks one at a time"


def check_interpreted(cache: Path, runs: tuple = CHECK_RUNS, shape: dict | None = None,
                      extra: tuple = CHECK_EXTRA) -> list[EmulationCheck]:
    """Per arch of ``runs`` (``shape``: ``CHECK_SHAPE``'s keys to change, and ``threads`` and ``full`` as
    ``shape_matrix`` takes them): the interpreted launch's h_out and K/V cache rows against the float64 model and
    the emulation, element by element (``error_model.judge_step``, the interpreted tests' checks), and each other
    schedule's against the fixed order's (the same bits); then each of ``extra``'s (arch, shape) in the fixed
    order, judged alike. A fault, a deadlock, a race, a missed deadline or an op the interpreter lacks is a failed
    check with its message."""
    groups = _groups(runs, shape, extra)
    captures = {(_key(s), arch): (s, arch) for s, arch, _ in groups}
    steps = [(s, arch, plan) for s, arch, plans in groups for plan in plans]
    fixed = [(s, arch) for s, arch, plans in groups if any(p.kind == "fixed" for p in plans)]
    pool = _executor(workers(len(steps) + len(fixed)))
    try:
        failed = {k: pool.submit(capture, cache, s, arch) for k, (s, arch) in captures.items()}
        failed_capture = {k: _result(f) for k, f in failed.items()}
        # the longest step first, then the references (cached, unless cold), then the other steps longest first,
        # so that no worker starts a long one last
        order = sorted(range(len(steps)), key=lambda i: -_cost(steps[i][0], steps[i][2]))
        stepped = {order[0]: pool.submit(step, cache, *steps[order[0]])}
        models: dict[tuple, Future] = {}
        emulations: dict[tuple, Future] = {}
        for s, arch in fixed:  # a shape's references one after another (a worker sets the shape up once), each once
            if _key(s) not in models:
                models[_key(s)] = pool.submit(element_model, cache, s)
            emulations[(_key(s), arch)] = pool.submit(emulated, cache, s, arch)
        stepped |= {i: pool.submit(step, cache, *steps[i]) for i in order[1:]}
        checks: list[EmulationCheck] = []
        i = 0
        for s, arch, plans in groups:
            name, label, numbers = _names(s, arch)
            err, lost = failed_capture[(_key(s), arch)]
            if err or lost:
                checks.append(EmulationCheck(name, label, math.inf, 0, 0, err or lost, numbers=numbers))
                i += len(plans)
                continue
            reference: Stepped | None = None
            for plan in plans:
                got, lost = _result(stepped.pop(i))  # judged, then let go: its arrays are the parent's to hold
                i += 1
                if got is None or got.error:
                    checks.append(EmulationCheck(name, label, math.inf, 0, 0, (got and got.error) or lost,
                                                 schedule=plan.label, numbers=numbers))
                    continue
                checks += _judged(s, arch, plan, got, reference, models, emulations)
                if reference is None and plan.kind == "fixed":
                    reference = got
            emulations.pop((_key(s), arch), None)
            if not any(_key(later) == _key(s) for later, _, _ in groups[groups.index((s, arch, plans)) + 1:]):
                models.pop(_key(s), None)
        return checks
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _judged(s: dict, arch: str, plan: Schedule, got: Stepped, reference: Stepped | None, models: dict,
            emulations: dict) -> list[EmulationCheck]:
    from .error_model import judge_step

    name, label, numbers = _names(s, arch)
    blocks = TP * layout_of(s)[0].BLOCKS
    if reference is None and plan.kind == "fixed":
        (model, lost), (emulation, lost_e) = _result(models[_key(s)]), _result(emulations[(_key(s), arch)])
        if model is None or emulation is None:
            return [EmulationCheck(name, label, math.inf, 0, 0, lost or lost_e, numbers=numbers)]
        return [EmulationCheck(name, f"{label}, {j.what}", j.value, blocks, got.resumes, tolerance=j.bound or SAME_BITS,
                               numbers=numbers) for j in judge_step(got.h_out, got.caches, model, emulation)]
    if reference is None:
        return []
    diff = max(float(np.nanmax(np.abs(a - b))) if not np.array_equal(a, b, equal_nan=True) else 0.0
               for a, b in zip([*got.h_out, *(c for rc in got.caches for c in rc)],
                               [*reference.h_out, *(c for rc in reference.caches for c in rc)], strict=True))
    return [EmulationCheck(name, f"{label}, the same bits as the fixed order", diff, blocks, got.resumes,
                           tolerance=SAME_BITS, schedule=plan.label, numbers=numbers)]


def _groups(runs: tuple, shape: dict | None, extra: tuple) -> list[tuple[dict, str, tuple[Schedule, ...]]]:
    """``check_interpreted``'s (shape, arch, schedules) to step."""
    base = {**CHECK_SHAPE, **(shape or {})}
    groups = [(base, arch, tuple(_schedule(p) for p in plans)) for arch, plans in runs]
    return groups + [({**CHECK_SHAPE, **more}, arch, (Schedule(),)) for arch, more in extra]


def _jobs(runs: tuple, extra: tuple) -> tuple[int, int]:
    """How many steps, and how many fixed orders (each with its references), ``check_interpreted`` runs."""
    groups = _groups(runs, None, extra)
    return sum(len(plans) for _, _, plans in groups), sum(any(p.kind == "fixed" for p in plans) for *_, plans in groups)


def _schedule(plan: Any) -> Schedule:
    """A Schedule, or None (the fixed order) or a seed (random), as callers gave them before."""
    return plan if isinstance(plan, Schedule) else Schedule() if plan is None else Schedule("random", plan)


def _key(s: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in s.items()))


def _cost(s: dict, plan: Schedule) -> float:
    """A step's relative cost (in units of about 0.6 s of a 2-core machine): a layer takes 11 + its rows at 256
    threads (6.7 s + 0.6 s a row), about 1.45 times that at 512 threads and 3 times for the full model; a step in
    another order than the fixed one runs every block alone, about 2.2 times as long (measured 2026-12-07:
    results/drafter_wide/2026-12-07-interpret-batches/command.txt)."""
    rows = s["requests"] * s["qpr"]
    per_layer = (11 + rows) * (1.45 if s.get("threads", 256) == 512 else 1) * (3 if s.get("full") else 1)
    return s["layers"] * per_layer * (1 if plan.kind == "fixed" else 2.2)


def _names(s: dict, arch: str) -> tuple[str, str, str]:
    layout = layout_of(s)[0]
    name = f"{'full' if s.get('full') else 'small'} model, ng={layout.ng} threads={layout.threads} w_na={layout.w_na}"
    label = f"{s['requests']}x{s['qpr']} rows, ctx {'/'.join(map(str, s['context']))}, {s['layers']} layers"
    return name, label, f"{arch} 8-bit"
