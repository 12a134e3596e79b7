"""The command line: ``app`` parses (``app.py``), ``commands`` runs, ``render`` prints, ``failures`` ends."""

import os

# No transparent huge pages for NumPy's arrays in the CLI's processes and those it starts, unless the user says
# (NumPy reads this when imported): where the kernel defragments memory for them on the spot (defrag "madvise"),
# the drafter's CPU checks, fresh processes allocating GBs, spent up to a fifth of their time in it
# (results/drafter_wide/2026-12-07-interpret-batches/command.txt).
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

from .app import app

__all__ = ["app"]
