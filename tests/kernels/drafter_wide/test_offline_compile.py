"""Offline FlyDSL compiles of the whole drafter megakernel for both archs, and the resource math."""

from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide.kernel import KERNEL_ARG_SPEC
from kerneltune.kernels.drafter_wide.layout import DrafterLayout
from kerneltune.kernels.drafter_wide.offline_compile import (
    CompileFailed,
    Resources,
    ToolchainMissing,
    compile_kernel,
    occupancy,
    parse_resources,
)

WIDE = "kerneltune.kernels.drafter_wide.kernel:build_wide_for"


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "tiles"), [("gfx942", dict(ng=192, threads=512, w_na=96, qpr=1)),
                                             ("gfx950", dict(ng=384, threads=256, w_na=16, qpr=4))])
def test_the_megakernel_compiles_with_sane_resources(tmp_path, arch, tiles):
    layout = DrafterLayout(**tiles)
    r = compile_kernel(WIDE, {"arch": arch, **tiles}, KERNEL_ARG_SPEC, arch, tiles["threads"], tmp_path)
    res = r.resources
    assert res.name == f"drafter_wide_{arch}"
    assert 0 < res.vgpr <= 512 and res.sgpr > 0
    assert res.lds_bytes == 4 * layout.pool_words  # the declared pool, nothing else
    assert res.vgpr_spill == 0 and res.sgpr_spill == 0 and res.scratch_bytes == 0
    assert res.max_threads == tiles["threads"]
    assert r.occupancy.waves_per_block == tiles["threads"] // 64 and r.occupancy.blocks_per_cu >= 1
    assert r.occupancy.resident_blocks >= layout.BLOCKS  # the persistent grid fits at once
    isa = Path(r.isa_path).read_text()
    # 8-bit MFMAs, packed 8-bit conversions, deadline clock, polling sleep, the health claim.
    for instruction in ("v_mfma_f32_16x16x32_fp8_fp8", "v_cvt_pk_fp8_f32", "s_memrealtime", "s_sleep",
                        "global_atomic_cmpswap"):
        assert instruction in isa, instruction
    # The attention on MFMA: per 16-key block 8 bf16 MFMAs for S^T = K Q^T and 8 for O^T = V^T P^T, once in the
    # unmasked (interior) and once in the masked (edge) copy; operands from the LDS tiles in 8-byte reads.
    assert isa.count("v_mfma_f32_16x16x16_bf16") == 2 * 16, isa.count("v_mfma_f32_16x16x16_bf16")
    assert any(read in isa for read in ("ds_read_b64", "ds_read2_b64", "ds_read2st64_b64"))
    code = Path(r.code_object_path).read_bytes()
    assert code[:4] == b"\x7fELF" and len(code) == r.code_object_bytes
    # The ISA is the code object's, disassembled: one kernel symbol, the one its metadata names.
    assert isa.count(">:\n") == 1 and f"<{res.name}>:" in isa and r.isa_lines > 5000


@pytest.mark.slow
def test_silent_errors_and_bad_builders_fail(tmp_path):
    with pytest.raises(CompileFailed, match="arch: 'gfx90a' is not one of"):
        compile_kernel(WIDE, {"arch": "gfx90a", "ng": 192, "threads": 512, "w_na": 96, "qpr": 1}, KERNEL_ARG_SPEC,
                       "gfx942", 512, tmp_path)


def test_a_missing_linker_or_device_library_is_one_line_naming_the_package(tmp_path, monkeypatch):
    from kerneltune.kernels.drafter_wide import offline_compile

    monkeypatch.setattr(offline_compile.shutil, "which", lambda name: None)
    monkeypatch.setattr(offline_compile, "_first", lambda paths: None)
    with pytest.raises(ToolchainMissing, match="apt-get install lld-22"):
        offline_compile.toolchain_dir(tmp_path)
    with pytest.raises(ToolchainMissing, match="needs llvm-objdump-22: apt-get install llvm-22"):
        offline_compile.llvm_tool("llvm-objdump")


def test_a_launcher_flydsl_compiled_nothing_for_has_no_module_text():
    from kerneltune.kernels.drafter_wide.compile_worker import compiled_module_text

    assert compiled_module_text(lambda: None) is None


def test_metadata_parsing_and_occupancy():
    notes = """Displaying notes found in: .note
  Owner                Data size \tDescription
  AMDGPU               0x0000055f\tNT_AMDGPU_METADATA (AMDGPU Metadata)
    AMDGPU Metadata:
        ---
amdhsa.kernels:
  - .agpr_count:     64
    .args:
      - .name:           out
        .offset:         0
    .group_segment_fixed_size: 40960
    .max_flat_workgroup_size: 512
    .name:           k
    .private_segment_fixed_size: 0
    .sgpr_count:     90
    .sgpr_spill_count: 0
    .vgpr_count:     190
    .vgpr_spill_count: 3
amdhsa.version:
  - 1
...
"""
    with pytest.raises(CompileFailed, match="no AMDGPU metadata"):
        parse_resources(notes.replace("amdhsa.kernels", "amdhsa.other"))
    res = parse_resources(notes)
    assert res == Resources("k", 190, 64, 90, 3, 0, 40960, 0, 512)
    # 192 arch VGPRs + 64 AGPRs = 256 per lane: 2 waves per SIMD; 8 waves per block
    o942 = occupancy(res, "gfx942", 512)
    assert (o942.waves_per_simd, o942.blocks_per_cu, o942.limited_by) == (2, 1, "registers")
    assert o942.resident_blocks == 304
    o950 = occupancy(Resources("k", 64, 0, 20, 0, 0, 96 * 1024, 0, 256), "gfx950", 256)
    assert (o950.blocks_per_cu, o950.limited_by) == (1, "lds")


@pytest.mark.slow
def test_a_layout_whose_grid_cannot_be_resident_is_infeasible():
    """MI355X has 256 CUs: the seed's 304 blocks of 512 threads (one per CU at ~180 VGPRs) cannot all
    be resident, and a persistent grid that is not would deadlock; the static rank says so."""
    from kerneltune.kernels.drafter_wide.plugin import PLUGIN, DrafterProblem

    problem = DrafterProblem(arch="gfx950", requests=64, qpr=1)
    out = PLUGIN.static_rank(problem, {"ng": 192, "threads": 512, "w_na": 96})
    assert out["status"] == "constraint" and "not co-resident: BLOCKS 304 > 256 CUs" in out["error"], out
    assert out["static"]["vgpr_spill"] == 0 and out["static"]["lds_bytes"] == 4 * out["static"]["pool_words"]
    ok = PLUGIN.static_rank(problem, PLUGIN.heuristic(problem))
    assert ok["status"] == "ok" and ok["static"]["resident_blocks"] >= ok["static"]["blocks"], ok
