"""Run X, CPU only (after run S's lpt_model.py, 483e39c): the persistent kernel's greedy tile claim (tiles in
batch order) against the longest-first order, over 20 draws of the ragged rows instead of the bench's one (seed
0). A tile costs its KV steps plus 1.2 fixed steps, a padding tile 0.1 (run H's step rule); 132 CTAs claim in order."""
import heapq

import numpy as np

from kerneltune.kernels.ranker_attention.inputs import ranker_bounds


def tiles(b, t, h, rows_per_tile, bkv, history, cand, seed=0, ragged=True):
    bounds = ranker_bounds(b, t, history, cand, np.random.default_rng(seed))
    if not ragged:
        bounds[:] = bounds[0]
    costs, rows = [], []
    for bi, (hl, hu, cl, cu) in enumerate(bounds):
        for _ in range(h):
            for qs in range(t // rows_per_tile):
                base, end = qs * rows_per_tile, (qs + 1) * rows_per_tile
                valid = (hl < hu and base < hu and end > hl) or (cl < cu and base < cu and end > cl)
                rows.append(bi)
                if not valid:
                    costs.append(0.1)
                    continue
                hist = -(-hu // bkv) - hl // bkv if hl < hu else 0
                lo, hi = max(cl, base), min(cu, end)
                costs.append(hist + ((-(-hi // bkv) - lo // bkv) if lo < hi else 0) + 1.2)
    return np.array(costs), np.array(rows)


def greedy(costs, ctas=132):
    heap = [(0.0, i) for i in range(ctas)]
    for c in costs:
        t, i = heapq.heappop(heap)
        heapq.heappush(heap, (t + c, i))
    return max(t for t, _ in heap)


for name, args in [("d64 ragged kv128", (64, 1024, 4, 128, 128, (256, 896), 128)),
                   ("d64 ragged kv64", (64, 1024, 4, 128, 64, (256, 896), 128)),
                   ("d128 ragged", (8, 4096, 16, 128, 128, (1024, 3584), 512))]:
    gains = []
    for seed in range(20):
        c, r = tiles(*args, seed=seed)
        mean = c.sum() / 132
        gains.append((greedy(c) / mean, greedy(c[np.argsort(-c, kind="stable")]) / mean))
    g = np.array(gains); x = g[:, 1] / g[:, 0]
    print(f"{name:17s} seeds 0-19: batch order {g[:,0].mean():.3f} [{g[:,0].min():.3f}, {g[:,0].max():.3f}], "
          f"longest first {g[:,1].mean():.3f} [{g[:,1].min():.3f}, {g[:,1].max():.3f}]; time ratio {x.mean():.3f} "
          f"[{x.min():.3f}, {x.max():.3f}]; seed 0 {x[0]:.3f}")
