"""Branch and loop-trip coverage of the kernel's own code under the CPU interpreter, beyond lines run.

Every op of a captured program carries its source call chain (``Op.lines``); its innermost frame in one of
``FILES`` is the source site it counts for (a helper of ``indexing.py`` counts there, not at its caller).
``instrument`` wraps the ``run`` of each control-flow op of a program before it runs, so that each launch
records, per source site (the union of every traced copy of it: an unrolled loop traces a branch once per
trip):

- ``scf.if`` and ``arith.select``: whether some active lane took it and whether some lane did not (a
  lane-uniform condition counts once for the whole block);
- ``scf.for``: each execution's trip count (per lane where the bounds differ between lanes), so that a loop
  that ran at least three trips somewhere ran its first, a middle and its last trip, and one that ran none;
- ``scf.while`` (every poll of a flag): the iterations of each execution (1: the flag was up already).

Branches on trace-time values (``const_expr``, Python ``if`` on the layout) leave no op; they differ
between the programs of different layouts, whose line sets ``Coverage.lines`` unites."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kerneltune.kernels.drafter_wide.interpreter.ir import Op, Region
from kerneltune.kernels.drafter_wide.interpreter.program import Program

FILES = ("attention_role.py", "gemv_role.py", "norm_role.py", "merge_role.py", "block.py", "device.py",
         "indexing.py")
KINDS = {"scf.if": "if", "arith.select": "select", "scf.for": "for", "scf.while": "while"}


@dataclass
class Site:
    """One source site's record over every launch of every instrumented program."""

    file: str
    line: int
    kind: str  # "if", "select", "for", "while"
    copies: int = 0  # traced ops that count for it
    taken: bool = False  # if/select: some active lane's condition held
    skipped: bool = False  # ... and some lane's did not
    trips: Counter = field(default_factory=Counter)  # for/while: trip count -> executions (per lane)

    @property
    def both_ways(self) -> bool:
        return self.taken and self.skipped

    @property
    def first_middle_last(self) -> bool:
        """A loop's first, a middle and its last trip all ran in one execution."""
        return max(self.trips, default=0) >= 3

    def __str__(self) -> str:
        if self.kind in ("if", "select"):
            seen = "both ways" if self.both_ways else "taken only" if self.taken else (
                "not taken only" if self.skipped else "never reached")
        else:
            seen = "trips " + (", ".join(f"{t}x{n}" for t, n in sorted(self.trips.items())) or "never reached")
        return f"{self.file}:{self.line} {self.kind} ({self.copies} traced): {seen}"


def _site(op: Op) -> tuple[str, int] | None:
    return next(((f, line) for f, line in op.lines if f in FILES), None)


def _any(c: Any, mask: Any) -> tuple[bool, bool]:
    """(some active lane holds ``c``, some active lane does not)."""
    c = np.asarray(c).astype(bool)
    if c.ndim > 1:  # a vector condition: one bool per element, lanes first
        c = c.reshape(c.shape[0], -1)
        return bool(_active(c.any(axis=1), mask).any()), bool(_active(~c.all(axis=1), mask).any())
    return bool(_active(c, mask).any()), bool(_active(~c, mask).any())


def _active(c: np.ndarray, mask: Any) -> np.ndarray:
    if mask is None or c.shape[0] == 1:
        return c if mask is None or bool(np.asarray(mask).any()) else np.zeros(1, bool)
    return c & mask


