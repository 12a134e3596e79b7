"""The default check of a kernel of one's own: its outputs against its reference, element by element.

The error of an output is its largest absolute difference from the reference over the reference's largest
magnitude: a scale-free figure, judged against a tolerance that the output's dtype sets (its rounding
unit, times a margin for a reordered sum) unless the kernel sets its own. An element that is NaN where the
reference is a number fails whatever the tolerance: outputs are poisoned with NaN before the judged call,
so an element the kernel never wrote reads NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The largest error over the reference's magnitude accepted for an output of each dtype.
TOLERANCES = {
    "float64": 1e-10,
    "float32": 1e-4,
    "tfloat32": 2e-3,
    "float16": 4e-3,
    "bfloat16": 3e-2,
    "float8_e4m3fn": 0.15, "float8_e4m3fnuz": 0.15, "float8_e5m2": 0.3, "float8_e5m2fnuz": 0.3,
}
EXACT = 0.0  # integers and booleans: every element equal


def tolerance_for(dtype: str) -> float:
    """The default tolerance of an output of ``dtype`` (a framework's dtype name: 'bfloat16', 'int32')."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.startswith(("int", "uint", "bool")):
        return EXACT
    return TOLERANCES["float32"]


def compare(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray], dtypes: Sequence[str],
            tolerance: float | None) -> tuple[str | None, float]:
    """(why the outputs are wrong, or None; the worst error over all outputs)."""
    if len(outputs) != len(references):
        return f"the kernel returned {len(outputs)} output(s), the reference {len(references)}", float("inf")
    worst = 0.0
    for i, (out, ref, dtype) in enumerate(zip(outputs, references, dtypes, strict=True)):
        name = f"output {i}" if len(outputs) > 1 else "the output"
        if out.shape != ref.shape:
            return f"{name} has shape {out.shape}, the reference {ref.shape}", float("inf")
        out64, ref64 = out.astype(np.float64), ref.astype(np.float64)
        nan = np.isnan(out64) & ~np.isnan(ref64)
        if nan.any():
            first = tuple(int(j) for j in np.argwhere(nan)[0])
            return (f"{name}: {int(nan.sum())} of {out.size} elements NaN or never written (the first at "
                    f"{first}); outputs are NaN before the call"), float("inf")
        if out.size == 0:
            continue
        finite = np.isfinite(ref64)
        if not np.array_equal(np.isfinite(out64), finite) or not np.array_equal(out64[~finite], ref64[~finite]):
            return f"{name}: infinities differ from the reference's", float("inf")
        scale = float(np.max(np.abs(ref64[finite]), initial=0.0)) or 1.0
        err = float(np.max(np.abs(out64[finite] - ref64[finite]), initial=0.0)) / scale
        worst = max(worst, err)
        bound = tolerance_for(dtype) if tolerance is None else tolerance
        if err > bound:
            at = tuple(int(j) for j in np.unravel_index(np.argmax(np.where(finite, np.abs(out64 - ref64), -1)),
                                                        out.shape))
            return (f"{name} ({dtype}): error {err:.3g} of the reference's largest magnitude, over the "
                    f"tolerance {bound:.3g} (worst at {at}: {out64[at]:.6g} against {ref64[at]:.6g})"), err
    return None, worst
