"""The command line: ``app`` parses (``app.py``), ``commands`` runs, ``render`` prints, ``failures`` ends."""

import os

# No transparent huge pages for NumPy's arrays in the CLI's processes and those it starts (NumPy asks for them on
# every array of 4 MiB or more, and reads this when imported): where the kernel defragments memory for them on the
# spot (defrag "madvise"), the drafter's CPU checks, fresh processes allocating GBs, spent the difference in the
# kernel (`verify drafter-wide --interpret` on the 2-core CI machine: 212 s and 171 s against 164 s and 158 s
# without). A user's own setting wins.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

from .app import app

__all__ = ["app"]
