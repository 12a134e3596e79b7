"""The drafter as the engine sees it: a launch-group kernel. On 4 MI300X/MI355X each candidate is a
group of four rank processes (``rank_program.DrafterRank``) that builds the FlyDSL megakernel, is
checked against the reference on poisoned outputs and timed with events; that path has never run
here (no AMD GPU). With ``KERNELTUNE_GROUP_DEVICE=emulated`` the CPU emulation stands in for the
GPUs and the same path runs on CPUs; with ``interpret``, the kernel's compiled program in the CPU
interpreter does. Without either, candidates are ranked statically: each layout's
megakernel is compiled offline for the bucket's arch and ranked by spills, co-residency margin and
instruction count (``static_rank``).
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kerneltune.seams.protocols import Capability, CheckResult
from kerneltune.seams.wire import Status

from .layout import TP, DrafterLayout, LayoutError
from .offline_compile import ARCHS
from .sources import drafter_source_hash

_LDS = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}
GROUP_TIMEOUT_S = 900.0  # emulated, one step of the whole TP4 launch takes ~20 s on a 2-core machine


@dataclasses.dataclass(frozen=True)
class DrafterProblem:
    arch: str = "gfx942"
    requests: int = 4
    qpr: int = 4
    context: int = 8192
    layers: int = 1

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"arch: {self.arch!r} is not one of {sorted(ARCHS)}")
        if self.requests * self.qpr > 64:
            raise ValueError(f"requests x qpr = {self.requests * self.qpr} exceeds the 64-row maximum")


class DrafterWidePlugin:
    name = "drafter_wide"
    backend = "launch-group"
    devices = TP
    capabilities = frozenset({Capability.STATIC_RANK, Capability.EMULATE, Capability.INTERPRET})
    tunables = frozenset({"ng", "threads", "w_na"})
    config_defaults: Mapping[str, Any] = MappingProxyType({})  # every tunable was one from the start
    gated_params: tuple[str, ...] = ()  # the bucket is the whole problem
    problem_fields = frozenset(f.name for f in dataclasses.fields(DrafterProblem))
    hard_bucket_fields = ("arch",)

    def problem(self, fields: Mapping[str, Any]) -> DrafterProblem:
        return DrafterProblem(**fields)

    def problem_dict(self, problem: DrafterProblem) -> dict[str, Any]:
        return dataclasses.asdict(problem)

    def layout(self, problem: DrafterProblem, tiles: Mapping[str, Any]) -> DrafterLayout:
        return DrafterLayout(**tiles, qpr=problem.qpr, lds_bytes_limit=_LDS[problem.arch])

    def infeasibility(self, problem: DrafterProblem, tiles: Mapping[str, Any]) -> str | None:
        try:
            self.layout(problem, tiles)
        except LayoutError as e:
            return str(e)
        return None

    def heuristic(self, problem: DrafterProblem) -> dict[str, Any]:
        """The seed's layout on MI300X (304 blocks, one per CU); MI355X has 256 CUs, so two
        blocks of 256 threads per CU (its offline compile: ~210 VGPRs, two waves per SIMD)."""
        if problem.arch == "gfx950":
            return {"ng": 192, "threads": 256, "w_na": 96}
        return {"ng": 192, "threads": 512, "w_na": 96}

    def bucket(self, problem: DrafterProblem) -> dict[str, Any]:
        return self.problem_dict(problem)

    def source_hash(self) -> str:
        return drafter_source_hash()

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        device, count = stamps.get("group_device"), int(stamps.get("gpu_count") or 0)
        if device in ("emulated", "interpret") or (device == "rocm" and count >= TP and stamps.get("arch") in ARCHS):
            return None
        return f"{TP} AMD MI300X (gfx942) or MI355X (gfx950) GPUs with ROCm for timings"

    def build(self, problem: DrafterProblem, tiles: Mapping[str, Any]) -> Any:
        from kerneltune.backends.launch_group import LaunchGroup, group_device

        self.layout(problem, tiles)  # a bad layout fails here, as a compile error, before any process starts
        return LaunchGroup("kerneltune.kernels.drafter_wide.rank_program:DrafterRank",
                           {"tiles": dict(tiles), "qpr": problem.qpr, "arch": problem.arch}, TP, group_device(),
                           timeout=GROUP_TIMEOUT_S)

    def make_inputs(self, problem: DrafterProblem, inputs_spec: Mapping[str, Any], seed: int) -> dict[str, Any]:
        """A description each rank builds its tensors from (the weights alone are gigabytes)."""
        return {"requests": problem.requests, "qpr": problem.qpr, "layers": problem.layers, "seed": seed,
                "context": [int(inputs_spec.get("context", problem.context))] * problem.requests}

    def check(self, built: Any, problem: DrafterProblem, inputs: dict[str, Any]) -> CheckResult:
        from .health import DeadlineMissed, check_health

        built.load(inputs)
        outs = built.check()
        try:
            check_health([o["health"] for o in outs])
        except DeadlineMissed as e:
            return CheckResult(str(e))
        start = time.perf_counter()
        ref, bound = _reference(problem.layers, inputs["requests"], inputs["qpr"], tuple(inputs["context"]),
                                inputs["seed"])
        reference_s = time.perf_counter() - start
        judged = judge_ranks([o["h_out"] for o in outs], ref, bound, exact=built.device == "emulated")
        return dataclasses.replace(judged, reference_s=reference_s)

    def timed_call(self, built: Any, inputs: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
        return built, ()

    def flops(self, problem: DrafterProblem, inputs: dict[str, Any]) -> float:
        """The GEMVs' multiply-adds over every rank: 2 x rows x weight elements per layer."""
        from .reference import Dims

        d = Dims(layers=problem.layers)
        qkv = (d.q_heads + 2 * d.kv_heads) * d.head_dim
        per_layer = d.hidden * (qkv + d.q_heads * d.head_dim + 3 * d.intermediate)
        return 2.0 * problem.requests * problem.qpr * per_layer * problem.layers

    def release(self, built: Any) -> None:
        built.close()

    def emulate(self) -> list[Any]:
        """The heuristic layout's whole TP4 launch emulated on the CPU against the float64 model
        (``emulation.check_layouts``): what can be verified without the GPUs."""
        from .emulation import check_layouts

        tiles = self.heuristic(DrafterProblem())
        name = " ".join(f"{k}={v}" for k, v in tiles.items())
        return check_layouts([(name, lambda qpr: DrafterLayout(**tiles, qpr=qpr))])

    def interpret(self, interleavings: int | None = None) -> list[Any]:
        """The kernel's own compiled program on the small model, run by the CPU interpreter for each arch,
        against the float64 model, the emulation and, in ``interleavings`` schedules (``interpreted.INTERLEAVINGS``
        by default), against its own fixed order (``interpret_check.check_interpreted``)."""
        from kerneltune.files.paths import user_cache_dir

        from .interpret_check import check_interpreted
        from .interpreted import check_runs

        return check_interpreted(user_cache_dir() / "interpret", check_runs(interleavings))

    def interpret_plan(self, interleavings: int | None = None) -> str:
        """``interpret``'s memory at its peak and its worker processes, in one line (``memory_plan``); a ValueError
        where this machine's memory does not hold one worker."""
        from .interpret_check import plan
        from .interpreted import check_runs

        return plan(check_runs(interleavings)).line

    def static_rank(self, problem: DrafterProblem, tiles: Mapping[str, Any]) -> dict[str, Any]:
        """Compile offline and rank: a spilling or non-resident layout is a constraint failure;
        otherwise the score is the cost model's µs per step (``cost_model.py``, journaled as ``modelled``),
        lower is better. The older static score, instructions x (1 + BLOCKS / resident blocks), is kept
        beside it as ``static.isa_score``."""
        from .cost_model import model
        from .kernel import KERNEL_ARG_SPEC
        from .offline_compile import compile_kernel

        layout = self.layout(problem, tiles)
        with tempfile.TemporaryDirectory(prefix="kerneltune-flydsl-") as tmp:
            report = compile_kernel(
                "kerneltune.kernels.drafter_wide.kernel:build_wide_for",
                {"arch": problem.arch, **dict(tiles), "qpr": problem.qpr, "layers": problem.layers},
                KERNEL_ARG_SPEC, problem.arch, layout.threads, Path(tmp))
        r, occ = report.resources, report.occupancy
        metrics = {**dataclasses.asdict(r), "blocks_per_cu": occ.blocks_per_cu, "limited_by": occ.limited_by,
                   "resident_blocks": occ.resident_blocks, "blocks": layout.BLOCKS, "isa_lines": report.isa_lines,
                   "isa_mfma": report.isa_mfma, "pool_words": layout.pool_words}
        if r.vgpr_spill or r.sgpr_spill or r.scratch_bytes:
            return {"status": Status.CONSTRAINT, "error": f"spills: {r.vgpr_spill} VGPR, {r.sgpr_spill} SGPR",
                    "static": metrics}
        if occ.resident_blocks < layout.BLOCKS:
            return {"status": Status.CONSTRAINT, "static": metrics,
                    "error": f"not co-resident: BLOCKS {layout.BLOCKS} > {occ.cus} CUs x {occ.blocks_per_cu} "
                             f"block(s) per CU ({occ.limited_by}): the persistent grid would deadlock"}
        metrics["isa_score"] = report.isa_lines * (1.0 + layout.BLOCKS / occ.resident_blocks)
        modelled = model(layout, problem.arch, problem.requests, problem.context)
        return {"status": Status.OK, "static": metrics, "score": modelled.us_per_layer * problem.layers,
                "modelled": modelled.to_dict()}


