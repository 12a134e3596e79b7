"""Ranker attention forward (JAX Pallas Mosaic GPU, Hopper)."""

from .api import ranker_attention
from .bounds import SegmentBounds
from .cap import CapMethod, CapParams, cap_forward
from .config import KernelConfig, Problem

__all__ = [
    "CapMethod",
    "CapParams",
    "KernelConfig",
    "Problem",
    "SegmentBounds",
    "cap_forward",
    "ranker_attention",
]
