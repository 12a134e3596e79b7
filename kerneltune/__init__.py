"""kerneltune: tune, verify and ship GPU kernels with their best configuration for every GPU and shape.

``kerneltune.Kernel`` is the base class of a kernel of one's own (``kerneltune.author``); it is imported on
first use, so ``import kerneltune`` stays light for the CLI and the workers. ``kerneltune.record()`` turns on the
miss ledger (``kerneltune.tables.recording``); ``kerneltune.autotuned(fn)`` reads tuned tables for a Triton
``@triton.autotune`` kernel (``kerneltune.author.autotuned``).
"""

from typing import Any

__version__ = "0.1.0"
_AUTHORING = ("Kernel", "Problem", "Config")


def __getattr__(name: str) -> Any:
    if name in _AUTHORING:
        from kerneltune import author

        return getattr(author, name)
    if name == "record":
        from kerneltune.tables.recording import record

        return record
    if name == "autotuned":
        from kerneltune.author.autotuned import autotuned

        return autotuned
    raise AttributeError(f"module 'kerneltune' has no attribute {name!r}")
