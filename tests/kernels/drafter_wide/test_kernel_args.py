"""The kernel's parameters are spelled once (``kernel_args.KernelArgs``): the launcher's two FlyDSL signatures,
the calls between them and the offline compile's spec must follow it, name by name and type by type."""

import ast
from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide import kernel_args
from kerneltune.kernels.drafter_wide.kernel_args import ARG_NAMES, ARG_TYPES, KERNEL_ARG_SPEC, KernelArgs

KERNEL = kernel_args.__file__.replace("kernel_args.py", "kernel.py")
FLYDSL_TYPES = {"I64": "i64", "I32": "i32"}


def _launcher(source: str) -> dict[str, list[tuple[str, str]]]:
    """Each of the launcher's functions and calls that carries the parameters, as (name, type or '') pairs."""
    found: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in ("drafter_wide", "launch"):
            found[f"def {node.name}"] = [(a.arg, FLYDSL_TYPES.get(getattr(a.annotation, "id", ""), ""))
                                         for a in node.args.args if a.arg != "stream"]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("drafter_wide", "KernelArgs"):
            found[f"call {node.func.id}"] = [(getattr(a, "id", "?"), "") for a in node.args]
    return found


def _diverging(source: str) -> list[str]:
    found = _launcher(source)
    bad = [f"{where} missing" for where in ("def drafter_wide", "def launch", "call drafter_wide", "call KernelArgs")
           if where not in found]
    for where, params in found.items():
        if [n for n, _ in params] != list(ARG_NAMES):
            bad.append(f"{where}: names {[n for n, _ in params]}")
        if where.startswith("def") and [t for _, t in params] != list(ARG_TYPES):
            bad.append(f"{where}: types {[t for _, t in params]}")
    return bad


def test_the_launcher_follows_the_one_list():
    assert not _diverging(Path(KERNEL).read_text())
    assert KERNEL_ARG_SPEC == [["i64", None]] * 21 + [["i32", None]] * 3
    values = KernelArgs(*range(24))
    assert values.ordered() == list(range(24))


@pytest.mark.parametrize(("edit", "says"), [
    (("rank: I32,\n", "rank: I64,\n"), "types"),  # a parameter's type changed in one signature
    (("peers, step, health, rank, bt_width", "peers, health, step, rank, bt_width"), "names"),  # two swapped
    (("slots: I64, scratch: I64,", "slots: I64,"), "names"),  # one dropped
])
def test_a_launcher_that_diverges_is_named(edit, says):
    source = Path(KERNEL).read_text()
    assert edit[0] in source
    assert any(says in line for line in _diverging(source.replace(edit[0], edit[1], 1)))
