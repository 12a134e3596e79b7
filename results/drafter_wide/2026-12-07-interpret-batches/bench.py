"""One interpreted step, batched (interpreted.BATCH blocks a task) and unbatched, in the fixed order, at one layer of
the test shape and of verify's 512-thread shape, and batched in a PCT schedule at the first (its batches a seeded
partition): seconds a step (the launch, with its host arrays; after the capture) and whether the bits agree."""

import time

import numpy as np

from kerneltune.kernels.drafter_wide.interpreted import BATCH, CHECK_SHAPE, capture_program, run_step, setup
from kerneltune.kernels.drafter_wide.interpreter.schedule import Schedule
from kerneltune.kernels.drafter_wide.shape_matrix import VERIFY_EXTRA
from kerneltune.paths import user_cache_dir

SHAPES = {"test shape, 1 layer, gfx942": ({**CHECK_SHAPE, "layers": 1}, "gfx942"),
          "512 threads, 1x20 rows, 1 layer, gfx950": ({**CHECK_SHAPE, **VERIFY_EXTRA.as_check(), "layers": 1},
                                                      VERIFY_EXTRA.arch)}
for name, (shape, arch) in SHAPES.items():
    layout, dims, weights, inputs = setup(shape)
    program = capture_program(layout, arch, user_cache_dir() / "interpret")
    out = {}
    plans = [(Schedule(), 1), (Schedule(), BATCH)] + ([(Schedule("pct", 1), BATCH)] if arch == "gfx942" else [])
    for schedule, batch in plans:
        t = time.perf_counter()
        got = run_step(program, layout, dims, weights, inputs, arch, schedule=schedule, batch=batch)
        out[(schedule.label, batch)] = (time.perf_counter() - t, got)
        print(f"{name}: {schedule.label}, batch {batch}: {out[(schedule.label, batch)][0]:.1f} s, "
              f"{got.launch.resumes} resumes, health {got.health}", flush=True)
    ref = out[("fixed", 1)][1]
    for key, (_, got) in out.items():
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(
            [*got.h_out, *(c for rc in got.caches for c in rc)], [*ref.h_out, *(c for rc in ref.caches for c in rc)],
            strict=True))
        print(f"{name}: {key[0]}, batch {key[1]}: the same bits as the unbatched fixed order: {same}")
    print(f"{name}: {out[('fixed', 1)][0] / out[('fixed', BATCH)][0]:.2f}x faster batched", flush=True)
