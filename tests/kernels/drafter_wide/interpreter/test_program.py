"""``program.capture``: FlyDSL's compile stopped before the first pass it must not run, its failures in one message.
The builders below stand in for a kernel's (the compile worker imports them by name and calls them)."""

from __future__ import annotations

import time

import pytest

from kerneltune.kernels.drafter_wide.interpreter.program import CaptureFailed, capture

pytestmark = pytest.mark.slow  # each a compile worker that imports torch and FlyDSL (3 s)
HERE = "tests.kernels.drafter_wide.interpreter.test_program"


class _Module:
    """What FlyDSL's pipeline is handed: a module whose text says how it was asked for."""

    class operation:  # MLIR's attribute name
        @staticmethod
        def get_asm(enable_debug_info: bool) -> str:
            return f"the kept stage, locations {enable_debug_info}"


def runs_the_pipeline() -> None:
    """FlyDSL's own pipeline entry, handed the pass to stop before and then one that must never run. FlyDSL's own
    cache is off: a module it kept from an earlier compile would skip the pipeline."""
    from flydsl.compiler import jit_function
    from flydsl.utils.env import runtime

    assert not runtime.enable_cache

    jit_function._run_pipeline(_Module, ["convert-scf-to-cf", "never-run{}"], verifier=True, print_after_all=False)
    raise AssertionError("the pipeline ran past the pass it stops before")


def hangs() -> None:
    time.sleep(600)


def fails_to_build() -> None:
    raise ValueError("a tile of 48 rows")


def test_the_module_is_kept_with_its_locations_and_the_passes_after_it_never_run(tmp_path):
    assert capture(f"{HERE}:runs_the_pipeline", {}, [], "gfx942", tmp_path) == "the kept stage, locations True"


def test_a_compile_that_hangs_is_capture_failed_at_the_timeout(tmp_path):
    start = time.monotonic()
    with pytest.raises(CaptureFailed, match="hangs for gfx942: no module within 3 s"):
        capture(f"{HERE}:hangs", {}, [], "gfx942", tmp_path, timeout=3)
    assert time.monotonic() - start < 60  # not the builder's 600 s


def test_a_builder_that_fails_is_capture_failed_with_its_code_and_log(tmp_path):
    with pytest.raises(CaptureFailed, match=r"(?s)fails_to_build for gfx950: FlyDSL wrote no structured stage "
                                            r"\(rc 1\).*ValueError: a tile of 48 rows"):
        capture(f"{HERE}:fails_to_build", {}, [], "gfx950", tmp_path)
