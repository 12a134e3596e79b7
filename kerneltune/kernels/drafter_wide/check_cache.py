"""What ``interpret_check.check_interpreted`` judges a step against and that the kernel's compiled code cannot change:
the float64 element model (``error_model.element_model``) and the emulation's outputs, kept on disk per shape and
arch under a key of what they are computed from: the model's dims, the recipe its weights and inputs are drawn by
(shape, seeds, the drawing code, torch's version), and the source of every drafter module the model and the
emulation import (found from the modules themselves, so a new import is keyed too). A cached one is read without
drawing its weights. A second verify, or a planted bug in a role module or the interpreter, recomputes neither
(at the extra shape, 60-130 s of a 2-core machine's time)."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kerneltune.files.array_cache import ArrayCache

from . import error_model
from .error_model import ElementModel
from .reference import Dims, StepInputs, Weights

HERE = Path(__file__).parent
PACKAGE = "kerneltune.kernels.drafter_wide"
# What the references are computed by; their drafter imports, transitively, are keyed with them.
ROOTS = ("check_cache.py", "error_model.py", "emulation.py")


def _imports(path: Path) -> set[str]:
    """The drafter modules ``path`` imports, at its top or inside its functions (``from . import x``,
    ``from .x import y``, ``kerneltune.kernels.drafter_wide.x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                out |= {f"{mod}.py"} if mod else {f"{a.name}.py" for a in node.names}
            elif mod.startswith(PACKAGE + "."):
                out.add(mod.removeprefix(PACKAGE + ".").split(".")[0] + ".py")
            elif mod == PACKAGE:
                out |= {f"{a.name}.py" for a in node.names}
    return {m for m in out if (HERE / m).is_file()}


@functools.cache
def model_sources(roots: tuple[str, ...] = ROOTS) -> tuple[str, ...]:
    """Every drafter module the references can run: ``roots`` and what they import, transitively."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += _imports(HERE / m)
    return tuple(sorted(seen))


def sources_key(roots: tuple[str, ...] = ROOTS) -> str:
    """A digest of ``model_sources(roots)``."""
    h = hashlib.sha256()
    for name in model_sources(roots):
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes())
    return h.hexdigest()[:20]


def recipe_key(dims: Dims, recipe: dict[str, Any], drawn_by: str) -> str:
    """A digest of what a step's weights and inputs are drawn from: the model's dims, ``recipe`` (the shape and the
    seeds), ``drawn_by`` (the source of the function that draws them) and torch's version (its generator). With
    ``sources_key`` (``reference.py``'s ``make_weights`` and ``make_inputs``) it names the bytes without reading
    them: torch's CPU generator draws the same bytes from the same seed, and hashing the full model's 2.6 GB of
    float64 weights took 2-6 s a reference."""
    spec = json.dumps({"dims": repr(dims), "recipe": recipe, "drawn_by": drawn_by, "torch": torch.__version__},
                      sort_keys=True, default=list)
    return hashlib.sha256(spec.encode()).hexdigest()[:20]


class _Kept(ArrayCache):
    label = "verify --interpret's reference cache"
    log = logging.getLogger("kerneltune.references")


def _kept(cache: Path, what: str, shape: dict, inputs: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``compute()``'s arrays, or those kept in ``cache`` under this key (``array_cache``: keyed and digested)."""
    return _Kept(cache).get({"what": what, "shape": shape, "sources": sources_key(), "inputs": inputs}, compute)


def element_model(cache: Path, shape: dict, dims: Dims, inputs: str,
                  draw: Callable[[], tuple[Weights, StepInputs]]) -> ElementModel:
    """``error_model.element_model`` of a check shape, from ``cache`` where it was computed before, else on the
    weights and inputs ``draw()`` gives; ``inputs``: ``recipe_key`` of what ``draw`` draws."""
    def compute() -> dict[str, Any]:
        m = error_model.element_model(dims, *draw())
        return {"h_out": m.h_out, "h_sigma": m.h_sigma, "written": m.written,
                **{f"cache_{r}_{i}": c for r, rc in enumerate(m.cache) for i, c in enumerate(rc)},
                **{f"sigma_{r}_{i}": c for r, rc in enumerate(m.cache_sigma) for i, c in enumerate(rc)}}

    z = _kept(cache, "element-model", shape, inputs, compute)
    ranks, layers = dims.tp, dims.layers
    return ElementModel(z["h_out"], z["h_sigma"], [[z[f"cache_{r}_{i}"] for i in range(layers)] for r in range(ranks)],
                        [[z[f"sigma_{r}_{i}"] for i in range(layers)] for r in range(ranks)], z["written"])


def emulated(cache: Path, shape: dict, arch: str, run: Callable[[], Any], inputs: str) -> tuple[list, list]:
    """The emulation's (h_out per rank, flat caches per rank and layer) of a check shape on ``arch``: ``run()``'s,
    or from ``cache`` where it ran before; ``inputs``: ``recipe_key`` of what it runs on."""
    def compute() -> dict[str, Any]:
        e = run()
        return {**{f"h_{r}": h for r, h in enumerate(e.h_out)},
                **{f"c_{r}_{i}": c for r, rc in enumerate(e.caches) for i, c in enumerate(rc)}}

    z = _kept(cache, f"emulation-{arch}", shape, inputs, compute)
    ranks = sum(k.startswith("h_") for k in z)
    layers = sum(k.startswith("c_0_") for k in z)
    return [z[f"h_{r}"] for r in range(ranks)], [[z[f"c_{r}_{i}"] for i in range(layers)] for r in range(ranks)]
