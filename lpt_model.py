"""Run S, CPU only: how far the persistent kernel's greedy tile claim (tiles in batch order) sits from the
mean work per CTA, against longest-processing-time-first orders. A tile costs its KV steps (history plus
candidate blocks) plus 1.2 fixed steps, a padding tile 0.1 (run H's step rule); 132 CTAs claim in order."""
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
                   ("d128 ragged", (8, 4096, 16, 128, 128, (1024, 3584), 512)),
                   ("d64 even", (64, 1024, 4, 128, 128, (768, 896), 128, 0, False))]:
    c, r = tiles(*args)
    mean = c.sum() / 132
    row_cost = {}
    for ci, ri in zip(c, r, strict=True):
        row_cost[ri] = max(row_cost.get(ri, 0), ci)
    by_row = np.concatenate([np.where(r == x)[0] for x in sorted(set(r), key=lambda x: -row_cost[x])])
    print(f"{name:18s} tiles {len(c)}  busiest CTA / mean: batch order {greedy(c) / mean:.3f}, "
          f"tiles longest first {greedy(c[np.argsort(-c, kind='stable')]) / mean:.3f}, "
          f"rows longest first {greedy(c[by_row]) / mean:.3f}")
