"""The drafter's shape matrix through the CPU interpreter, with branch and loop-trip coverage (issue 80).

Each shape of ``shape_matrix.MATRIX``, and the default check shape on both archs, runs once in the fixed order:
its health words, its h_out and K/V cache judged per element (``error_model.judge_step``, against float64 and
the emulation), its time. Every program is instrumented (``interpret_coverage.Coverage``), and the coverage of
all of them together is printed at the end: lines, branches both ways, loop trips, polls.

Usage: .venv/bin/python .ci/interpret_coverage.py [NAMES]  (NAMES: a comma-separated subset of the shapes'
names, or "check" for the default shape only). Exit 0 when every check passed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation
from kerneltune.kernels.drafter_wide.error_model import element_model, judge_step
from kerneltune.kernels.drafter_wide.health import check_health
from kerneltune.kernels.drafter_wide.interpret_coverage import Coverage
from kerneltune.kernels.drafter_wide.interpreted import CHECK_SHAPE, capture_program, label, run_step, setup
from kerneltune.kernels.drafter_wide.shape_matrix import MATRIX, Shape

CACHE = Path.home() / ".cache" / "kerneltune" / "interpret"


def main() -> int:
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    shapes = [Shape("check shape", "the default of verify --interpret", arch, 256, **{
        k: v for k, v in CHECK_SHAPE.items() if k != "context"}, context=tuple(CHECK_SHAPE["context"]))
        for arch in ("gfx942", "gfx950")] + list(MATRIX)
    shapes = [s for s in shapes
              if chosen is None or s.name in chosen or (s.name == "check shape" and "check" in chosen)]
    cov, failed = Coverage(), 0
    for s in shapes:
        t0 = time.monotonic()
        layout, dims, weights, inputs = setup(s.as_check())
        program = cov.instrument(capture_program(layout, s.arch, CACHE))
        t1 = time.monotonic()
        got = run_step(program, layout, dims, weights, inputs, s.arch)
        t2 = time.monotonic()
        model = element_model(dims, weights, inputs)
        emulated = Emulation(layout, dims, weights, inputs, numbers=s.arch).run()
        caches = [[np.reshape(c, model.cache[r][i].shape) for i, c in enumerate(rc)]
                  for r, rc in enumerate(emulated.caches)]
        print(f"== {s.name} ({s.arch}): {label(s.as_check())}\n   why: {s.why}\n   capture {t1 - t0:.0f} s, "
              f"interpreted step {t2 - t1:.0f} s, model and emulation {time.monotonic() - t2:.0f} s", flush=True)
        try:
            check_health(got.health)
            print("   health: clear")
        except Exception as e:  # a missed deadline names its site
            failed += 1
            print(f"   health: {e}")
        for j in judge_step(got.h_out, got.caches, model, (emulated.h_out, caches)):
            failed += not j.ok
            print(f"   {j}", flush=True)
    print("\n== coverage of the kernel's role modules and indexing over every program above")
    print(cov.report())
    print(f"\nfailed checks: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
