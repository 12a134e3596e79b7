"""CPU model of the persistent kernel's tile order (run G's prediction, before the A/B).

A tile costs its KV steps (kernel.py's plan()) plus 1.2 steps of fixed cost (run F's tile-cost probe);
a padding tile costs 0.1. The model gives the busiest CTA's work over the mean (the wall time's excess
over a perfect balance) for: the committed order (tile cta + i * 132), a greedy order (each tile goes to
the CTA that finishes first) and what the kernel can build without waiting for a tile to end: each CTA
claims its next tile from a shared counter when it starts the current one ("claim at start").

Usage: python3 tile_order_model.py
"""

import heapq

import numpy as np

from kerneltune.kernels.ranker_attention.inputs import ranker_bounds

CTAS, FIXED, PAD, BLOCK_Q, BLOCK_KV = 132, 1.2, 0.1, 64, 128


def tile_steps(row, seq_len):
    hl, hu, cl, cu = (int(x) for x in row)
    out = []
    for base in range(0, seq_len, 2 * BLOCK_Q):
        end = base + 2 * BLOCK_Q
        if not ((hl < hu and base < hu and end > hl) or (cl < cu and base < cu and end > cl)):
            out.append(None)
            continue
        n = -(-hu // BLOCK_KV) - hl // BLOCK_KV if hl < hu else 0
        lo, hi = max(cl, base), min(cu, end)
        out.append(n + (-(-hi // BLOCK_KV) - lo // BLOCK_KV if lo < hi else 0))
    return out


def costs(bounds, seq_len, heads):
    return [PAD if s is None else s + FIXED for row in bounds for _ in range(heads) for s in tile_steps(row, seq_len)]


def stride(c):
    per = np.zeros(CTAS)
    for i, x in enumerate(c):
        per[i % CTAS] += x
    return per.max()


def greedy(c):
    heap = [0.0] * CTAS
    for x in c:
        heapq.heappush(heap, heapq.heappop(heap) + x)
    return max(heap)


def claim_at_start(c):
    starts = [(0.0, cta, cta) for cta in range(min(CTAS, len(c)))]
    heapq.heapify(starts)
    nxt, end = min(CTAS, len(c)), 0.0
    while starts:
        t, cta, tile = heapq.heappop(starts)  # this CTA starts ``tile`` at t and claims the next now
        end = max(end, t + c[tile])
        if nxt < len(c):
            heapq.heappush(starts, (t + c[tile], cta, nxt))
            nxt += 1
    return end


def ratios(c):
    mean = sum(c) / CTAS
    return stride(c) / mean, greedy(c) / mean, claim_at_start(c) / mean


def random_shapes():
    """(seq_len, q heads, bounds) of 294 random ranker shapes (seed 1) of at least one tile per CTA:
    many have padding tiles."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        t = int(rng.choice([1024, 1536, 2048, 3072, 4096, 8192]))
        h, b = int(rng.choice([2, 4, 8, 16])), int(rng.integers(1, 65))
        cand = int(rng.choice([16, 32, 128, 256, 512]))
        lo = int(rng.integers(t // 4, t - cand))
        hi = int(rng.integers(lo, t - cand + 1))
        bounds = ranker_bounds(b, t, lo if rng.random() < 0.5 else (lo, hi), cand, rng)
        if len(costs(bounds, t, h)) >= CTAS:
            yield t, h, bounds


def main() -> None:
    def rows(b, t, h, cand):
        return ranker_bounds(b, t, h, cand, np.random.default_rng(0))

    def equal(b, row):
        return np.tile(np.array([row]), (b, 1))

    shapes = {  # name: (bounds, seq_len, q heads), as schedule_ab.py runs them
        "t2k-equal-1664-pad (B33)": (equal(33, (0, 1664, 1664, 1664)), 2048, 8),
        "t2k-dense (B33)": (equal(33, (0, 2048, 2048, 2048)), 2048, 8),
        "bench t2k none (equal)": (equal(16, (0, 1754, 1754, 2010)), 2048, 8),
        "bench t2k rows tanh": (rows(16, 2048, (1536, 1792), 256), 2048, 8),
        "bench t8k none (equal)": (equal(4, (0, 7130, 7130, 8154)), 8192, 16),
        "bench t8k rows tanh": (rows(4, 8192, (6912, 7168), 1024), 8192, 16),
        "bench d64 none (equal)": (equal(64, (0, 877, 877, 1005)), 1024, 4),
        "bench d64 rows tanh": (rows(64, 1024, (768, 896), 128), 1024, 4),
        "bucket d64-softsign rows": (rows(32, 2048, (1800, 1900), 32), 2048, 4),
        "bucket d128-tanh-long rows": (rows(8, 4096, (3400, 3584), 512), 4096, 8),
        "t2k half padding (B32)": (equal(32, (0, 900, 900, 1000)), 2048, 8),
    }
    print(f"{'shape':28} {'stride':>7} {'greedy':>7} {'claim':>7} {'predicted B/A':>14}")
    for name, (bounds, t, h) in shapes.items():
        s, g, c = ratios(costs(bounds, t, h))
        print(f"{name:28} {s:7.3f} {g:7.3f} {c:7.3f} {c / s:14.3f}")
    found = [ratios(costs(bounds, t, h)) for t, h, bounds in random_shapes()]
    r = np.array(found)
    for i, name in enumerate(("stride", "greedy", "claim at start")):
        print(f"{len(r)} random shapes, {name:15} busiest/mean: geomean {np.exp(np.log(r[:, i]).mean()):.3f}, "
              f"p90 {np.percentile(r[:, i], 90):.3f}, max {r[:, i].max():.3f}")


if __name__ == "__main__":
    main()
