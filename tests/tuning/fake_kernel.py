"""A test-only kernel that can crash, hang, write garbage or leave outputs unwritten."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from kerneltune.seams.protocols import Capability, CheckResult

MODES = ("good", "slow", "compile_error", "compile_crash", "compile_hang", "crash", "hang", "garbage", "unwritten")


@dataclass(frozen=True)
class FakeProblem:
    n: int


class FakeKernel:
    """Its builds leave their process (``PortableBuild``), as the ranker's do, so they compile in compile
    workers; ``ThreadedFakeKernel``'s compile on threads of the timing worker."""

    name = "fake"
    backend = "host"
    devices = 1
    capabilities: frozenset = frozenset({Capability.PORTABLE_BUILD})
    tunables = frozenset({"mode", "work"})
    config_defaults = MappingProxyType({"work": 1})  # as if ``work`` were once fixed at 1
    gated_params = ("mode",)
    problem_fields = frozenset({"n"})
    hard_bucket_fields = ("n",)

    def problem(self, fields: Mapping[str, Any]) -> FakeProblem:
        return FakeProblem(**fields)

    def problem_dict(self, problem: FakeProblem) -> dict[str, Any]:
        return {"n": problem.n}

    def infeasibility(self, problem: FakeProblem, tiles: Mapping[str, Any]) -> str | None:
        return "work exceeds n" if tiles["work"] > problem.n else None

    def heuristic(self, problem: FakeProblem) -> dict[str, Any]:
        return {"mode": "good", "work": 1}

    def bucket(self, problem: FakeProblem) -> dict[str, Any]:
        return {"n": problem.n}

    def source_hash(self) -> str:
        return "fakehash"

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        return None

    def build(self, problem: FakeProblem, tiles: Mapping[str, Any]) -> dict[str, Any]:
        if tiles["mode"] == "compile_error":
            raise ValueError("fake compile error: unsupported tile")
        if tiles["mode"] == "compile_crash":
            os.abort()
        if tiles["mode"] == "compile_hang":
            time.sleep(3600)
        return {**tiles, "built_by": os.getpid()}

    def export_build(self, built: Mapping[str, Any]) -> bytes:
        return json.dumps(built).encode()

    def import_build(self, data: bytes) -> dict[str, Any]:
        return json.loads(data)

    def make_inputs(self, problem: FakeProblem, inputs_spec: Mapping[str, Any], seed: int) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal(problem.n)

    def _run(self, built: Mapping[str, Any], x: np.ndarray, out: np.ndarray) -> None:
        mode = built["mode"]
        if mode == "crash":
            os.abort()
        if mode == "hang":
            if mark := os.environ.get("FAKE_KERNEL_HANG_MARK"):  # tests wait for it before they interrupt
                Path(mark).touch()
            time.sleep(3600)
        if mode == "unwritten":
            out[: len(out) // 2] = 2 * x[: len(out) // 2]
            return
        out[:] = 2 * x + (1.0 if mode == "garbage" else 0.0)

    def check(self, built: Any, problem: FakeProblem, inputs: np.ndarray) -> CheckResult:
        out = np.full_like(inputs, np.nan)  # poisoned
        self._run(built, inputs, out)
        err = np.abs(out - 2 * inputs)
        if not np.all(np.isfinite(out)) or err.max() > 1e-9:
            return CheckResult(f"max error {np.nanmax(err):.3g}, {int(np.isnan(out).sum())} unwritten", None)
        return CheckResult(None, 0.0, accuracy={"max_abs": float(err.max()), "work": float(built["work"])})

    def timed_call(self, built: Any, inputs: np.ndarray):
        delay = built["work"] * (3e-3 if built["mode"] == "slow" else 1e-3)
        return (lambda: time.sleep(delay)), ()

    def flops(self, problem: FakeProblem, inputs: np.ndarray) -> float:
        return float(problem.n)

    def release(self, built: Any) -> None:
        pass


PLUGIN = FakeKernel()


class ThreadedFakeKernel(FakeKernel):
    capabilities: frozenset = frozenset()


THREADED = ThreadedFakeKernel()


class CheckProgramsKernel(FakeKernel):
    """Its check needs programs of its own (``CheckPrograms``): compiling them takes ``FAKE_CHECK_PROGRAMS_S``
    seconds and leaves a mark (the compiling process's id) in the folder ``FAKE_CHECK_PROGRAMS`` names, as a build
    cache would hold them; its check says whether the mark was there when it ran. Problem n=13 cannot compile them."""

    capabilities = frozenset({Capability.PORTABLE_BUILD, Capability.CHECK_PROGRAMS})

    @staticmethod
    def mark(problem: FakeProblem) -> Path:
        return Path(os.environ["FAKE_CHECK_PROGRAMS"]) / f"n{problem.n}"

    def compile_check(self, problem: FakeProblem) -> None:
        if problem.n == 13:
            raise ValueError("fake check compile error: no reference for n=13")
        time.sleep(float(os.environ.get("FAKE_CHECK_PROGRAMS_S", "0")))
        with self.mark(problem).open("a") as f:
            f.write(f"{os.getpid()}\n")

    def check(self, built: Any, problem: FakeProblem, inputs: np.ndarray) -> CheckResult:
        result = super().check(built, problem, inputs)
        ready = float(self.mark(problem).exists())
        return dataclasses.replace(result, accuracy={**result.accuracy, "programs_ready": ready})


CHECK_PROGRAMS = CheckProgramsKernel()


class ThreadedCheckProgramsKernel(CheckProgramsKernel):
    capabilities = frozenset({Capability.CHECK_PROGRAMS})


THREADED_CHECK_PROGRAMS = ThreadedCheckProgramsKernel()


FAKE_GPU = "FakeGPU 9000"
NEED = f"an imaginary accelerator ({FAKE_GPU})"  # what the kernels below say they need


class FakeKernelNeedingGpu(FakeKernel):
    """The same kernel, but it can only run on hardware this machine lacks, with no CPU check."""

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        return NEED


NEEDS_GPU = FakeKernelNeedingGpu()


class FakeKernelOnItsGpu(FakeKernel):
    """The same kernel, run where the worker's stamps name its GPU; elsewhere checked small on the CPU."""

    capabilities = frozenset({Capability.PORTABLE_BUILD, Capability.CHECK_SMALL})

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        return None if stamps.get("gpu") == FAKE_GPU else NEED


ON_ITS_GPU = FakeKernelOnItsGpu()


class EmulatedKernel(FakeKernelNeedingGpu):
    """Needs its GPU, with no small check, but emulated and interpreted on the CPU."""

    capabilities = frozenset({Capability.PORTABLE_BUILD, Capability.EMULATE, Capability.INTERPRET})


EMULATED = EmulatedKernel()


class WideKernel(FakeKernel):
    """Seven tunables of ten values each: 10^7 configs, every one feasible but those with p0 == p1."""

    name = "wide"
    tunables = frozenset(f"p{i}" for i in range(7))
    config_defaults = MappingProxyType({})
    gated_params = ()

    def infeasibility(self, problem: FakeProblem, tiles: Mapping[str, Any]) -> str | None:
        return "p0 equals p1" if tiles["p0"] == tiles["p1"] else None

    def heuristic(self, problem: FakeProblem) -> dict[str, Any]:
        return {f"p{i}": i for i in range(7)}


WIDE = WideKernel()


class DigestingKernel(FakeKernel):
    """The fake kernel with digests of its programs: ``PROGRAMS`` maps a config's mode to what it compiles to
    (a test edits it to play a kernel change), the hash is ``SOURCE[0]``; ``mode="unlowerable"`` raises."""

    capabilities = frozenset({Capability.PROGRAM_DIGEST})
    digest_stamps = ("numpy",)
    PROGRAMS: dict[str, str] = {}
    SOURCE = ["hash-a"]

    def source_hash(self) -> str:
        return self.SOURCE[0]

    def program_digest(self, problem: FakeProblem, tiles: Mapping[str, Any], stamps: Mapping[str, Any]) -> str:
        if tiles["mode"] == "unlowerable":
            raise ValueError("this source cannot lower mode=unlowerable")
        return f"{self.PROGRAMS.get(tiles['mode'], 'p0')}-n{problem.n}-w{tiles['work']}"


DIGESTING = DigestingKernel()


class InterpretedKernel(FakeKernel):
    """The fake kernel as if it ran in an interpreter on the CPU: its times there say nothing of its speed."""

    capabilities = frozenset({Capability.PORTABLE_BUILD, Capability.VOID_TIMINGS})

    def void_timings(self, stamps: Mapping[str, Any]) -> str | None:
        return "fake runs in its interpreter on this CPU" if stamps.get("device_kind") == "cpu" else None


INTERPRETED = InterpretedKernel()
