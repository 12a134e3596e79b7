"""Comparison-operator mutants of the drafter's index arithmetic and roles (issue 98): every comparison of
``indexing.py`` and the role modules (``bounds.MUTATED``) moved by one position (``<`` and ``<=``, ``>`` and
``>=``, ``==`` and ``!=``, ``is`` and ``is not``, each into the other), one at a time; each must fail the quick tests
(``test_bounds.py``, then ``test_quick_step.py``, then the drafter's quick loop) or ``verify drafter-wide
--interpret`` (``interpret_mutants.py``'s stages, run only for a mutant the quick tests let through).

Usage: .venv/bin/python .ci/interpret_compare_mutants.py [OUT [NUMBERS [--quick-only]]]  (default
mutants/compare-results.txt; NUMBERS: some mutants, as 3,7, or "all"; ``--quick-only``: test_bounds and the quick
step alone, a mutant they let through recorded as such, for verify later: a verify takes 5-20 minutes on a busy
2-core machine); run it in a worktree of its own: it edits the sources (each restored after). Exit 0 when every
mutant is killed.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
D = ROOT / "kerneltune/kernels/drafter_wide"
FILES = ("indexing.py", "gemv_role.py", "norm_role.py", "attention_role.py", "merge_role.py", "block.py")
SWAP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==", ast.Is: "is not",
        ast.IsNot: "is"}
# The checks of the table against the source are left out: a mutant's text differs from the table's, which says
# nothing of its behaviour (and the operands a comparison meets, which they record, are the mutant's too).
TABLE_CHECKS = ("test_bounds.py::test_the_table_lists_every_comparison_of_the_kernels_source_and_nothing_else",
                "test_quick_step.py::test_every_bound_is_met_on_the_sides_the_table_names_and_no_other",
                "test_quick_step.py::test_a_traced_comparison_leaves_no_op_and_a_bound_one")
NOT_THE_TABLE = [a for t in TABLE_CHECKS for a in ("--deselect", f"tests/kernels/drafter_wide/{t}")]
QUICK = [["tests/kernels/drafter_wide/test_bounds.py", *NOT_THE_TABLE],
         ["tests/kernels/drafter_wide/test_quick_step.py", *NOT_THE_TABLE],
         ["-m", "not slow and not gpu", "tests/kernels/drafter_wide", *NOT_THE_TABLE]]

_spec = importlib.util.spec_from_file_location("interpret_mutants", ROOT / ".ci/interpret_mutants.py")
planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(planted)


def mutants() -> list[tuple[str, int, str, str, str]]:
    """(file, line, function, the comparison, its mutant text) for every comparison of ``FILES``, in file order."""
    out = []
    for name in FILES:
        text = (D / name).read_text(encoding="utf-8")
        tree = ast.parse(text)
        functions = {id(n): f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare) or len(node.ops) != 1 or type(node.ops[0]) not in SWAP:
                continue
            if functions.get(id(node)) in ("smin", "smax", "select"):
                continue
            seg = ast.get_source_segment(text, node)
            left = ast.get_source_segment(text, node.left)
            right = ast.get_source_segment(text, node.comparators[0])
            mutated = f"{left} {SWAP[type(node.ops[0])]} {right}"
            out.append((name, node.lineno, functions.get(id(node), "<module>"), seg, mutated))
    return sorted(out, key=lambda m: (FILES.index(m[0]), m[1]))


def apply(name: str, line: int, seg: str, mutated: str) -> str:
    """The file's text with ``seg`` on ``line`` replaced (once; the original text returned for restoring)."""
    path = D / name
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines[line - 1].count(seg) != 1:
        raise ValueError(f"{name}:{line}: {seg!r} is not on its line once")
    lines[line - 1] = lines[line - 1].replace(seg, mutated)
    path.write_text("".join(lines), encoding="utf-8")
    return text


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "mutants/compare-results.txt"
    every = mutants()
    numbers = sys.argv[2] if len(sys.argv) > 2 else "all"
    chosen = range(1, len(every) + 1) if numbers == "all" else [int(n) for n in numbers.split(",")]
    quick_only = "--quick-only" in sys.argv
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    lines, killed, tried = [f"commit {commit.stdout.strip()}, {len(every)} comparison mutants"], 0, 0
    for n in chosen:
        name, line, function, seg, mutated = every[n - 1]
        t0 = time.monotonic()
        original = apply(name, line, seg, mutated)
        try:
            verdict, test = "survived", ""
            stages = list(zip(("test_bounds", "the quick step", "the quick loop"), QUICK, strict=True))
            for where, args in stages[:2] if quick_only else stages:
                rc, test = planted._pytest(args)
                if rc == 1:
                    verdict = f"killed by {where}"
                    break
                if rc != 0:
                    verdict = f"error {rc} in {where}"
                    break
            else:
                if quick_only:
                    verdict = "passed the quick tests (verify not run)"
                else:
                    rc, test = planted._verify(planted._verify_runs())
                    verdict = ("killed by verify --interpret" if rc == 1 else f"error {rc} in verify" if rc
                               else "survived")
        finally:
            (D / name).write_text(original, encoding="utf-8")
        tried += 1
        killed += verdict.startswith("killed")
        why = " / ".join(line.strip() for line in test.splitlines()[:2]) if test else ""
        lines.append(f"{n:3d} {name}:{line} ({function}) {seg}  ->  {mutated}: {verdict} "
                     f"({time.monotonic() - t0:.0f} s){' - ' + why if why else ''}")
        print(lines[-1], flush=True)
    lines.append(f"score: {killed} of {tried} killed")
    print(lines[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if killed == tried else 1


if __name__ == "__main__":
    sys.exit(main())
