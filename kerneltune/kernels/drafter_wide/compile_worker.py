"""Subprocess side of the offline compile: build the launcher and compile it on CPU tensors.

Given ``code_object`` (a path), it writes the compiled kernel's ELF code object there, the ``gpu.binary`` of
the module FlyDSL compiled and keeps on its launcher (under ``COMPILE_ONLY`` it returns nothing). Given
``stop_before`` (a pass's stage label, as FlyDSL names its IR dumps) and ``module_out``, it writes the module as it
stands before that pass, with its source locations, and ends. No IR is dumped for either: dumping every stage's
IR (and the ISA, compiled a second time) took half of a compile (8.8 s against 4.4 s for the megakernel). Both read
FlyDSL 0.5's internals (``pyproject.toml`` pins it); without them the worker ends in one line naming them."""

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def compiled_module_text(launch: Any) -> str | None:
    """The last module FlyDSL compiled for ``launch``, as text (FlyDSL 0.5's ``_last_compiled``), or None."""
    try:
        from flydsl.compiler.jit_function import _unwrap_jit_function

        jit, _ = _unwrap_jit_function(launch)
        text = jit._last_compiled[1]._ir_text
    except (ImportError, AttributeError, TypeError, IndexError):
        return None
    return text if isinstance(text, str) else None


def stop_before(label: str, out: Path) -> None:
    """FlyDSL's pass pipeline, run a pass at a time as its IR dumps run it, up to the first pass whose stage label
    has ``label``: the module is then written to ``out`` and the process ends (the LLVM lowering is not run)."""
    from flydsl.compiler import jit_function

    try:
        from flydsl.compiler.jit_function import PassManager, _run_pass_manager, _stage_label_from_fragment
    except ImportError as e:
        sys.exit(f"error: FlyDSL's pass pipeline is not FlyDSL 0.5's ({e}): the capture stops it there")

    def run_until(module: Any, fragments: list[str], *, verifier: bool, print_after_all: bool) -> None:
        for fragment in fragments:
            if label in _stage_label_from_fragment(fragment):
                part = out.with_name(out.name + ".part")
                part.write_text(module.operation.get_asm(enable_debug_info=True), encoding="utf-8")
                part.replace(out)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            passes = PassManager.parse(f"builtin.module({fragment})")
            passes.enable_verifier(verifier)
            _run_pass_manager(passes, module)

    # FlyDSL's compile looks it up at call time; a FlyDSL that stopped calling it runs every pass, writes no module,
    # and the capture fails naming that
    jit_function._run_pipeline = run_until


def main() -> None:
    import flydsl.compiler as flyc
    import torch

    spec = json.loads(sys.stdin.read())
    if spec.get("stop_before"):
        stop_before(spec["stop_before"], Path(spec["module_out"]))
    module, func = spec["builder"].split(":")
    launch = getattr(importlib.import_module(module), func)(**spec["kwargs"])
    dtypes = {"bf16": torch.bfloat16, "f32": torch.float32, "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32}
    # A shape of None is a scalar parameter (an address or a count): compiled on the value 0.
    args = [0 if shape is None else torch.zeros(shape, dtype=dtypes[dtype]) for dtype, shape in spec["args"]]
    flyc.compile(launch, *args)
    if spec.get("code_object"):
        from kerneltune.kernels.drafter_wide.offline_compile import extract_code_object

        text = compiled_module_text(launch)
        if text is None:
            sys.exit("error: FlyDSL kept no compiled module on the launcher (_last_compiled), as 0.5 does: "
                     "the offline compile reads the code object from it")
        Path(spec["code_object"]).write_bytes(extract_code_object(text))


if __name__ == "__main__":
    main()
