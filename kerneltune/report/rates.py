"""A FLOP rate in the unit that reads: a CPU kernel's GFLOP/s are not "0 TFLOP/s"."""

from __future__ import annotations


def rate_text(tflops: float | None) -> str:
    """``tflops`` (TFLOP/s, as journals and tables keep it) in TFLOP/s, GFLOP/s or MFLOP/s; '-' where none."""
    if tflops is None or tflops != tflops or tflops <= 0:
        return "-"
    for scale, unit in ((1.0, "TFLOP/s"), (1e-3, "GFLOP/s"), (1e-6, "MFLOP/s")):
        if tflops >= scale:
            return f"{tflops / scale:.3g} {unit}"
    return f"{tflops * 1e9:.3g} kFLOP/s"
