"""Ranker attention forward (JAX Pallas Mosaic GPU, Hopper). The launch API (``ranker_attention``) imports JAX on
first use, so that reading the ranker's spaces, tables and journals does not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bounds import SegmentBounds
from .cap import CapMethod, CapParams, cap_forward
from .config import KernelConfig, Problem

if TYPE_CHECKING:
    from .api import ranker_attention

__all__ = [
    "CapMethod",
    "CapParams",
    "KernelConfig",
    "Problem",
    "SegmentBounds",
    "cap_forward",
    "ranker_attention",
]


def __getattr__(name: str) -> Any:
    if name == "ranker_attention":
        from .api import ranker_attention

        return ranker_attention
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
