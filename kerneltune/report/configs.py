"""A config in one short line: the fields that differ from the kernel's defaults, for every table and chart
that must fit a screen (the journal keeps each config whole)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def config_text(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """``k=v`` for each field that differs from ``defaults`` (every field where the kernel declares none);
    "defaults" when none differs."""
    shown = [f"{k}={v}" for k, v in config.items() if k not in defaults or defaults[k] != v]
    return " ".join(shown) or "defaults"
