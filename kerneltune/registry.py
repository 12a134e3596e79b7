"""Kernels and backends by name. Each is an import path ``"package.module:ATTRIBUTE"``, loaded on
first use, so the engine and the CLI never import a kernel or a GPU framework until one is asked
for; worker processes load them the same way, so nothing is pickled across.

A kernel or backend of one's own (a test's, a third kernel's) is given by its import path wherever a
registered name is accepted.
"""

from __future__ import annotations

import importlib
from typing import Any

from kerneltune.protocols import Backend, Kernel

KERNELS: dict[str, str] = {
    "ranker_attention": "kerneltune.kernels.ranker_attention.plugin:PLUGIN",
    "drafter_wide": "kerneltune.kernels.drafter_wide.plugin:PLUGIN",
    "peer_exchange": "kerneltune.kernels.peer_exchange.plugin:PLUGIN",
}
ALIASES = {"ranker-attention": "ranker_attention", "drafter-wide": "drafter_wide", "peer-exchange": "peer_exchange"}

BACKENDS: dict[str, str] = {
    "cuda-jax": "kerneltune.backends.cuda_jax:BACKEND",
    "rocm-torch": "kerneltune.backends.rocm_torch:BACKEND",
    "host": "kerneltune.backends.host:BACKEND",
    "launch-group": "kerneltune.backends.launch_group:BACKEND",
}


class UnknownName(ValueError):
    """A kernel or backend that is neither registered nor a loadable import path."""


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def _load(kind: str, table: dict[str, str], name: str, known: list[str]) -> Any:
    target = table.get(name, name)
    if ":" not in target:
        raise UnknownName(f"{kind}: unknown {kind} {name!r} (known: {', '.join(sorted(known))})")
    module, attr = target.split(":", 1)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UnknownName(f"{kind}: cannot load {target!r}: {e}") from None


def load_kernel(name: str) -> Kernel:
    """The kernel registered under ``name`` (or at the import path ``module:attr``)."""
    return _load("kernel", KERNELS, canonical_name(name), [*KERNELS, *ALIASES])


def registered_kernel(name: str) -> Kernel:
    """The kernel registered under ``name``, for a name read from data (a journal, a table): import paths are
    refused, so a file can never make kerneltune import a module (only the command line may)."""
    key = canonical_name(name) if isinstance(name, str) else None
    if key not in KERNELS:
        raise UnknownName(f"kernel: {name!r} is not a registered kernel (known: {', '.join(sorted(ALIASES))}); "
                          f"a kernel named by data is never imported by path")
    return load_kernel(key)


def load_backend(name: str) -> Backend:
    return _load("backend", BACKENDS, name, list(BACKENDS))


def kernel_names() -> list[str]:
    """The registered kernels as a user types them."""
    return sorted(ALIASES)
