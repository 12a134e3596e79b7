"""The ranker's program digest: blind to the source text, not to the program."""

import importlib
import shutil
import sys

import pytest

from kerneltune.kernels.ranker_attention import program
from kerneltune.kernels.ranker_attention.config import Problem

from ...paths import REPO

TILES = {"block_q": 64, "block_kv": 128, "num_stages": 3, "p_in_registers": True, "schedule_barrier": True,
         "persistent": True, "fast_math": True, "static_max": True, "cap_impl": "tanh_instr", "exp2_fma_eighths": 5}
PROBLEM = dict(batch=8, seq_len=1024, q_heads=2, kv_heads=2, head_dim=64, cap_method="tanh", cap=30.0)


def test_unescape_reads_mlirs_string_escapes():
    assert program.unescape(r'a\22b\\c\0A\\41') == b'a"b\\c\n\\41'


@pytest.mark.slow
def test_the_digest_ignores_source_locations_and_sees_tiles_and_the_grid(tmp_path, monkeypatch):
    """A copy of the package with lines added above the kernel's code lowers to the same digest (its
    locations all move); another stage count or SM count does not (256 tiles: the persistent grid is the
    SM count)."""
    copy = tmp_path / "ranker_shifted"
    shutil.copytree(REPO / "kerneltune/kernels/ranker_attention", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("kernel.py", "exp2_fma.py", "cap.py"):
        (copy / name).write_text("\n\n# moved down three lines\n" + (copy / name).read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        shifted = importlib.import_module("ranker_shifted.program")
        digest = program.program_digest(Problem(**PROBLEM), TILES, 132)
        assert shifted.program_digest(shifted.Problem(**PROBLEM), TILES, 132) == digest
    finally:
        for name in [m for m in sys.modules if m.startswith("ranker_shifted")]:
            del sys.modules[name]
    assert program.program_digest(Problem(**PROBLEM), {**TILES, "num_stages": 2}, 132) != digest
    assert program.program_digest(Problem(**PROBLEM), TILES, 114) != digest
