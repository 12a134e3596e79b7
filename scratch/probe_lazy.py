"""Run AI, call 4 (and 5: ``lazy_warp``, one branch a warp on a vote over its 16 rows): why lazy_rescale lost at
D=64 (1.125x the time) and won at D=128 (0.980x). Three variants at each
bucket's tile (no cap, persistent, scale_in_exp2): off; lazy (the branch per row); lazy without the branch (the
stale max kept, O multiplied by the factor as the off kernel does: ``rescale_rows``'s interpret path patched in at
trace time). The PTX of each compile is dumped (MOSAIC_GPU_DUMP_PTX, files listed per variant as they appear), and
the variants are timed in alternating rounds (CUPTI, the engine's stopping rule). Outputs compared to the off
kernel first. Usage: OUT=dir AB_SECONDS=s DUMP=dir python scratch/probe_lazy.py
"""

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.backends.cuda_jax import time_jax
from kerneltune.kernels.ranker_attention import kernel as kernel_mod
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.lazy_rescale import rescale_rows
from kerneltune.measure import MeasureSettings

OUT = Path(os.environ.get("OUT", "."))
DUMP = Path(os.environ.get("DUMP", "/tmp/lazy-dump"))
VARIANTS = tuple(os.environ.get("VARIANTS", "off,lazy,lazy_nobranch").split(","))
ROWS = {  # the sweep's buckets: problem, bounds (history, candidates), stages of the winning tile
    "d64": (Problem(batch=64, seq_len=1024, q_heads=4, kv_heads=4, head_dim=64), (768, 896), 128, 3),
    "d128": (Problem(batch=8, seq_len=4096, q_heads=8, kv_heads=8, head_dim=128), (3400, 3584), 512, 2),
}


def rescale_rows_warp(acc, alpha, *, interpret):
    """``rescale_rows`` with one branch a warp: taken when any of the warp's rows moved (a vote), then every row of
    the thread multiplied by its factor (1.0 for the rows that kept their max). A uniform branch, no divergence."""
    import numpy as np
    from jax.experimental.mosaic import gpu as mgpu
    from jax.experimental.pallas import mosaic_gpu as plgpu
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import arith, nvvm, scf, vector

    assert not interpret

    @plgpu.inline_mgpu(arg_types=(plgpu.Layout.WGMMA, plgpu.Layout.WGMMA.reduce(1)),
                       return_type=plgpu.ShapeDtypeStruct(acc.shape, jnp.float32, layout=plgpu.Layout.WGMMA))
    def skip_unmoved(ctx, arr, factors):
        del ctx
        regs_shape = arr.registers.shape
        col_dims = arr.layout.tiling.tile_dimension(1)
        row_regs = factors.registers.reshape([1 if is_col else n for n, is_col in zip(regs_shape, col_dims,
                                                                                        strict=True)])
        f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
        one = arith.constant(f32, ir.FloatAttr.get(f32, 1.0))
        factor_of = {}
        moved = None
        for row in np.ndindex(row_regs.shape):
            factor_of[row] = vector.extract(row_regs[row], dynamic_position=[], static_position=[0])
            m = arith.cmpf(arith.CmpFPredicate.UNE, factor_of[row], one)
            moved = m if moved is None else arith.ori(moved, m)
        mask = arith.constant(i32, ir.IntegerAttr.get(i32, -1))
        any_moved = nvvm.vote_sync(mask, moved, "any")
        idxs = list(np.ndindex(regs_shape))
        branch = scf.IfOp(any_moved, [arr.registers[i].type for i in idxs], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            out = []
            for i in idxs:
                row = tuple(0 if is_col else k for k, is_col in zip(i, col_dims, strict=True))
                out.append(arith.mulf(arr.registers[i], vector.broadcast(arr.registers[i].type, factor_of[row])))
            scf.yield_(out)
        with ir.InsertionPoint(branch.else_block):
            scf.yield_([arr.registers[i] for i in idxs])
        regs = np.empty_like(arr.registers)
        for i, result in zip(idxs, branch.results, strict=True):
            regs[i] = result
        return mgpu.FragmentedArray(_registers=regs, _layout=arr.layout, _is_signed=None)

    return skip_unmoved(acc, alpha)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    results, jobs = [], []
    for row, (problem, history, candidates, stages) in ROWS.items():
        bounds = jnp.asarray(ranker_bounds(problem.batch, problem.seq_len, history, candidates,
                                           np.random.default_rng(0)))
        q, k, v = make_device_tensors(problem, 0)
        fns, outs = {}, {}
        for name in VARIANTS:
            config = KernelConfig.for_problem(problem, num_stages=stages, persistent=True, scale_in_exp2=True,
                                              lazy_rescale=name != "off")
            if name == "lazy_nobranch":
                kernel_mod.rescale_rows = lambda acc, alpha, interpret: rescale_rows(acc, alpha, interpret=True)
            if name == "lazy_warp":
                kernel_mod.rescale_rows = rescale_rows_warp
            before = set(DUMP.glob("*")) if DUMP.exists() else set()
            fns[name] = kernel_mod.build_forward(problem, config)
            outs[name] = jax.block_until_ready(fns[name](q, k, v, bounds))  # traced and compiled now
            kernel_mod.rescale_rows = rescale_rows
            new = sorted(p.name for p in (set(DUMP.glob("*")) if DUMP.exists() else set()) - before)
            results.append(dict(kind="dump", row=row, variant=name, files=new))
            print(json.dumps(results[-1]), flush=True)
        for name in VARIANTS[1:]:
            d_out = float(jnp.max(jnp.abs(outs[name][0].astype(jnp.float32) - outs["off"][0].astype(jnp.float32))))
            fin = jnp.isfinite(outs["off"][1])
            d_lse = float(jnp.max(jnp.where(fin, jnp.abs(outs[name][1] - outs["off"][1]), 0.0)))
            results.append(dict(kind="compare", row=row, variant=name, d_out=d_out, d_lse=d_lse))
            print(json.dumps(results[-1]), flush=True)
        jobs.append((row, (q, k, v, bounds), fns))
    deadline = time.time() + float(os.environ.get("AB_SECONDS", "120"))
    settings = MeasureSettings(max_seconds=1.0)
    rnd = 0
    while time.time() < deadline:
        for row, args, fns in jobs:
            order = list(fns.items()) if rnd % 2 == 0 else list(fns.items())[::-1]
            for name, fn in order:
                tm = time_jax(fn, args, settings)
                results.append(dict(kind="timing", row=row, variant=name, round=rnd, median_us=tm.median_us,
                                    spread=tm.spread))
        rnd += 1
        (OUT / "probe_lazy.json").write_text(json.dumps(results, indent=1))
    t = defaultdict(lambda: defaultdict(list))
    for r in results:
        if r["kind"] == "timing":
            t[r["row"]][r["variant"]].append(r["median_us"])
    print("\n== over the off kernel, medians over rounds ==")
    for row, v in t.items():
        base = median(v["off"])
        print(row, f"off {base:.1f} us ({len(v['off'])} rounds);",
              "; ".join(f"{n} x{median(v[n]) / base:.3f}" for n in VARIANTS[1:]))


if __name__ == "__main__":
    main()
