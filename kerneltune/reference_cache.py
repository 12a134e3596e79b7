"""References kept on disk, so a resumed sweep, a ``--contenders`` re-measure and ``verify`` reuse them.

A kernel's check compares each candidate with a reference computed from the bucket's inputs; within one
worker process that reference is computed once (the kernel's own memo), and this cache carries it across
processes. An entry is a ``.npz`` named by the SHA-256 of its key and holding that key and a digest of its
arrays: a file whose key differs (a hash collision, a hand-copied file) or whose digest does not match (a torn
or edited file) is one warning and a recompute, never used. Nothing in a file can run code: arrays only,
read without pickles.

The folder comes from the worker's environment (``KERNELTUNE_REFERENCE_CACHE``, set by the engine to the
working folder's ``references/``); without it nothing is kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

ENV = "KERNELTUNE_REFERENCE_CACHE"
_KEY, _DIGEST = "__key__", "__digest__"

log = logging.getLogger("kerneltune.references")


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.view(np.uint8).reshape(-1).data if a.size else b"")
    return h.hexdigest()


class ReferenceCache:
    """``get(key, compute)``: the arrays stored under ``key``, else ``compute()``'s, stored for next time."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.seconds = 0.0  # time spent loading or computing, for the check's phase accounting

    @classmethod
    def from_env(cls) -> ReferenceCache:
        folder = os.environ.get(ENV)
        return cls(Path(folder) if folder else None)

    def path(self, key: Mapping[str, Any]) -> Path | None:
        if self.folder is None:
            return None
        text = json.dumps(dict(key), sort_keys=True)
        return self.folder / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.npz"

    def get(self, key: Mapping[str, Any], compute: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        """``compute()``'s arrays come back as they are (on the device, say); only a stored copy is brought to
        the host, and a loaded entry comes back as NumPy arrays."""
        start = time.perf_counter()
        try:
            path = self.path(key)
            if path is not None and (found := self._load(path, key)) is not None:
                return found
            arrays = dict(compute())
            if path is not None:
                self._store(path, key, {name: np.asarray(a) for name, a in arrays.items()})
            return arrays
        finally:
            self.seconds += time.perf_counter() - start

    @staticmethod
    def _load(path: Path, key: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        if not path.exists():
            return None
        want = json.dumps(dict(key), sort_keys=True)
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {name: f[name] for name in f.files}
            stored_key = bytes(arrays.pop(_KEY)).decode()
            stored_digest = bytes(arrays.pop(_DIGEST)).decode()
        except Exception as e:  # any unreadable file is a recompute: a cache never fails a check
            log.warning("reference cache %s: unreadable (%s); recomputing it", path, type(e).__name__)
            return None
        if stored_key != want:
            log.warning("reference cache %s: holds another key; recomputing it", path)
            return None
        if stored_digest != _digest(arrays):
            log.warning("reference cache %s: its arrays do not match their digest (torn or edited); recomputing it",
                        path)
            return None
        return arrays

    @staticmethod
    def _store(path: Path, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Atomically (a temporary file renamed over the entry); a full disk costs the cache, never the check."""
        payload = {**arrays, _KEY: np.frombuffer(json.dumps(dict(key), sort_keys=True).encode(), np.uint8),
                   _DIGEST: np.frombuffer(_digest(arrays).encode(), np.uint8)}
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **payload)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            log.warning("reference cache %s: not written (%s); the check goes on without it", path, e.strerror or e)
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
