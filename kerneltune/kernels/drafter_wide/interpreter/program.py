"""A FlyDSL kernel's MLIR, captured where ``scf`` control flow is still structured, as plain Python.

``capture`` runs FlyDSL's own compile of a kernel (a subprocess, ``COMPILE_ONLY``) up to ``convert-scf-to-cf``
and keeps the module after ``convert-fly-to-rocdl`` and its canonicalisation: ``arith``,
``vector``, ``math``, ``scf``, ``gpu``, ``llvm`` and ``rocdl`` ops, every helper inlined, each op with
its source location. ``Program`` reads that text once with MLIR's Python bindings into ``Op`` objects
(numbered value slots, parsed attributes, the ``kernel.py`` line of each op), so that running it never
touches the bindings. An op the interpreter has no meaning for fails here, naming it and its line."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ..offline_compile import run_worker
from .ir import TERMINATORS, Op, Region, UnknownOp
from .types import parse_type

__all__ = ["TERMINATORS", "CaptureFailed", "Op", "Program", "Region", "UnknownOp", "capture"]

STAGE_BEFORE = "convert_scf_to_cf"  # the label of the first pass not run: the module is kept before it


class CaptureFailed(RuntimeError):
    """FlyDSL could not build the kernel's module; carries its log's tail."""


def capture(builder: str, kwargs: dict[str, Any], args: list[list[Any]], arch: str, cache: Path,
            source_key: str = "", timeout: float = 300.0) -> str:
    """The structured-``scf`` MLIR of ``builder(**kwargs)`` compiled for ``arch`` on ``args`` (as
    ``offline_compile.compile_kernel`` describes them), cached in ``cache`` under a key of all of these
    and ``source_key`` (the kernel sources' hash: a changed kernel is captured again)."""
    spec = {"builder": builder, "kwargs": kwargs, "args": args}
    key = hashlib.sha256(f"{json.dumps(spec)}|{arch}|{source_key}".encode()).hexdigest()[:24]
    cached = cache / f"{key}.mlir"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as work:
        out = Path(work) / "module.mlir"
        # no linker or device libraries: the capture ends before the LLVM lowering
        run = run_worker({**spec, "stop_before": STAGE_BEFORE, "module_out": str(out)}, arch, Path(work) / "no-rocm",
                         timeout)
        if run is None:
            raise CaptureFailed(f"{builder} for {arch}: no module within {timeout:.0f} s")
        if not out.is_file():
            log = run.stdout + run.stderr
            raise CaptureFailed(f"{builder} for {arch}: FlyDSL wrote no structured stage (rc {run.returncode})\n"
                                f"{log[-2000:]}")
        text = out.read_text(encoding="utf-8")
    # a name of its own: two processes capturing one program at once (verify's workers) each replace it whole
    fd, part = tempfile.mkstemp(dir=cache, prefix=f"{key}.", suffix=".part")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    Path(part).replace(cached)
    return text


_FRAME = re.compile(r'"([^"]+)":(\d+):(\d+)')


@functools.cache  # a module's ops share few locations, and pathlib per op cost a second a capture
def _where(loc: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    frames = [(Path(f).name, int(line)) for f, line, _ in _FRAME.findall(loc)]
    text = " <- ".join(f"{f}:{line}" for f, line in frames[:4]) or "unknown location"
    return text, tuple(frames)


def _attr(attr: Any) -> Any:
    """An attribute as a Python value: ints, floats, bools, int arrays, splats, strings."""
    from flydsl._mlir import ir

    if isinstance(attr, ir.BoolAttr | ir.IntegerAttr | ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.DenseIntElementsAttr | ir.DenseFPElementsAttr):
        if attr.is_splat:
            return ("splat", _attr(attr.get_splat_value()))
        return ("dense", list(attr))
    if isinstance(attr, ir.DenseI64ArrayAttr | ir.DenseI32ArrayAttr):
        return list(attr)
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.UnitAttr):
        return True
    return str(attr)


_TREE = ("slots", "globals", "name", "block_size", "params", "param_types", "body")  # what ``parsed`` keeps


class Program:
    """The kernel function of a captured module, as ``Op`` trees over numbered value slots."""

    def __init__(self, text: str, kernel: str | None = None, cache: Path | None = None):
        """``cache``: a folder where the op tree read from ``text`` is kept for the next read (``parsed``)."""
        from . import parsed

        state = parsed.load(cache, text, kernel) if cache is not None else None
        if state is None:
            self._parse(text, kernel)
            state = {k: getattr(self, k) for k in _TREE}
            if cache is not None:
                parsed.save(cache, text, kernel, state)
        else:
            self.__dict__.update(state)
        self.sites: list[str] = []  # the source lines of the memory ops and barriers, by index (races name them)
        from .ops import bind  # the ops' implementations, bound to this program's op tree

        bind(self.body, self)
        self.lds_bytes = sum(b for _, b in self.globals.values())

    def _parse(self, text: str, kernel: str | None) -> None:
        from flydsl._mlir import ir

        self.slots = 0
        self._slot: dict[Any, int] = {}
        self.globals: dict[str, tuple[int, int]] = {}  # LDS global name -> (space, bytes)
        ctx = ir.Context()
        ctx.allow_unregistered_dialects = True
        with ctx:
            module = ir.Module.parse(text)
            func = self._find(module.operation, kernel)
            if func is None:
                raise ValueError(f"no gpu.func {kernel or ''} in the module".replace("  ", " "))
            self.name = ir.StringAttr(func.attributes["sym_name"]).value
            sizes = func.attributes.get("known_block_size", None)
            self.block_size = list(ir.DenseI32ArrayAttr(sizes)) if sizes is not None else None
            body = func.regions[0].blocks[0]
            self.params = tuple(self._new(a) for a in body.arguments)
            self.param_types = tuple(parse_type(str(a.type)) for a in body.arguments)
            self.body = Region(self.params, [self._op(o.operation) for o in body.operations])
        _liveness(self.body)
        del self._slot  # MLIR's values: the tree is read, and a kept tree holds none

    def _find(self, op: Any, kernel: str | None) -> Any:
        from flydsl._mlir import ir

        if op.name == "llvm.mlir.global":
            m = re.search(r"array<(\d+) x i8>", str(op.attributes["global_type"]))
            space = op.attributes.get("addr_space", None)
            name = ir.StringAttr(op.attributes["sym_name"]).value
            self.globals[name] = (ir.IntegerAttr(space).value if space is not None else 0,
                                  int(m.group(1)) if m else 0)
        if op.name == "gpu.func" and (kernel is None or ir.StringAttr(op.attributes["sym_name"]).value == kernel):
            found = op
        else:
            found = None
        for r in op.regions:
            for b in r.blocks:
                for o in b.operations:
                    f = self._find(o.operation, kernel)
                    found = found or f
        return found

    def _new(self, value: Any) -> int:
        self._slot[value] = self.slots
        self.slots += 1
        return self.slots - 1

    def _op(self, op: Any) -> Op:
        where, lines = _where(str(op.location))
        try:
            args = tuple(self._slot[v] for v in op.operands)
        except KeyError:
            raise UnknownOp(f"{op.name} at {where}: an operand defined outside the kernel function") from None
        regions = []
        for r in op.regions:
            if len(r.blocks) == 0:  # an scf.if without else
                regions.append(Region((), []))
                continue
            if len(r.blocks) != 1:
                raise UnknownOp(f"{op.name} at {where}: a region of {len(r.blocks)} blocks (unstructured control flow)")
            b = r.blocks[0]
            params = tuple(self._new(a) for a in b.arguments)
            regions.append(Region(params, [self._op(o.operation) for o in b.operations]))
        attrs = {op.attributes[i].name: _attr(op.attributes[i].attr) for i in range(len(op.attributes))}
        return Op(op.name, tuple(self._new(r) for r in op.results), args,
                  tuple(parse_type(str(r.type)) for r in op.results),
                  tuple(parse_type(str(v.type)) for v in op.operands), attrs, tuple(regions), where, lines)

    def coverage(self, file: str) -> tuple[set[int], set[int]]:
        """(lines of ``file`` that some op's call chain passes through, those of ops that ran)."""
        every, ran = set(), set()
        for op in self.ops():
            lines = {line for f, line in op.lines if f == file}
            every |= lines
            if op.hit:
                ran |= lines
        return every, ran

    def ops(self) -> list[Op]:
        """Every op of the kernel, nested ones included."""
        out: list[Op] = []

        def walk(region: Region) -> None:
            for op in region.ops:
                out.append(op)
                for r in op.regions:
                    walk(r)

        walk(self.body)
        return out


def _uses(op: Op) -> set[int]:
    used = set(op.args)
    for r in op.regions:
        for o in r.ops:
            used |= _uses(o)
    return used


def _liveness(region: Region) -> None:
    """Set each op's ``kill``: the slots defined in this region (or its parameters) whose last use it is."""
    last: dict[int, int] = {}
    born = dict.fromkeys(region.params, 0)
    for i, op in enumerate(region.ops):
        for s in _uses(op):
            if s in born:
                last[s] = i
        born.update(dict.fromkeys(op.res, i))
        for r in op.regions:
            _liveness(r)
    kills: dict[int, list[int]] = {}
    for s, i in born.items():
        kills.setdefault(last.get(s, i), []).append(s)
    for i, op in enumerate(region.ops):
        op.kill = () if op.name in TERMINATORS else tuple(kills.get(i, ()))
