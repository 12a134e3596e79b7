"""Where tuned tables live: the shipped ones inside the package, overlaid by the user's.

The shipped tables are package data (``kerneltune/tables/shipped/<device-kind>/<kernel>.json``), read
through ``importlib.resources`` so an installed wheel finds them wherever it is installed. The user's
tables (``$KERNELTUNE_TABLES``, else the per-user data folder from ``platformdirs``) overlay them entry
by entry: ``kerneltune install`` writes there, a sweep never does.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
from pathlib import Path


@functools.cache  # a launch's lookup asks on every trace
def shipped_tables_dir() -> Path:
    """The tables the package ships (a plain folder: kerneltune is never imported from a zip)."""
    return Path(str(importlib.resources.files("kerneltune.tables").joinpath("shipped")))


def user_tables_dir() -> Path:
    """``$KERNELTUNE_TABLES``, else the per-user data folder (``~/.local/share/kerneltune/tables`` on Linux)."""
    env = os.environ.get("KERNELTUNE_TABLES")
    if env:
        return Path(env)
    import platformdirs

    return platformdirs.user_data_path("kerneltune") / "tables"


def table_roots() -> tuple[Path, Path]:
    """The folders the runtime reads, in overlay order: the user's first, then the shipped ones."""
    return user_tables_dir(), shipped_tables_dir()
