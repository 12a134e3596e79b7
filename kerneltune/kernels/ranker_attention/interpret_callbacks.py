"""Mosaic GPU's CPU interpret mode without the cost of handing its callbacks their arguments.

The interpreter simulates the GPU's memories, threads and barriers in Python, through about 6,000 ``io_callback``
calls a run of the kernel. JAX 0.11 turns each call's arguments into device arrays first (a ``device_put`` per
argument) and the interpreter reads most of them back one scalar at a time (``.item()``): 60% of a run, 8.9 s of an
adversarial check that takes 3.3 s without it. Here the interpreter's own callbacks are handed copies of the NumPy
arrays XLA passes to the host, and its index reader (``shared_memory._to_int``) takes them as it takes device
scalars; every other ``io_callback`` in the process (a user's own) goes through JAX's path unchanged. The kernel's
outputs are bit for bit the same (tests/kernels/ranker_attention/test_interpret_callbacks.py).

The kernel's interpret paths install it (``api`` with ``interpret=True``, ``verify.check_interpret``), not
``kernel.py``: that file is in the kernel's source hash, and a tuned table names the source it was tuned on. Both
replaced functions are JAX's private ones: installed on the JAX version it was checked against (``CHECKED``), and
only where they have the form it was written for; anywhere else JAX runs as shipped, slower.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

CHECKED = ("0.11.2",)  # JAX versions whose private callback path this was written against and tested on
_INTERPRETER = "jax._src.pallas.mosaic_gpu.interpret."
STOCK: dict[str, Callable[..., Any]] = {}  # JAX's own functions, once replaced (tests run them again)


@functools.cache
def install() -> str | None:
    """Take the fast path for the interpreter's callbacks from now on in this process; None once taken, else
    why not (JAX runs its own path, correct and slower)."""
    import jax
    from jax._src import callback, config, tree_util
    from jax._src.pallas.mosaic_gpu.interpret import shared_memory

    if jax.__version__ not in CHECKED:
        return f"JAX {jax.__version__} (checked on {', '.join(CHECKED)})"
    stock_impl, stock_to_int = callback.io_callback_impl, shared_memory._to_int
    if list(inspect.signature(stock_impl).parameters) != ["args", "result_avals", "callback", "sharding", "ordered"]:
        return "jax._src.callback.io_callback_impl has another signature"

    cpu = jax.local_devices(backend="cpu")[0]  # where JAX's own path puts the arguments, looked up once

    def io_callback_impl(*args: Any, result_avals: Any, callback: Any, sharding: Any, ordered: bool) -> Any:
        if not _interpreters(getattr(callback, "callback_func", None)):
            return stock_impl(*args, result_avals=result_avals, callback=callback, sharding=sharding, ordered=ordered)
        # Copies: XLA's host buffers may be reused once the call returns, and the interpreter keeps what it is
        # given (a stored value), as it may keep an immutable device array.
        with config.default_device(cpu):
            return tree_util.tree_map(np.asarray, callback(*(np.array(a) for a in args)))

    def to_int(x: Any) -> Any:
        if isinstance(x, np.ndarray | np.generic):
            return x.item()
        return stock_to_int(x)

    STOCK.update(io_callback_impl=stock_impl, to_int=stock_to_int)
    callback.io_callback_impl, shared_memory._to_int = io_callback_impl, to_int
    return None


def _interpreters(func: Callable[..., Any] | None) -> bool:
    """Whether ``func`` (or what a ``functools.partial`` wraps) is the Mosaic GPU interpreter's own code."""
    while isinstance(func, functools.partial):
        func = func.func
    return (getattr(func, "__module__", None) or "").startswith(_INTERPRETER)
