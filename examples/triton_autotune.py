"""Triton's fused-softmax tutorial kernel under @triton.autotune, served by kerneltune's tables: the two lines
marked `# kerneltune` are all it adds. On the CPU, run it under Triton's interpreter: TRITON_INTERPRET=1."""
import torch
import triton
import triton.language as tl

import kerneltune as kt  # kerneltune


@triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (2, 4, 8)], key=["n_cols"])
@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = input_ptr + row_idx * input_row_stride + col_offsets
    row = tl.load(input_ptrs, mask=col_offsets < n_cols, other=-float("inf"))
    numerator = tl.exp(row - tl.max(row, axis=0))
    softmax_output = numerator / tl.sum(numerator, axis=0)
    output_ptrs = output_ptr + row_idx * output_row_stride + col_offsets
    tl.store(output_ptrs, softmax_output, mask=col_offsets < n_cols)


softmax_kernel = kt.autotuned(softmax_kernel)  # kerneltune


def softmax(x):
    y = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](y, x, x.stride(0), y.stride(0), x.shape[1], BLOCK_SIZE=block)
    return y
