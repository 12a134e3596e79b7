"""What ``interpreted.check_interpreted`` judges a step against and that the kernel's compiled code cannot change:
the float64 element model (``error_model.element_model``) and the emulation's outputs, kept on disk per shape and
arch under a key of every source they are computed from (the drafter's modules but the kernel's own and the
interpreter), so that a second verify, or a planted bug in a role module, recomputes neither (at the extra shape,
60-130 s of a 2-core machine's time)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import error_model
from .error_model import ElementModel
from .reference import Dims, StepInputs, Weights

HERE = Path(__file__).parent
# The kernel's own modules: what the interpreted program is made of, never what the model or the emulation read.
KERNEL_SOURCES = {"kernel.py", "kernel_args.py", "block.py", "device.py", "attention_role.py", "gemv_role.py",
                  "norm_role.py", "merge_role.py"}


def sources_key() -> str:
    """A digest of the drafter's modules the model and the emulation are computed from (indexing.py included:
    the emulation addresses through it)."""
    h = hashlib.sha256()
    for p in sorted(HERE.glob("*.py")):
        if p.name not in KERNEL_SOURCES:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:20]


def _path(cache: Path, what: str, shape: dict) -> Path:
    spec = json.dumps({"what": what, "shape": shape, "sources": sources_key()}, sort_keys=True, default=list)
    return cache / f"{what}-{hashlib.sha256(spec.encode()).hexdigest()[:24]}.npz"


def _load(path: Path) -> dict[str, np.ndarray] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile):
        return None  # a torn or foreign file: computed again


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part.npz")
    np.savez(part, **arrays)
    part.replace(path)


def element_model(cache: Path, shape: dict, dims: Dims, weights: Weights, inputs: StepInputs) -> ElementModel:
    """``error_model.element_model`` of a check shape, from ``cache`` where it was computed before."""
    path = _path(cache, "element-model", shape)
    z = _load(path)
    if z is None:
        m = error_model.element_model(dims, weights, inputs)
        z = {"h_out": m.h_out, "h_sigma": m.h_sigma, "written": m.written,
             **{f"cache_{r}_{i}": c for r, rc in enumerate(m.cache) for i, c in enumerate(rc)},
             **{f"sigma_{r}_{i}": c for r, rc in enumerate(m.cache_sigma) for i, c in enumerate(rc)}}
        _save(path, z)
    ranks, layers = dims.tp, dims.layers
    return ElementModel(z["h_out"], z["h_sigma"], [[z[f"cache_{r}_{i}"] for i in range(layers)] for r in range(ranks)],
                        [[z[f"sigma_{r}_{i}"] for i in range(layers)] for r in range(ranks)], z["written"])


def emulated(cache: Path, shape: dict, arch: str, run: Callable[[], Any]) -> tuple[list, list]:
    """The emulation's (h_out per rank, flat caches per rank and layer) of a check shape on ``arch``: ``run()``'s,
    or from ``cache`` where it ran before."""
    path = _path(cache, f"emulation-{arch}", shape)
    z = _load(path)
    if z is None:
        e = run()
        z = {**{f"h_{r}": h for r, h in enumerate(e.h_out)},
             **{f"c_{r}_{i}": c for r, rc in enumerate(e.caches) for i, c in enumerate(rc)}}
        _save(path, z)
    ranks = sum(k.startswith("h_") for k in z)
    layers = sum(k.startswith("c_0_") for k in z)
    return [z[f"h_{r}"] for r in range(ranks)], [[z[f"c_{r}_{i}"] for i in range(layers)] for r in range(ranks)]
