"""H200 run for ranker attention: verify every feasible config of the default space
(D 64/128/256, every cap method, 3 random bound sets + the adversarial set, outputs
poisoned with NaN), then time every feasible D=128 config against FlexAttention on
B=8, T=4096, ~3.5k history, 512 candidates, 8 heads, tanh cap 30.

    PYTHONPATH=. python3 results/ranker_attention/h200_verify_and_time.py --out DIR
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import sys
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention.cap import CapMethod
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem, infeasibility
from kerneltune.kernels.ranker_attention.inputs import (
    adversarial_bounds,
    make_tensors,
    random_bounds,
    ranker_bounds,
    useful_flops,
)
from kerneltune.kernels.ranker_attention.kernel import build_forward
from kerneltune.kernels.ranker_attention.reference import reference_f32
from kerneltune.kernels.ranker_attention.verify import compare
from kerneltune.tables.stamps import system_stamps
from kerneltune.tuning.measure import MeasureSettings, time_jax, time_torch
from kerneltune.tuning.space import load_space

ROOT = Path(__file__).resolve().parents[2]
CAPS = {CapMethod.NONE: None, CapMethod.TANH: 30.0, CapMethod.TANH_APPROX: 30.0,
        CapMethod.SOFTSIGN: 20.0, CapMethod.CLAMP: 5.0}


def log(fh, msg):
    print(msg, flush=True)
    fh.write(msg + "\n")
    fh.flush()


def space_configs(problem: Problem):
    fields = {f: getattr(problem, f) for f in Problem.__dataclass_fields__}
    fields["cap_method"] = problem.cap_method.value
    space = load_space(ROOT / "search_spaces/ranker_attention.toml",
                       set(KernelConfig.TILE_FIELDS), set(Problem.__dataclass_fields__))
    out = []
    for tiles in space.configs(fields):
        cfg = KernelConfig.for_problem(problem, **tiles)
        out.append((tiles, cfg, infeasibility(cfg, problem)))
    return out


def compile_all(jobs, workers=12):
    """jobs: list of (key, fn, arg_shapes) -> {key: compiled or exception}"""
    def one(job):
        key, fn, shapes = job
        t0 = time.time()
        try:
            return key, fn.lower(*shapes).compile(), time.time() - t0
        except Exception as e:
            return key, e, time.time() - t0
    with cf.ThreadPoolExecutor(workers) as ex:
        return {k: (c, dt) for k, c, dt in ex.map(one, jobs)}


def verify(out_dir: Path, fh, records, head_dims=(64, 128, 256)):
    B, T, HQ, HKV = 10, 512, 4, 2
    rng = np.random.default_rng(2026_11_29)
    bound_sets = [random_bounds(B, T, rng) for _ in range(3)] + [adversarial_bounds(T, rng)]
    assert all(bs.shape == (B, 4) for bs in bound_sets)
    summary = []
    for d in head_dims:
        for method, cap in CAPS.items():
            problem = Problem(batch=B, seq_len=T, q_heads=HQ, kv_heads=HKV, head_dim=d,
                              cap_method=method, cap=cap)
            q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in make_tensors(problem, seed=d))
            qf, kf, vf = (x.astype(jnp.float32) for x in (q, k, v))
            with jax.default_matmul_precision("highest"):
                refs = [tuple(np.asarray(r) for r in reference_f32(qf, kf, vf, jnp.asarray(bs),
                        sm_scale=problem.scale, cap_method=method, cap=cap)) for bs in bound_sets]
            configs = space_configs(problem)
            shapes = (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct(k.shape, k.dtype),
                      jax.ShapeDtypeStruct(v.shape, v.dtype), jax.ShapeDtypeStruct((B, 4), jnp.int32),
                      jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((B, HQ, T), jnp.float32))
            jobs = [(i, build_forward(problem, cfg, poisoned=True), shapes)
                    for i, (_, cfg, why) in enumerate(configs) if why is None]
            compiled = compile_all(jobs)
            for i, (tiles, cfg, why) in enumerate(configs):
                rec = {"phase": "verify", "head_dim": d, "cap_method": method.value, "tiles": tiles}
                if why is not None:
                    rec.update(status="constraint", error=why)
                else:
                    fn, ct = compiled[i]
                    rec["compile_s"] = round(ct, 2)
                    if isinstance(fn, Exception):
                        rec.update(status="compile", error=f"{type(fn).__name__}: {fn}"[:2000])
                    else:
                        errs, worst = [], 0.0
                        try:
                            for bs, (ro, rl) in zip(bound_sets, refs):
                                o0 = jnp.full(q.shape, jnp.nan, q.dtype)
                                l0 = jnp.full((B, HQ, T), jnp.nan, jnp.float32)
                                o, l = fn(q, k, v, jnp.asarray(bs), o0, l0)
                                c = compare(np.asarray(o.astype(jnp.float32)), np.asarray(l), ro, rl, bs,
                                            "bfloat16", method)
                                worst = max(worst, c.rel_fro)
                                errs += list(c.errors)
                            rec.update(status="ok" if not errs else "correctness", rel_fro=worst,
                                       error="; ".join(errs)[:2000] or None)
                        except Exception as e:
                            rec.update(status="runtime", error=f"{type(e).__name__}: {e}"[:2000])
                records.append(rec)
                (out_dir / "records.jsonl").open("a").write(json.dumps(rec) + "\n")
            n_ok = sum(1 for r in records if r.get("phase") == "verify" and r["head_dim"] == d
                       and r["cap_method"] == method.value and r["status"] == "ok")
            n_bad = [r for r in records if r.get("phase") == "verify" and r["head_dim"] == d
                     and r["cap_method"] == method.value and r["status"] not in ("ok", "constraint")]
            line = f"verify D={d:3d} cap={method.value:12s} feasible={len(jobs):2d} ok={n_ok:2d} failed={len(n_bad)}"
            log(fh, line)
            for r in n_bad[:3]:
                log(fh, f"   FAIL {r['tiles']} {r['status']}: {str(r['error'])[:300]}")
            summary.append(line)
    return summary


def flex_time(q, k, v, bounds, scale, cap, settings):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    tq, tk, tv = (torch.from_numpy(np.asarray(x.astype(jnp.float32))).to("cuda", torch.bfloat16)
                  .transpose(1, 2).contiguous() for x in (q, k, v))
    b = torch.from_numpy(np.asarray(bounds)).to("cuda")
    hl, hu, cl, cu = b[:, 0], b[:, 1], b[:, 2], b[:, 3]

    def mask_mod(bi, h, qi, ki):
        q_hist = (qi >= hl[bi]) & (qi < hu[bi])
        q_cand = (qi >= cl[bi]) & (qi < cu[bi])
        k_hist = (ki >= hl[bi]) & (ki < hu[bi])
        return ((q_hist | q_cand) & k_hist) | (q_cand & (qi == ki))

    def score_mod(score, bi, h, qi, ki):
        return cap * torch.tanh(score / cap)

    B, H, T, _ = tq.shape
    block_mask = create_block_mask(mask_mod, B, None, T, T, device="cuda")
    fa = torch.compile(flex_attention)
    run = lambda: fa(tq, tk, tv, score_mod=score_mod, block_mask=block_mask, scale=scale)  # noqa: E731
    out = run()
    torch.cuda.synchronize()
    timing = time_torch(run, settings)
    return out.transpose(1, 2).float().cpu().numpy(), timing


def dense_sdpa_time(q, k, v, scale, settings):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    tq, tk, tv = (torch.from_numpy(np.asarray(x.astype(jnp.float32))).to("cuda", torch.bfloat16)
                  .transpose(1, 2).contiguous() for x in (q, k, v))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        run = lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, scale=scale)  # noqa: E731
        run()
        return time_torch(run, settings)


def timing(out_dir: Path, fh, records):
    B, T, H, D = 8, 4096, 8, 128
    rng = np.random.default_rng(7)
    bounds = ranker_bounds(B, T, (3400, 3584), 512, rng)
    settings = MeasureSettings(rel_noise=0.01, max_seconds=1.5)
    problem = Problem(batch=B, seq_len=T, q_heads=H, kv_heads=H, head_dim=D, cap_method="tanh", cap=30.0)
    flops = useful_flops(problem, bounds)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in make_tensors(problem, seed=11))
    jb = jnp.asarray(bounds)
    qf, kf, vf = (x.astype(jnp.float32) for x in (q, k, v))
    with jax.default_matmul_precision("highest"):
        ro, rl = (np.asarray(r) for r in reference_f32(qf, kf, vf, jb, sm_scale=problem.scale,
                                                       cap_method="tanh", cap=30.0))
    rows = []
    for method in (CapMethod.TANH, CapMethod.TANH_APPROX):
        p = Problem(batch=B, seq_len=T, q_heads=H, kv_heads=H, head_dim=D, cap_method=method, cap=30.0)
        configs = [(t, c) for t, c, why in space_configs(p) if why is None]
        shapes = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v, jb))
        compiled = compile_all([(i, build_forward(p, c), shapes) for i, (_, c) in enumerate(configs)])
        for i, (tiles, cfg) in enumerate(configs):
            rec = {"phase": "time", "shape": [B, T, H, D], "cap_method": method.value, "tiles": tiles}
            fn, _ = compiled[i]
            if isinstance(fn, Exception):
                rec.update(status="compile", error=str(fn)[:2000])
            else:
                try:
                    o, l = fn(q, k, v, jb)
                    c = compare(np.asarray(o.astype(jnp.float32)), np.asarray(l), ro, rl, bounds, "bfloat16", method)
                    if not c.ok:
                        rec.update(status="correctness", error="; ".join(c.errors)[:2000])
                    else:
                        t = time_jax(fn, (q, k, v, jb), settings)
                        rec.update(status="ok", rel_fro=c.rel_fro, timing=t.to_dict(),
                                   tflops=flops / (t.median_us * 1e-6) / 1e12)
                except Exception as e:
                    rec.update(status="runtime", error=f"{type(e).__name__}: {e}"[:2000])
            records.append(rec)
            (out_dir / "records.jsonl").open("a").write(json.dumps(rec) + "\n")
            rows.append(rec)
            if rec["status"] == "ok":
                log(fh, f"time {method.value:11s} {tiles} {rec['timing']['median_us']:9.1f} us "
                        f"±{rec['timing']['spread']*100:.1f}% n={rec['timing']['samples']} {rec['tflops']:.0f} TFLOP/s")
            else:
                log(fh, f"time {method.value:11s} {tiles} {rec['status']}: {rec['error'][:300]}")
    try:
        fo, ft = flex_time(q, k, v, bounds, problem.scale, 30.0, settings)
        fc = compare(fo, rl * 0 + rl, ro, rl, bounds, "bfloat16", CapMethod.TANH)  # lse not compared
        flex = {"phase": "time", "impl": "flex_attention", "timing": ft.to_dict(),
                "tflops": flops / (ft.median_us * 1e-6) / 1e12, "max_abs": fc.max_abs, "rel_fro": fc.rel_fro}
    except Exception as e:
        flex = {"phase": "time", "impl": "flex_attention", "status": "error", "error": traceback.format_exc()[-2000:]}
        log(fh, f"flex failed: {e}")
    records.append(flex)
    (out_dir / "records.jsonl").open("a").write(json.dumps(flex) + "\n")
    try:
        dt = dense_sdpa_time(q, k, v, problem.scale, settings)
        dense_flops = 4 * B * H * T * T * D
        dense = {"phase": "time", "impl": "cudnn_sdpa_dense_nocap", "timing": dt.to_dict(),
                 "tflops": dense_flops / (dt.median_us * 1e-6) / 1e12}
    except Exception as e:
        dense = {"phase": "time", "impl": "cudnn_sdpa_dense_nocap", "status": "error", "error": str(e)[:2000]}
    records.append(dense)
    (out_dir / "records.jsonl").open("a").write(json.dumps(dense) + "\n")
    return rows, flex, dense, flops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-verify", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64, 128, 256])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fh = (args.out / "log.txt").open("w")
    log(fh, "stamps " + json.dumps(system_stamps()))
    records = []
    t0 = time.time()
    summary = [] if args.skip_verify else verify(args.out, fh, records, args.head_dims)
    if args.skip_timing:
        log(fh, "\n".join(summary))
        return
    rows, flex, dense, flops = timing(args.out, fh, records)
    log(fh, f"timing wall {time.time() - t0:.0f}s")
    log(fh, "\n==== summary ====")
    for line in summary:
        log(fh, line)
    ok = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: r["timing"]["median_us"])
    ft = flex.get("timing", {}).get("median_us", math.nan)
    log(fh, f"B8 T4096 H8 D128 tanh30, useful GFLOP {flops/1e9:.1f}")
    log(fh, f"FlexAttention: {ft:.1f} us ({flex.get('tflops', math.nan):.0f} TFLOP/s, rel_fro {flex.get('rel_fro', math.nan):.2e})")
    log(fh, f"dense cuDNN SDPA (no mask, no cap): {dense.get('timing', {}).get('median_us', math.nan):.1f} us "
            f"({dense.get('tflops', math.nan):.0f} dense TFLOP/s)")
    for r in ok:
        log(fh, f"{r['cap_method']:11s} {json.dumps(r['tiles'])} {r['timing']['median_us']:8.1f} us "
                f"{r['tflops']:5.0f} TFLOP/s  x{ft / r['timing']['median_us']:.2f} vs flex")
    log(fh, f"total wall {time.time() - t0:.0f}s")


if __name__ == "__main__":
    sys.exit(main())
