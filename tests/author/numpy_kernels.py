"""Small NumPy kernels written with ``kerneltune.Kernel``, for the authoring API's tests: a right one, and
ones that each break one rule the check must catch."""

import numpy as np

import kerneltune as kt


class RowScale(kt.Kernel):
    """y = 2x, written into y row block by row block."""

    params = {"block": [1, 2, 4, 8], "order": ["forward", "backward"]}
    buckets = {"r8": {"rows": 8, "cols": 16, "dtype": "float32"}, "r64": {"rows": 64, "cols": 16, "dtype": "float32"}}
    skip_last_row = False  # a kernel that never writes its last row
    error = 0.0  # a kernel that is off by this much (relative)

    def build(self, p, c):
        def scale(x, y):
            starts = range(0, p.rows - self.skip_last_row, c.block)
            for r in starts if c.order == "forward" else reversed(starts):
                stop = min(r + c.block, p.rows - self.skip_last_row)
                y[r:stop] = 2 * x[r:stop] * (1 + self.error)
            return y
        return scale

    def inputs(self, p, seed):
        x = np.random.default_rng(seed).standard_normal((p.rows, p.cols)).astype(p.dtype)
        return x, np.empty_like(x)

    def reference(self, x, y):
        return 2 * x

    def refuses(self, p, c):
        if p.rows % c.block:
            return f"block {c.block} does not divide {p.rows} rows"
        return None

    def flops(self, p):
        return p.rows * p.cols


class SkipsARow(RowScale):
    skip_last_row = True


class OffByAThousandth(RowScale):
    error = 1e-3


class Allocates(RowScale):
    """Returns a fresh array instead of writing its argument."""

    def build(self, p, c):
        return lambda x, y: 2 * x


class ReturnsNothing(RowScale):
    def build(self, p, c):
        def scale(x, y):
            y[...] = 2 * x
        return scale


class RefusesLoudly(RowScale):
    def refuses(self, p, c):
        return int("not a number") if c.block == 8 else None


KERNEL = RowScale()
BROKEN = SkipsARow()