class Coverage:
    """The sites of ``FILES`` in the programs given to ``instrument`` and what their launches did there."""

    def __init__(self) -> None:
        self.sites: dict[tuple[str, int, str], Site] = {}
        self.programs: list[Program] = []
        self._count: dict[tuple[int, int], int] = {}  # (while op, task) -> iterations so far

    def instrument(self, program: Program) -> Program:
        """Wrap the control-flow ops of ``program`` (in place; returns it) so that its launches record here."""
        self.programs.append(program)
        self._walk(program.body)
        return program

    def _walk(self, region: Region) -> None:
        for op in region.ops:
            for r in op.regions:
                self._walk(r)
            kind = KINDS.get(op.name)
            where = _site(op)
            if kind is None or where is None:
                continue
            site = self.sites.setdefault((*where, kind), Site(*where, kind))
            site.copies += 1
            op.run = getattr(self, f"_wrap_{kind}")(op, site, op.run)

    def _wrap_if(self, op: Op, site: Site, run: Any) -> Any:
        (cs,) = op.args

        def seen(env: list, mask: Any) -> None:
            t, f = _any(env[cs], mask)
            site.taken |= t
            site.skipped |= f

        return _seen_first(op, run, seen)

    def _wrap_select(self, op: Op, site: Site, run: Any) -> Any:
        cs = op.args[0]

        def run_p(task: Any, env: list, mask: Any) -> None:
            t, f = _any(env[cs], mask)
            site.taken |= t
            site.skipped |= f
            run(task, env, mask)
        return run_p

    def _wrap_for(self, op: Op, site: Site, run: Any) -> Any:
        lb_, ub_, step_ = op.args[:3]

        def seen(env: list, mask: Any) -> None:
            lb, ub, step = (np.asarray(env[s]).astype(np.int64) for s in (lb_, ub_, step_))
            trips = np.maximum(0, -(-(ub - lb) // step))
            if trips.shape[0] > 1 and mask is not None:
                trips = trips[np.asarray(mask)]
            elif mask is not None and not bool(np.asarray(mask).any()):
                return
            site.trips.update(int(t) for t in np.unique(trips))

        return _seen_first(op, run, seen)

    def _wrap_while(self, op: Op, site: Site, run: Any) -> Any:
        cond = op.regions[0].ops[-1]
        cond_run = cond.run
        key_of = id(op)

        def counted(task: Any, env: list, mask: Any) -> Any:
            self._count[key_of, id(task)] = self._count.get((key_of, id(task)), 0) + 1
            return cond_run(task, env, mask)
        cond.run = counted

        def run_g(task: Any, env: list, mask: Any) -> Iterator[Any]:
            self._count[key_of, id(task)] = 0
            yield from run(task, env, mask)
            site.trips[self._count.pop((key_of, id(task)))] += 1
        return run_g

    # ------------------------------------------------------------------ figures
    def lines(self) -> dict[str, tuple[set[int], set[int]]]:
        """Per file: (lines some op's call chain passes through in any program, lines of ops that ran)."""
        out: dict[str, tuple[set[int], set[int]]] = {f: (set(), set()) for f in FILES}
        for program in self.programs:
            for f in FILES:
                every, ran = program.coverage(f)
                out[f][0].update(every)
                out[f][1].update(ran)
        return out

    def summary(self) -> dict[str, tuple[int, int]]:
        """(covered, all) per figure: lines run, branches both ways (if, select), loops at their first, a
        middle and their last trip, polls that found their flag up at once and after waiting."""
        lines = self.lines()
        ifs = [s for s in self.sites.values() if s.kind == "if"]
        sel = [s for s in self.sites.values() if s.kind == "select"]
        loops = [s for s in self.sites.values() if s.kind == "for"]
        polls = [s for s in self.sites.values() if s.kind == "while"]
        return {
            "lines run": (sum(len(r) for _, r in lines.values()), sum(len(e) for e, _ in lines.values())),
            "if both ways": (sum(s.both_ways for s in ifs), len(ifs)),
            "select both ways": (sum(s.both_ways for s in sel), len(sel)),
            "for loops at first, middle and last trip": (sum(s.first_middle_last for s in loops), len(loops)),
            "for loops run with no trip": (sum(0 in s.trips for s in loops), len(loops)),
            "polls that found the flag at once": (sum(1 in s.trips for s in polls), len(polls)),
            "polls that waited (3+ iterations)": (sum(s.first_middle_last for s in polls), len(polls)),
        }

    def report(self) -> str:
        out = [f"{k}: {a} of {b}" for k, (a, b) in self.summary().items()]
        for f, (every, ran) in self.lines().items():
            out.append(f"{f}: {len(ran)} of {len(every)} lines run; not run: {sorted(every - ran)}")
        out.append("sites (file:line kind, traced copies, what ran):")
        out += [f"  {s}" for s in sorted(self.sites.values(), key=lambda s: (s.file, s.line, s.kind))]
        return "\n".join(out)


def merged(parts: Iterable[Coverage]) -> Coverage:
    """One coverage of several (each its own programs)."""
    out = Coverage()
    for c in parts:
        out.programs += c.programs
        for k, s in c.sites.items():
            m = out.sites.setdefault(k, Site(s.file, s.line, s.kind))
            m.copies = max(m.copies, s.copies)
            m.taken |= s.taken
            m.skipped |= s.skipped
            m.trips.update(s.trips)
    return out


def _seen_first(op: Op, run: Any, seen: Any) -> Any:
    """``run`` (a generator's or a plain op's) that first lets ``seen`` note the op's operands."""
    if op.generator:
        def run_g(task: Any, env: list, mask: Any) -> Iterator[Any]:
            seen(env, mask)
            yield from run(task, env, mask)
        return run_g

    def run_p(task: Any, env: list, mask: Any) -> None:
        seen(env, mask)
        run(task, env, mask)
    return run_p