def judge_ranks(h_outs: list[Any], ref: Any, bound: float, exact: bool) -> CheckResult:
    """Every rank's ``h_out`` against the float64 model's; the worst rank decides. Emulated (``exact``),
    values stay float64 and must match to ``EXACT_TOLERANCE``; on the GPUs, the kernel's 8-bit and bf16
    formats must stay within the error ``bound`` they allow (relative Frobenius error). NaN never passes."""
    from .emulation import EXACT_TOLERANCE, max_relative_error
    from .numerics import frobenius_error

    error, limit = (max_relative_error, EXACT_TOLERANCE) if exact else (frobenius_error, bound)
    errors = [error(h, ref) for h in h_outs]
    worst = max(errors)
    if not worst < limit:
        return CheckResult(f"h_out: relative error {worst:.3g} over {limit:.3g} on rank {errors.index(worst)}", worst)
    return CheckResult(None, worst)


@functools.lru_cache(maxsize=2)
def _reference(layers: int, requests: int, qpr: int, context: tuple[int, ...], seed: int) -> tuple[Any, float]:
    """The float64 model's h_out and the formats' bound for a check's inputs: kept here for the next check in this
    process (a sweep checks every layout of a bucket on the same inputs) and in the user's cache
    (``KERNELTUNE_CACHE/references``) for every later process on this machine (a resumed sweep, another sweep of the
    bucket, ``verify``), where the full model's weights alone take 3-12 s to draw. Not the engine's folder of the
    run (``OUT/references``, the ranker's): a verify has none, and this reference is one small h_out (at most 3 MB)
    that depends on nothing of the run but the key's fields."""
    import numpy as np
    import torch

    from kerneltune.files.paths import user_cache_dir
    from kerneltune.files.reference_cache import ReferenceCache

    from . import check_cache, numerics, reference

    # The source of numerics.py and every drafter module it imports (reference.py), as verify's references are keyed.
    key = {"kernel": "drafter_wide", "layers": layers, "requests": requests, "qpr": qpr, "context": list(context),
           "seed": seed, "source": check_cache.sources_key(("numerics.py",)), "torch": torch.__version__}

    def compute() -> dict[str, Any]:
        dims = reference.Dims(layers=layers)
        step = reference.make_inputs(dims, requests, qpr, list(context), seed + 1)
        ref, bound = numerics.bounded_reference(dims, reference.make_weights(dims, seed), step)
        return {"ref": ref.numpy(), "bound": np.float64(bound)}

    arrays = ReferenceCache(user_cache_dir() / "references").get(key, compute)
    kept = np.array(arrays["ref"])
    kept.setflags(write=False)  # shared by every check of these inputs
    return kept, float(arrays["bound"])


PLUGIN = DrafterWidePlugin()
