"""Running what could block or read forever under a time bound, without leaving a thread hanging."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BOUND_S = 10.0


def within(fn: Callable[[], Any], unblock: Path | None = None) -> Any:
    """``fn()``'s value or exception, failing the test if it takes more than ``BOUND_S``; a FIFO at ``unblock`` is
    then opened for writing, which frees a reader blocked on it, so that no thread is left hanging."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(BOUND_S)
    if t.is_alive():
        if unblock is not None:
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still running after {BOUND_S} s: it blocked or read without bound")
    if "error" in box:
        raise box["error"]
    return box.get("value")
