"""What the kernel's tiling makes it compute on the bench shapes, against the pairs the mask keeps
and against a dense kernel (CPU only; mirrors kernel.py's per-tile step counts).

For each bench shape and tile: CTAs and waves on 132 SMs (one CTA per SM: 3 warpgroups at 232/232/40
registers fill the register file), score pairs computed (every KV step of every valid tile is a full
2*block_q x block_kv block), and the ratio computed / kept. A kernel that ran its computed pairs at
the dense kernel's rate would reach useful/dense = kept / computed (times the wave-tail factors).

Usage: python results/ranker_attention/work_accounting.py [search_spaces/bench_ranker_attention.toml]
"""

import math
import sys
from pathlib import Path

import numpy as np

from kerneltune.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import kept_pairs, ranker_bounds

SMS = 132


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def computed_pairs(bounds: np.ndarray, t: int, block_q: int, block_kv: int) -> tuple[int, int]:
    """(score pairs computed per head, valid tiles per head) by the kernel's step rule."""
    pairs = tiles = 0
    for hl, hu, cl, cu in bounds.tolist():
        for base in range(0, t, 2 * block_q):
            end = base + 2 * block_q
            valid = any(lo < hi and base < hi and end > lo for lo, hi in ((hl, hu), (cl, cu)))
            if not valid:
                continue
            hist = cdiv(hu, block_kv) - hl // block_kv if hl < hu else 0
            own_lo, own_hi = max(cl, base), min(cu, end)
            cand = cdiv(own_hi, block_kv) - own_lo // block_kv if own_lo < own_hi else 0
            pairs += (hist + cand) * 2 * block_q * block_kv
            tiles += 1
    return pairs, tiles


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "search_spaces/bench_ranker_attention.toml")
    shapes = load_spec(path).shapes
    print(f"{'shape':18} {'tile':9} {'CTAs':>6} {'waves':>6} {'tail':>5} {'computed/kept':>13} "
          f"{'kept/dense':>10} {'dense tail':>10}")
    for shape in shapes:
        p = Problem(**shape.problem)
        bounds = ranker_bounds(p.batch, p.seq_len, shape.history, shape.candidates, np.random.default_rng(0))
        bounds[:] = bounds[0]  # as the bench does, so that the composite applies
        kept = kept_pairs(bounds)
        dense = p.batch * p.seq_len ** 2
        for block_q, block_kv in ((64, 128), (128, 64)):
            pairs, tiles = computed_pairs(bounds, p.seq_len, block_q, block_kv)
            ctas = tiles * p.q_heads
            dense_ctas = p.batch * p.q_heads * p.seq_len // 128
            print(f"{shape.name:18} q{block_q}kv{block_kv:<4} {ctas:>6} {ctas / SMS:>6.2f} "
                  f"{ctas / (math.ceil(ctas / SMS) * SMS):>5.2f} {pairs / kept:>13.3f} {kept / dense:>10.3f} "
                  f"{dense_ctas / (math.ceil(dense_ctas / SMS) * SMS):>10.2f}")


if __name__ == "__main__":
    main()
