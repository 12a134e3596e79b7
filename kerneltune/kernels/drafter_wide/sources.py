"""The files the drafter's compiled kernel is built from, and their hash: a tuned entry, a kept build or a captured
program made from other files is stale. One place for the plugin and the interpreter's capture."""

from __future__ import annotations

from pathlib import Path

from kerneltune.tables.stamps import source_hash

from .kernel import KERNEL_FILES

# Its constants come from the reference too.
FILES = ("layout.py", "indexing.py", "health.py", "reference.py", "device.py", *KERNEL_FILES, "offline_compile.py")


def drafter_source_hash() -> str:
    here = Path(__file__).parent
    return source_hash(here / name for name in FILES)
