"""Arrays kept on disk under a key, never trusted blindly: the engine's caches (``reference_cache``,
``build_cache``) are made of it.

An entry is a ``.npz`` named by the SHA-256 of its key and holding that key and a digest of its arrays: a file
whose key differs (a hash collision, a hand-copied file) or whose digest does not match (a torn or edited file) is
one warning and a recompute, never used. Nothing in a file can run code: arrays only, read without pickles.
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
from typing import Any, Self

import numpy as np

_KEY, _DIGEST = "__key__", "__digest__"


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.view(np.uint8).reshape(-1).data if a.size else b"")
    return h.hexdigest()


class ArrayCache:
    """``get(key, compute)``: the arrays stored under ``key``, else ``compute()``'s, stored for next time.
    ``label`` names the cache in its warnings; a ``folder`` of None keeps nothing."""

    label = "array cache"
    log = logging.getLogger("kerneltune.cache")
    env = ""  # the environment variable a worker reads its folder from (``from_env``)

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.seconds = 0.0  # time spent loading or computing, for the phase accounting

    @classmethod
    def from_env(cls) -> Self:
        """The cache in the folder ``cls.env`` names; none kept where it is unset or empty."""
        folder = os.environ.get(cls.env) if cls.env else None
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
            if (found := self.load(key)) is not None:
                return found
            arrays = dict(compute())
            self.store(key, {name: np.asarray(a) for name, a in arrays.items()})
            return arrays
        finally:
            self.seconds += time.perf_counter() - start

    def load(self, key: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """The arrays stored under ``key``, else None (nothing stored, or a file that is not to be trusted)."""
        path = self.path(key)
        if path is None or not path.is_file():  # a FIFO or a folder in its place is nothing stored (a read would block)
            return None
        want = json.dumps(dict(key), sort_keys=True)
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {name: f[name] for name in f.files}
            stored_key = bytes(arrays.pop(_KEY)).decode()
            stored_digest = bytes(arrays.pop(_DIGEST)).decode()
        except Exception as e:  # any unreadable file is a recompute: a cache never fails a check
            self.log.warning("%s %s: unreadable (%s); recomputing it", self.label, path, type(e).__name__)
            return None
        if stored_key != want:
            self.log.warning("%s %s: holds another key; recomputing it", self.label, path)
            return None
        if stored_digest != _digest(arrays):
            self.log.warning("%s %s: its arrays do not match their digest (torn or edited); recomputing it",
                             self.label, path)
            return None
        return arrays

    def store(self, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Atomically (a temporary file renamed over the entry); a full disk costs the cache, never the work."""
        path = self.path(key)
        if path is None:
            return
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
            self.log.warning("%s %s: not written (%s); going on without it", self.label, path, e.strerror or e)
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
