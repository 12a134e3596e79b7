"""The authoring API: a kernel of one's own in a few lines (``Kernel``), and what its methods are given."""

from .fields import Config, Problem
from .kernel import Kernel

__all__ = ["Config", "Kernel", "Problem"]
