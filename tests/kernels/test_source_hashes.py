"""Each kernel's source hash covers every module of its package that its compiled code is built from, so a
tuned entry goes stale when any of them changes (run Z found `exp2_fma.py`, the softmax's exp2 on the FMA pipe,
outside the ranker's hash: an edit to it would have kept the shipped table's entries live)."""

import ast
import sys
from pathlib import Path

import pytest

from kerneltune.seams.registry import load_kernel
from kerneltune.tables import stamps

# The module each kernel's compiled code starts from.
ENTRY = {"ranker_attention": "kernel.py", "drafter_wide": "kernel.py", "peer_exchange": "exchange.py"}


def local_imports(path: Path) -> set[str]:
    """File names of the sibling modules ``path`` imports (``from .x import``, ``from . import x``), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update([f"{node.module}.py"] if node.module else [f"{a.name}.py" for a in node.names])
    return {n for n in names if (path.parent / n).exists()}


def built_from(entry: Path) -> set[str]:
    seen, todo = set(), [entry.name]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(local_imports(entry.parent / name))
    return seen


def hashed_files(name: str, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the kernel's ``source_hash`` reads, through ``stamps.source_hash`` wherever the kernel's
    modules reach it (imported at call time or at module scope), with the cached source hashes (the ranker's
    ``kernel_source_hash``) cleared around it."""
    kernel = load_kernel(name)
    hashed: list[Path] = []
    original = stamps.source_hash
    modules = [m for n, m in sys.modules.items() if n.startswith(f"kerneltune.kernels.{name}")]
    monkeypatch.setattr(stamps, "source_hash", lambda files: hashed.extend(Path(f) for f in files) or "x")
    for module in modules:
        if getattr(module, "source_hash", None) is original:
            monkeypatch.setattr(module, "source_hash", stamps.source_hash)
    caches = [f for m in modules for n, f in vars(m).items()
              if "source_hash" in n and callable(getattr(f, "cache_clear", None))]
    for cache in caches:
        cache.cache_clear()
    try:
        kernel.source_hash()
    finally:
        for cache in caches:
            cache.cache_clear()
    return hashed


@pytest.mark.parametrize("name", sorted(ENTRY))
def test_the_source_hash_covers_every_module_the_kernel_is_built_from(name, monkeypatch):
    hashed = hashed_files(name, monkeypatch)
    assert hashed, f"{name}: source_hash read no files"
    package = hashed[0].parent
    missing = built_from(package / ENTRY[name]) - {p.name for p in hashed}
    assert not missing, f"{name}: its hash leaves out {sorted(missing)}"
