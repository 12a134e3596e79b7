"""A Triton row softmax for an NVIDIA GPU; on the CPU, run it under Triton's interpreter: TRITON_INTERPRET=1."""
import numpy as np
import torch
import triton
import triton.language as tl

import kerneltune as kt


@triton.jit
def softmax_rows(y_ptr, x_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # a program normalises ROWS rows at once
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    x = tl.load(x_ptr + rows * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 1)[:, None])
    tl.store(y_ptr + rows * n_cols + cols, (e / tl.sum(e, 1)[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


class TritonSoftmax(kt.Kernel):
    params = {"rows": [1, 2, 4], "warps": [2, 4, 8]}
    buckets = {"r16-c256": {"n_rows": 16, "n_cols": 256}, "r16k-c4096": {"n_rows": 16384, "n_cols": 4096}}

    def build(self, p, c):
        def softmax(x, y):  # writes y and returns it
            grid = (triton.cdiv(p.n_rows, c.rows),)
            softmax_rows[grid](y, x, p.n_rows, p.n_cols, c.rows, triton.next_power_of_2(p.n_cols), num_warps=c.warps)
            return y
        return softmax

    def inputs(self, p, seed):
        x = torch.randn(p.n_rows, p.n_cols, generator=torch.Generator().manual_seed(seed), dtype=torch.bfloat16)
        x = x.to("cuda" if torch.cuda.is_available() else "cpu")
        return x, torch.empty_like(x)

    def reference(self, x, y):
        return np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)


KERNEL = TritonSoftmax()
