"""Arrays kept on disk under a key, never trusted blindly: the engine's caches (``reference_cache``,
``build_cache``) are made of it.

An entry is a ``.npz`` named by the SHA-256 of its key and holding that key and a digest of its arrays: a file
whose key differs (a hash collision, a hand-copied file) or whose digest does not match (a torn or edited file) is
one warning and a recompute, never used. Nothing in a file can run code: arrays only, read without pickles.

A cache whose entries its user runs (``build_cache``: JAX unpickles an exported build) is ``signed``: each entry
carries an HMAC of its key and digest under a secret of the user's own (``.key`` in the folder, made 0600 on first
use), so a file another user planted or edited, which cannot carry that HMAC, is never loaded.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Self

import numpy as np

_KEY, _DIGEST, _MAC = "__key__", "__digest__", "__mac__"
SECRET = ".key"  # a signed cache's secret, in its folder


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
    signed = False  # entries carry an HMAC under the user's secret, and are loaded only with it

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.seconds = 0.0  # time spent loading or computing, for the phase accounting
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        """The user's secret of a signed cache: ``.key`` in the folder, made (0600, never through a link) on first
        use; an OSError where it is not the user's own alone (another owner, readable by others)."""
        assert self.folder is not None
        if self._secret is None:
            path = self.folder / SECRET
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(os.urandom(32).hex().encode())
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                    raise PermissionError(errno.EPERM, f"not yours alone (owner uid {st.st_uid}, mode "
                                                       f"{st.st_mode & 0o777:o}); a signing key is the user's, 0600",
                                          str(path))
                secret = f.read(4096).strip()
            if len(secret) < 32:
                raise PermissionError(errno.EPERM, "too short to be a signing key", str(path))
            self._secret = secret
        return self._secret

    def _mac(self, key_text: str, digest: str) -> str:
        return hmac.new(self.secret(), f"{key_text}\0{digest}".encode(), hashlib.sha256).hexdigest()

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
            stored_mac = bytes(arrays.pop(_MAC)).decode() if _MAC in arrays else ""
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
        if self.signed:
            try:
                mac = self._mac(want, stored_digest)
            except OSError as e:
                self.log.warning("%s %s: its signing key cannot be used (%s); recomputing it", self.label, path, e)
                return None
            if not hmac.compare_digest(mac, stored_mac):
                self.log.warning("%s %s: not signed with your key (written by another user or another copy of the "
                                 "cache); never loaded, recomputing it", self.label, path)
                return None
        return arrays

    def store(self, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Atomically (a temporary file renamed over the entry); a full disk costs the cache, never the work."""
        path = self.path(key)
        if path is None:
            return
        key_text, digest = json.dumps(dict(key), sort_keys=True), _digest(arrays)
        payload = {**arrays, _KEY: np.frombuffer(key_text.encode(), np.uint8),
                   _DIGEST: np.frombuffer(digest.encode(), np.uint8)}
        tmp = None
        try:
            if self.signed:
                payload[_MAC] = np.frombuffer(self._mac(key_text, digest).encode(), np.uint8)
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
