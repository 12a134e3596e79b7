"""A step's small inputs as the kernel reads them: flat int32 and float32 arrays built by the host.

The GPU runner uploads them (``rocm_runner.step_tensors``) and the emulation reads them through the
same ``indexing.py`` offsets the kernel uses, so a wrong slot, page or RoPE entry shows in both."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import indexing as ix
from .layout import DrafterLayout
from .reference import StepInputs, rope_angles


@dataclass(frozen=True)
class HostArrays:
    block_table: np.ndarray  # int32 [requests * bt_width]: each request's pages, row-major
    bt_width: int
    positions: np.ndarray  # int32 [rows]
    slots: np.ndarray  # int32 [rows]: the cache slot of each row's new K and V (ix.page_slot)
    seq_lens: np.ndarray  # int32 [requests]: cached tokens plus this step's rows
    cos_sin: np.ndarray  # float32 [rows * head_dim]: per row, cos of the head_dim / 2 angles, then sin


def host_arrays(layout: DrafterLayout, inputs: StepInputs, theta: float,
                rope_dtype: type[np.floating] = np.float32) -> HostArrays:
    """The arrays the kernel reads; ``rope_dtype`` float64 keeps the RoPE table exact (the emulation's
    float64 mode), its entries still addressed as the kernel's 4-byte words."""
    table = inputs.block_table.numpy().astype(np.int32)
    positions = inputs.positions.numpy().astype(np.int32)
    rows = np.arange(len(positions))
    request = rows // inputs.qpr
    pages = table[request, positions // layout.BLOCK]
    ang = rope_angles(inputs.positions, layout.model.head_dim, theta).numpy()
    return HostArrays(
        block_table=table.ravel(), bt_width=table.shape[1], positions=positions,
        slots=np.asarray(ix.page_slot(layout, pages, positions), dtype=np.int32),
        seq_lens=(inputs.context.numpy() + inputs.qpr).astype(np.int32),
        cos_sin=np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(rope_dtype).ravel())


def word(array: np.ndarray, at: int | np.ndarray) -> np.ndarray:
    """The 4-byte word of ``array`` at byte offset ``at``, as the kernel loads it."""
    return array[np.asarray(at) // 4]
