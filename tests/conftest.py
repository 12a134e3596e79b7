"""Markers: gpu (a Hopper GPU), rocm (4 AMD GPUs), slow. Hardware tests skip here with the reason."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

import pytest

# As the CLI does (kerneltune/cli/__init__.py), for the processes the tests start without it: no transparent huge
# pages for NumPy's arrays. Set before anything imports NumPy.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

# One BLAS/OpenMP thread per xdist worker (and the processes it starts): `-n 2` on 2 cores already uses
# both, and two workers' spinning BLAS threads made the drafter's float64 model 2.8x slower than one thread
# each (run M: 118 s against 43 s). Set before anything imports NumPy or torch.
# XLA's CPU client likewise: its Eigen pool took a share of the core that the other worker's float64 model
# ran on (an emulation of 21 s alone took 47 s in the suite).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    if "intra_op_parallelism_threads" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()


def _scratch(prefix: str) -> str:
    """A folder of this process's own, removed when it exits (each run left two behind per process)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


# The user's own installed tables must not steer a test: each run gets an empty user tables folder
# (the shipped tables are still read), inherited by every subprocess a test starts.
os.environ["KERNELTUNE_TABLES"] = _scratch("kerneltune-test-user-tables-")
# Likewise the user's cache (measured ceilings, verify's compiled programs): a test neither reads nor fills it.
os.environ["KERNELTUNE_CACHE"] = _scratch("kerneltune-test-user-cache-")


@functools.cache
def _has_hopper() -> str | None:
    try:
        import jax

        dev = jax.devices()[0]
    except Exception as e:  # no backend at all is a reason too
        return f"no JAX device ({e})"
    if dev.platform != "gpu":
        return f"needs an NVIDIA Hopper GPU (sm_90); this machine's JAX device is {dev.platform}"
    if getattr(dev, "compute_capability", "9.0") != "9.0":
        return f"needs an NVIDIA Hopper GPU (sm_90); found {dev.device_kind}"
    return None


@functools.cache
def _has_rocm4() -> str | None:
    try:
        import torch

        if torch.version.hip is None or torch.cuda.device_count() < 4:
            return "needs 4 AMD MI300X/MI355X GPUs with ROCm; this machine has none"
    except ImportError:
        return "needs torch with ROCm and 4 AMD MI300X/MI355X GPUs"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords and (why := _has_hopper()):
            item.add_marker(pytest.mark.skip(reason=why))
        if "rocm" in item.keywords and (why := _has_rocm4()):
            item.add_marker(pytest.mark.skip(reason=why))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The drills' summaries (a test's ``drill summary`` property): shown after the run, from every xdist worker."""
    lines = [value for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
             for name, value in getattr(report, "user_properties", ()) if name == "drill summary"]
    if lines:
        terminalreporter.section("drills")
        for line in lines:
            terminalreporter.write_line(line)
