"""Kernels and backends by name. Each is an import path ``"package.module:ATTRIBUTE"``, loaded on
first use, so the engine and the CLI never import a kernel or a GPU framework until one is asked
for; worker processes load them the same way, so nothing is pickled across.

A kernel or backend of one's own is given wherever a registered name is accepted, as an import path
(``package.module:ATTR``, importable from the working folder) or a file (``path/to/file.py:ATTR``, or
``path/to/file.py`` when the file defines one kernel).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from kerneltune.seams.protocols import Backend, Kernel

KERNELS: dict[str, str] = {
    "ranker_attention": "kerneltune.kernels.ranker_attention.plugin:PLUGIN",
    "drafter_wide": "kerneltune.kernels.drafter_wide.plugin:PLUGIN",
    "peer_exchange": "kerneltune.kernels.peer_exchange.plugin:PLUGIN",
}
ALIASES = {"ranker-attention": "ranker_attention", "drafter-wide": "drafter_wide", "peer-exchange": "peer_exchange"}
# Kernels of other tools a command line may name, by their type, and what adopts each as a kernel: a Triton
# ``@triton.autotune`` function is its configs, its key and its recorded calls (``author/autotuned.py``).
ADOPTED: dict[str, str] = {"triton.runtime.autotuner.Autotuner": "kerneltune.author.autotuned:adopt"}

BACKENDS: dict[str, str] = {
    "cuda-jax": "kerneltune.backends.cuda_jax:BACKEND",
    "rocm-torch": "kerneltune.backends.rocm_torch:BACKEND",
    "host": "kerneltune.backends.host:BACKEND",
    "torch": "kerneltune.backends.torch_device:BACKEND",
    "launch-group": "kerneltune.backends.launch_group:BACKEND",
}


class UnknownName(ValueError):
    """A kernel or backend that is neither registered nor a loadable import path."""


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


OWN_FORMS = "path/to/file.py[:ATTR] or package.module:ATTR"  # how a kernel of one's own is named


def _split_file(target: str) -> tuple[str, str | None] | None:
    """(file, attribute or None) where ``target`` names a Python file, else None."""
    path, _, attr = target.partition(":") if ".py:" in target else (target, "", "")
    return (path, attr or None) if path.endswith(".py") else None


def _module_of_file(path: Path) -> Any:
    """The module a file defines, imported once per process under a name of its own (the file's stem and a
    digest of its absolute path, so two ``kernel.py`` of two folders never meet in ``sys.modules``)."""
    name = f"kerneltune_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if str(path.parent) not in sys.path:  # as ``python file.py`` does: a module beside the file imports
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _the_kernel_of(module: Any, path: Path) -> Any:
    """The one kernel a file defines, where it was named without an attribute."""
    found = [name for name, value in vars(module).items() if not name.startswith("_") and not isinstance(value, type)
             and isinstance(value, Kernel)]
    if len(found) != 1:
        which = f"{len(found)} kernels ({', '.join(found)})" if found else "no kernel (a kerneltune.Kernel instance)"
        raise UnknownName(f"kernel: {path} defines {which}; name one: {path}:ATTR")
    return getattr(module, found[0])


def _load(kind: str, table: dict[str, str], name: str, known: list[str]) -> Any:
    target = table.get(name, name)
    if (file := _split_file(target)) is not None:
        path = Path(file[0]).expanduser().resolve()
        if not path.is_file():
            raise UnknownName(f"{kind}: no file {file[0]} (a kernel of your own: {OWN_FORMS})")
        try:
            module = _module_of_file(path)
        except (ImportError, SyntaxError) as e:
            raise UnknownName(f"{kind}: cannot load {target!r}: {e}") from e
        except Exception as e:  # the file's own code failed as it was imported (a framework asking for a GPU driver)
            raise UnknownName(f"{kind}: importing {file[0]} raised {type(e).__name__}: {e} (--debug shows the "
                              f"traceback)") from e
        if file[1] is None:
            return _the_kernel_of(module, path)
        if file[1] not in vars(module):
            names = [n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, type)
                     and type(v).__module__ == module.__name__]
            raise UnknownName(f"{kind}: {file[0]} has no {file[1]!r}"
                              + (f" (it defines {', '.join(names)})" if names else ""))
        return getattr(module, file[1])
    if ":" not in target:
        own = f"; a {kind} of your own: {OWN_FORMS}" if kind == "kernel" else ""
        raise UnknownName(f"{kind}: unknown {kind} {name!r} (known: {', '.join(sorted(known))}{own})")
    module, attr = target.split(":", 1)
    if os.getcwd() not in sys.path:  # as ``python -m`` does: a package in the working folder is importable
        sys.path.append(os.getcwd())
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UnknownName(f"{kind}: cannot load {target!r}: {e}") from None
    except Exception as e:
        if name in table:  # one of ours: its failure is a bug to see whole
            raise
        raise UnknownName(f"{kind}: importing {module} raised {type(e).__name__}: {e} (--debug shows the "
                          f"traceback)") from e


def kernel_argument(name: str) -> str:
    """A kernel as the command line gives it, in the form every process resolves alike: a registered name
    as registered, a file by its absolute path (workers may start elsewhere)."""
    if (file := _split_file(name)) is not None:
        path = str(Path(file[0]).expanduser().resolve())
        return f"{path}:{file[1]}" if file[1] else path
    return canonical_name(name)


def load_kernel(name: str) -> Kernel:
    """The kernel registered under ``name`` (or at the import path ``module:attr``), checked to be one: an import
    path may name anything (a function, a module's constant), which would fail later in a traceback."""
    kernel = _load("kernel", KERNELS, canonical_name(name), [*KERNELS, *ALIASES])
    if (adopter := ADOPTED.get(f"{type(kernel).__module__}.{type(kernel).__qualname__}")) is not None:
        kernel = _load("kernel", {}, adopter, [])(kernel)
    if isinstance(kernel, type) or not isinstance(kernel, Kernel):
        missing = sorted(set(Kernel.__protocol_attrs__) - set(dir(kernel)))  # type: ignore[attr-defined]
        lacks = (f"it lacks {', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}" if missing
                 else "a class: name an instance of it")
        raise UnknownName(f"kernel: {name!r} is a {type(kernel).__name__}, not a kernel ({lacks}); a kernel of your "
                          f"own subclasses kerneltune.Kernel")
    return kernel


def registered_kernel(name: str) -> Kernel:
    """The kernel registered under ``name``, for a name read from data (a journal, a table): import paths are
    refused, so a file can never make kerneltune import a module (only the command line may)."""
    key = canonical_name(name) if isinstance(name, str) else None
    if key not in KERNELS:
        raise UnknownName(f"kernel: {name!r} is not a registered kernel (known: {', '.join(sorted(ALIASES))}); "
                          f"a kernel named by data is never imported by path")
    return load_kernel(key)


def module_file(kernel: Kernel) -> Path | None:
    """The file of the module that defines ``kernel``'s class (None for a built-in or a module without one)."""
    module = sys.modules.get(type(kernel).__module__)
    where = getattr(module, "__file__", None)
    return Path(where).resolve() if where else None


def load_backend(name: str) -> Backend:
    return _load("backend", BACKENDS, name, list(BACKENDS))

