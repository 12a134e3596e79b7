"""The drafter as the engine sees it. Without 4 MI300X/MI355X it is ranked statically: each
layout's megakernel (``kernel.build_wide``) is compiled offline for the bucket's arch and ranked
by spills, co-residency margin and instruction count (``static_rank``); timings need the GPUs.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .layout import DrafterLayout, LayoutError
from .offline_compile import ARCHS

_LDS = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}


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
    tunables = frozenset({"ng", "threads", "w_na"})
    tile_defaults: Mapping[str, Any] = MappingProxyType({})  # every tunable was one from the start
    gated_tiles: tuple[str, ...] = ()  # the bucket is the whole problem
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
        from kerneltune.tables.stamps import source_hash

        here = Path(__file__).parent
        # Everything the compiled kernel is built from: its constants come from the reference too.
        return source_hash(here / n for n in ("layout.py", "indexing.py", "health.py", "reference.py", "device.py",
                                               "kernel.py", "offline_compile.py"))

    def supported_on(self, stamps: Mapping[str, Any]) -> str | None:
        return "4 AMD MI300X (gfx942) or MI355X (gfx950) GPUs with ROCm for timings"

    def emulate(self) -> list[Any]:
        """The heuristic layout's whole TP4 launch emulated on the CPU against the float64 model
        (``emulation.check_layouts``): what can be verified without the GPUs."""
        from .emulation import check_layouts

        tiles = self.heuristic(DrafterProblem())
        name = " ".join(f"{k}={v}" for k, v in tiles.items())
        return check_layouts([(name, lambda qpr: DrafterLayout(**tiles, qpr=qpr))])

    def static_rank(self, problem: DrafterProblem, tiles: Mapping[str, Any]) -> dict[str, Any]:
        """Compile offline and rank: a spilling or non-resident layout is a constraint failure;
        otherwise score = instructions x (1 + BLOCKS / resident blocks), lower is better."""
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
                   "pool_words": layout.pool_words}
        if r.vgpr_spill or r.sgpr_spill or r.scratch_bytes:
            return {"status": "constraint", "error": f"spills: {r.vgpr_spill} VGPR, {r.sgpr_spill} SGPR",
                    "static": metrics}
        if occ.resident_blocks < layout.BLOCKS:
            return {"status": "constraint", "static": metrics,
                    "error": f"not co-resident: BLOCKS {layout.BLOCKS} > {occ.cus} CUs x {occ.blocks_per_cu} "
                             f"block(s) per CU ({occ.limited_by}): the persistent grid would deadlock"}
        score = report.isa_lines * (1.0 + layout.BLOCKS / occ.resident_blocks)
        return {"status": "ok", "static": metrics, "score": score}


PLUGIN = DrafterWidePlugin()
