"""``program.capture``: FlyDSL's compile stopped once the kept stage is dumped, its failures in one message.
The builders below stand in for a kernel's (the compile worker imports them by name and calls them)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide.interpreter.program import CaptureFailed, capture

pytestmark = pytest.mark.slow  # each a compile worker that imports torch and FlyDSL (3 s)
HERE = "tests.kernels.drafter_wide.interpreter.test_program"


def dumps_then_hangs() -> None:
    """A compile that dumps the kept stage and the next one, then never ends (the LLVM lowering, forever)."""
    stages = Path(os.environ["FLYDSL_DUMP_DIR"]) / "kernel"
    stages.mkdir()
    for name, text in (("00_origin", "before"), ("01_canonicalize", "the kept stage"), ("02_convert_scf_to_cf", "")):
        (stages / f"{name}.mlir").write_text(text)
    time.sleep(600)


def fails_to_build() -> None:
    raise ValueError("a tile of 48 rows")


def test_the_compile_is_stopped_once_the_stage_after_the_kept_one_is_dumped(tmp_path):
    start = time.monotonic()
    assert capture(f"{HERE}:dumps_then_hangs", {}, [], "gfx942", tmp_path, timeout=120) == "the kept stage"
    assert time.monotonic() - start < 60  # not the builder's 600 s, nor the timeout


def test_a_builder_that_fails_is_capture_failed_with_its_code_and_log(tmp_path):
    with pytest.raises(CaptureFailed, match=r"(?s)fails_to_build for gfx950: FlyDSL dumped no structured stage "
                                            r"\(rc 1\).*ValueError: a tile of 48 rows"):
        capture(f"{HERE}:fails_to_build", {}, [], "gfx950", tmp_path)
