"""Builds kept in the user's cache folder, so a warm verify, a resumed sweep and a ``--contenders`` re-measure
load a candidate's compiled program instead of compiling it again.

The ranker compiles in ~6 s a candidate, nearly all of it Python lowering that JAX's own persistent cache does not
keep (results/engine/2026-12-04-sweep-throughput/); its exported build loads in ~0.02 s. An entry is keyed by
everything the program is made from: the kernel, the hash of its sources, the problem, the config and the system
stamps the backend matches tables on (GPU, driver, framework versions). It holds the build's bytes as
``PortableBuild.export_build`` wrote them (an executable, as JAX's own compilation cache holds), in the keyed,
digested file of ``array_cache``; a file that fails its key or digest, or whose build no longer loads, is one
warning and a recompile. The oldest entries go when the folder passes ``BUILD_CACHE_BYTES``.

Loading a build runs what it holds (JAX unpickles an exported executable), so nothing another user could write is
loaded: every entry is signed with the user's own secret (``array_cache``'s ``signed``, a 0600 key in the folder),
and a folder that another user owns or can write (``trust``) is not used at all, one warning saying so.

The folder comes from the worker's environment (``KERNELTUNE_BUILD_CACHE``, set by the engine to the user's
cache folder's ``builds/``); without it nothing is kept.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kerneltune.files.array_cache import ArrayCache
from kerneltune.files.logs import log_once
from kerneltune.files.trust import why_untrusted
from kerneltune.seams.limits import BUILD_CACHE_BYTES

ENV = "KERNELTUNE_BUILD_CACHE"
_BUILD = "build"


def build_key(kernel: str, source_hash: str, problem: Mapping[str, Any], config: Mapping[str, Any],
              stamps: Mapping[str, Any], matched: Sequence[str]) -> dict[str, Any]:
    """What a build is made from: the kernel and its sources, the problem, the config, and the system stamps a
    table entry is matched on (``matched``), the kernel's own hash left to ``source_hash``."""
    # The key is on disk (a cached build's name): its word for the config stays "tiles".
    return {"kernel": kernel, "source": source_hash, "problem": dict(problem), "tiles": dict(config),
            "system": {k: stamps.get(k) for k in matched if k != "kernel_hash"}}


class BuildCache(ArrayCache):
    label = "build cache"
    log = logging.getLogger("kerneltune.builds")
    env = ENV
    signed = True

    def __init__(self, folder: Path | None):
        if folder is not None and (why := why_untrusted(folder)) is not None:
            log_once(self.log, f"build cache {folder}: {why}; builds are neither loaded from it nor kept there")
            folder = None
        super().__init__(folder)

    def build(self, key: Mapping[str, Any], compile_: Callable[[], bytes],
              loads: Callable[[bytes], object]) -> tuple[bytes, bool]:
        """(the build's bytes, whether they came from the cache): the stored build if ``loads`` takes it, else
        ``compile_()``'s, stored for next time."""
        found = self.load(key)
        path = self.path(key)
        if found is not None and path is not None:
            data = found[_BUILD].tobytes()
            try:
                loads(data)
            except Exception as e:  # a build this system cannot load is a recompile, never a verdict
                self.log.warning("%s %s: does not load here (%s); recompiling it", self.label, path,
                                 type(e).__name__)
            else:
                os.utime(path)  # recently used: the last to be trimmed
                return data, True
        data = compile_()
        self.store(key, {_BUILD: np.frombuffer(data, np.uint8)})
        self.trim()
        return data, False

    def trim(self, max_bytes: int = BUILD_CACHE_BYTES) -> None:
        """The least recently used entries out until the folder holds at most ``max_bytes``."""
        if self.folder is None or not self.folder.is_dir():
            return
        entries = []
        for p in self.folder.glob("*.npz"):
            try:
                st = p.stat()
            except OSError:  # taken by another worker's trim meanwhile
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        for _, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= max_bytes:
                break
            p.unlink(missing_ok=True)
            total -= size
