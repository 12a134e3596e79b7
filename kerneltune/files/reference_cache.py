"""References kept on disk, so a resumed sweep, a ``--contenders`` re-measure and ``verify`` reuse them.

A kernel's check compares each candidate with a reference computed from the bucket's inputs; within one
worker process that reference is computed once (the kernel's own memo), and this cache carries it across
processes (``array_cache``: keyed, digested, never pickled).

The folder comes from the worker's environment (``KERNELTUNE_REFERENCE_CACHE``, set by the engine to the
working folder's ``references/``); without it nothing is kept.
"""

from __future__ import annotations

import logging

from kerneltune.files.array_cache import ArrayCache

ENV = "KERNELTUNE_REFERENCE_CACHE"


class ReferenceCache(ArrayCache):
    label = "reference cache"
    log = logging.getLogger("kerneltune.references")
    env = ENV
