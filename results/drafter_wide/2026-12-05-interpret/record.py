"""The interpreter record (issue 57): kernel.py's lines run by the interpreter, step times, the checks.

`python results/drafter_wide/2026-12-05-interpret/record.py OUT` from the repository root."""

import ast
import os
import sys
import time
from pathlib import Path

import numpy as np

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("OMP_NUM_THREADS", "1")

from kerneltune.kernels.drafter_wide import kernel  # noqa: E402
from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation  # noqa: E402
from kerneltune.kernels.drafter_wide.interpreted import (  # noqa: E402
    capture_program,
    run_step,
    small_dims,
    small_layout,
)
from kerneltune.kernels.drafter_wide.layout import DrafterLayout  # noqa: E402
from kerneltune.kernels.drafter_wide.numerics import bounded_reference, frobenius_error  # noqa: E402
from kerneltune.kernels.drafter_wide.reference import Dims, make_inputs, make_weights  # noqa: E402

cache = out / ".capture-cache"
lines = []


def log(s: str) -> None:
    print(s, flush=True)
    lines.append(s)


# 1. kernel.py's statements inside the device function, and which of them emit IR.
src = Path(kernel.__file__)
tree = ast.parse(src.read_text())
func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "drafter_wide")
statements = set()
for node in ast.walk(func):
    if isinstance(node, ast.stmt) and node is not func and not isinstance(node, ast.FunctionDef):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        statements.add(node.lineno)

# 2. Step times and errors: the test shape (2 layers) on both archs, and one full-size layer.
shapes = [("small model, 2 layers, 4x2 rows, ctx 30/100/5/700", small_layout(2, 2, 32), small_dims(2), 4, 2,
           [30, 100, 5, 700])]
programs = {}
for arch in ("gfx942", "gfx950"):
    for name, layout, dims, req, qpr, ctx in shapes:
        t0 = time.perf_counter()
        program = capture_program(layout, arch, cache)
        t1 = time.perf_counter()
        w, inp = make_weights(dims, 0), make_inputs(dims, req, qpr, ctx, 1)
        res = run_step(program, layout, dims, w, inp, arch)
        t2 = time.perf_counter()
        emu = Emulation(layout, dims, w, inp, numbers=arch).run().h_out
        ref, bound = bounded_reference(dims, w, inp)
        err = max(frobenius_error(h, ref.numpy()) for h in res.h_out)
        apart = max(frobenius_error(a, b) for a, b in zip(res.h_out, emu, strict=True))
        eerr = max(frobenius_error(h, ref.numpy()) for h in emu)
        log(f"{arch} {name}: capture {t1 - t0:.1f} s, one step of 4 ranks {t2 - t1:.1f} s "
            f"({4 * layout.BLOCKS} blocks, {res.launch.resumes} resumes); health {res.health}; "
            f"error against float64 {err:.4f} (emulation {eerr:.4f}, bound {bound:.4f}); "
            f"against the emulation {apart:.4f}")
        programs[arch] = program
full, fdims = DrafterLayout(qpr=2), Dims(layers=1)
t0 = time.perf_counter()
program = capture_program(full, "gfx942", cache)
t1 = time.perf_counter()
w, inp = make_weights(fdims, 0), make_inputs(fdims, 4, 2, [30, 100, 5, 700], 1)
res = run_step(program, full, fdims, w, inp, "gfx942")
t2 = time.perf_counter()
ref, bound = bounded_reference(fdims, w, inp)
log(f"gfx942 full size (ng=192 threads=512 w_na=96, hidden 6144), 1 layer, 4x2 rows: capture {t1 - t0:.1f} s, one "
    f"step {t2 - t1:.1f} s ({4 * full.BLOCKS} blocks); health {res.health}; error against float64 "
    f"{max(frobenius_error(h, ref.numpy()) for h in res.h_out):.4f} (bound {bound:.4f})")

# 3. Coverage of kernel.py: lines of ops (their call chains) that ran, over both archs' runs of the test shape.
every, ran = set(), set()
for p in programs.values():
    e, r = p.coverage("kernel.py")
    every |= e
    ran |= r
no_ir = sorted(statements - every)
log(f"kernel.py: {len(statements)} statement lines in drafter_wide; {len(every & statements)} of them emit IR "
    f"(their ops' call chains pass through them), {len(ran & statements)} ran in the interpreter "
    f"({100 * len(ran & statements) / max(len(every & statements), 1):.1f}%); IR lines not run: "
    f"{sorted((every - ran) & statements) or 'none'}")
text = src.read_text().splitlines()
log(f"{len(no_ir)} statement lines emit no IR of their own (trace-time Python: constexpr loops, names, "
    f"Python arithmetic on layout constants), each shown:")
for n in no_ir:
    log(f"  {n:4d}: {text[n - 1].strip()[:100]}")
(out / "record.txt").write_text("\n".join(lines) + "\n")
print(np.__version__)
