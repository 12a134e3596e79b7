"""Offline FlyDSL compiles of the drafter's own row-norm stage for both archs, and the resource math."""

import shutil
import subprocess
from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide.offline_compile import (
    CompileFailed,
    Resources,
    ToolchainMissing,
    compile_kernel,
    occupancy,
    parse_resources,
)

POOL_WORDS = 4096
NORM = "kerneltune.kernels.drafter_wide.norm_row:build_norm_row"


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_norm_row_compiles_with_sane_resources(tmp_path, arch):
    r = compile_kernel(NORM, {"hidden": 6144, "threads": 256, "pool_words": POOL_WORDS},
                       [["bf16", [64, 6144]], ["bf16", [6144]], ["bf16", [64, 6144]]], arch, 256, tmp_path)
    res = r.resources
    assert res.name.startswith("drafter_norm_row")
    assert 0 < res.vgpr <= 512 and res.sgpr > 0
    assert res.lds_bytes == 4 * POOL_WORDS  # the declared pool, nothing else
    assert res.vgpr_spill == 0 and res.sgpr_spill == 0 and res.scratch_bytes == 0
    assert res.max_threads == 256
    assert r.occupancy.waves_per_block == 4 and r.occupancy.blocks_per_cu >= 1
    assert r.isa_lines > 100
    code = Path(r.code_object_path).read_bytes()
    assert code[:4] == b"\x7fELF" and len(code) == r.code_object_bytes
    readobj = shutil.which("llvm-readobj-22")
    if readobj:  # the code object's own notes agree with the ISA's metadata
        notes = subprocess.run([readobj, "--notes", r.code_object_path], capture_output=True, text=True).stdout
        assert f".vgpr_count:     {res.vgpr}" in notes and f".group_segment_fixed_size: {res.lds_bytes}" in notes


def test_silent_errors_and_bad_builders_fail(tmp_path):
    with pytest.raises(CompileFailed, match="hidden 6000 does not split"):
        compile_kernel(NORM, {"hidden": 6000, "threads": 256, "pool_words": 64},
                       [["bf16", [8, 6000]], ["bf16", [6000]], ["bf16", [8, 6000]]], "gfx942", 256, tmp_path)


def test_a_missing_linker_or_device_library_is_one_line_naming_the_package(tmp_path, monkeypatch):
    from kerneltune.kernels.drafter_wide import offline_compile

    monkeypatch.setattr(offline_compile.shutil, "which", lambda name: None)
    monkeypatch.setattr(offline_compile, "_first", lambda paths: None)
    with pytest.raises(ToolchainMissing, match="apt-get install lld-22"):
        offline_compile.toolchain_dir(tmp_path)


def test_metadata_parsing_and_occupancy():
    isa = """\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     64
    .group_segment_fixed_size: 40960
    .max_flat_workgroup_size: 512
    .name:           k
    .private_segment_fixed_size: 0
    .sgpr_count:     90
    .sgpr_spill_count: 0
    .vgpr_count:     190
    .vgpr_spill_count: 3
\t.end_amdgpu_metadata"""
    res = parse_resources(isa)
    assert res == Resources("k", 190, 64, 90, 3, 0, 40960, 0, 512)
    # 192 arch VGPRs + 64 AGPRs = 256 per lane: 2 waves per SIMD; 8 waves per block
    o942 = occupancy(res, "gfx942", 512)
    assert (o942.waves_per_simd, o942.blocks_per_cu, o942.limited_by) == (2, 1, "registers")
    assert o942.resident_blocks == 304
    o950 = occupancy(Resources("k", 64, 0, 20, 0, 0, 96 * 1024, 0, 256), "gfx950", 256)
    assert (o950.blocks_per_cu, o950.limited_by) == (1, "lds")
