"""Compile FlyDSL kernels for gfx942 / gfx950 without an AMD GPU, and read what they use.

The compile runs in a subprocess (``COMPILE_ONLY=1``; a real launch would abort
the process without libamdhip64) that writes the kernel's code object; LLVM's
tools read it: the AMDGPU metadata in its notes (registers, spills, LDS and
scratch) and its ISA, disassembled. Occupancy is computed from those (the
metadata does not report it), and with it whether a persistent grid can be
resident all at once. FlyDSL reports some failures without failing (e.g. "no
libcall available"), so its output is scanned too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ARCHS = {
    # arch: (CUs of the reference part, LDS bytes per CU, part)
    "gfx942": (304, 64 * 1024, "MI300X"),
    "gfx950": (256, 160 * 1024, "MI355X"),
}
VGPRS_PER_SIMD_LANE = 512
MAX_WAVES_PER_SIMD = 8
SIMDS_PER_CU = 4
WAVE = 64
_SILENT_ERRORS = ("no libcall available", "LLVM ERROR", "error:", "Error:")


class ToolchainMissing(RuntimeError):
    """The offline compile's linker or device libraries are not installed (names the package)."""


class CompileFailed(RuntimeError):
    """The compile failed or reported an error without failing; carries the log lines."""


@dataclass(frozen=True)
class Resources:
    name: str
    vgpr: int
    agpr: int
    sgpr: int
    vgpr_spill: int
    sgpr_spill: int
    lds_bytes: int
    scratch_bytes: int
    max_threads: int


@dataclass(frozen=True)
class Occupancy:
    waves_per_block: int
    waves_per_simd: int
    blocks_per_cu: int
    limited_by: str
    cus: int

    @property
    def resident_blocks(self) -> int:
        return self.blocks_per_cu * self.cus


@dataclass(frozen=True)
class CompileReport:
    arch: str
    resources: Resources
    occupancy: Occupancy
    isa_lines: int  # instructions in the code object's disassembly
    isa_mfma: int  # v_mfma instructions in the ISA (static count)
    isa_path: str
    code_object_path: str
    code_object_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first(paths: list[str]) -> Path | None:
    for p in paths:
        if p and Path(p).exists():
            return Path(p)
    return None


def toolchain_dir(cache: Path) -> Path:
    """A folder laid out as FlyDSL expects ``$ROCM_PATH`` (links to Debian's lld-22 and device libs)."""
    lld = _first([shutil.which("ld.lld-22") or "", "/usr/lib/llvm-22/bin/ld.lld", shutil.which("ld.lld") or ""])
    if lld is None:
        raise ToolchainMissing("FlyDSL's offline compile needs ld.lld: apt-get install lld-22")
    bitcode = _first(["/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/aarch64-linux-gnu/amdgcn/bitcode",
                      "/opt/rocm/amdgcn/bitcode"])
    if bitcode is None:
        raise ToolchainMissing("FlyDSL's offline compile needs the AMD device libraries: "
                               "apt-get install rocm-device-libs")
    root = cache / "rocm"
    (root / "llvm" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "amdgcn").mkdir(parents=True, exist_ok=True)
    for link, target in ((root / "llvm" / "bin" / "ld.lld", lld), (root / "amdgcn" / "bitcode", bitcode)):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return root


_META_KEYS = {
    "vgpr": ".vgpr_count", "agpr": ".agpr_count", "sgpr": ".sgpr_count", "vgpr_spill": ".vgpr_spill_count",
    "sgpr_spill": ".sgpr_spill_count", "lds_bytes": ".group_segment_fixed_size",
    "scratch_bytes": ".private_segment_fixed_size", "max_threads": ".max_flat_workgroup_size",
}


def llvm_tool(name: str) -> str:
    """LLVM 22's ``name`` (an older one may not know gfx950)."""
    found = _first([shutil.which(f"{name}-22") or "", f"/usr/lib/llvm-22/bin/{name}"])
    if found is None:
        raise ToolchainMissing(f"reading FlyDSL's code objects needs {name}-22: apt-get install llvm-22")
    return str(found)


def parse_resources(notes: str) -> Resources:
    """Resource use from the AMDGPU metadata (``amdhsa.kernels``) of a code object's notes (``llvm-readelf --notes``:
    YAML, ended by a ``...`` line)."""
    start = notes.find("amdhsa.kernels:")
    if start < 0:
        raise CompileFailed("no AMDGPU metadata (amdhsa.kernels) in the code object's notes")
    end = notes.find("\n...", start)
    meta = notes[start:end if end > 0 else len(notes)]
    values: dict[str, Any] = {}
    for field, key in _META_KEYS.items():
        m = re.search(rf"{re.escape(key)}:\s+(\d+)", meta)
        values[field] = int(m.group(1)) if m else 0
    name = re.search(r"^(?:    |  - )\.name:\s+(\S+)", meta, re.M)  # the kernel's, not an argument's
    return Resources(name=name.group(1) if name else "?", **values)


def extract_code_object(mlir: str) -> bytes:
    """The ELF code object inside the ``gpu.binary`` op of a module FlyDSL compiled (its text)."""
    start = mlir.find("gpu.binary")
    m = re.search(r'bin = "((?:[^"\\]|\\.)*)"', mlir[start:]) if start >= 0 else None
    if m is None:
        raise CompileFailed("no gpu.binary with a code object in the compiled module")
    raw, out, i = m.group(1), bytearray(), 0
    while i < len(raw):
        if raw[i] == "\\" and re.fullmatch(r"[0-9A-Fa-f]{2}", raw[i + 1:i + 3]):
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
        elif raw[i] == "\\":
            out.append(ord(raw[i + 1]))
            i += 2
        else:
            out.append(ord(raw[i]))
            i += 1
    if not out.startswith(b"\x7fELF"):
        raise CompileFailed("the gpu.binary payload is not an ELF code object")
    return bytes(out)


def occupancy(res: Resources, arch: str, threads: int) -> Occupancy:
    """Blocks per CU from registers (unified 512-entry file per SIMD lane, granule 8), LDS and
    the 8-waves-per-SIMD limit."""
    cus, lds_per_cu, _ = ARCHS[arch]
    waves_per_block = -(-threads // WAVE)
    arch_vgpr = -(-max(res.vgpr, 1) // 4) * 4  # AGPRs start at the next multiple of 4
    total = -(-(arch_vgpr + res.agpr) // 8) * 8
    by_regs = min(VGPRS_PER_SIMD_LANE // total, MAX_WAVES_PER_SIMD)
    limits = {
        "registers": (by_regs * SIMDS_PER_CU) // waves_per_block,
        "waves": (MAX_WAVES_PER_SIMD * SIMDS_PER_CU) // waves_per_block,
        "lds": lds_per_cu // res.lds_bytes if res.lds_bytes else 1 << 30,
    }
    limited_by = min(limits, key=lambda k: limits[k])
    return Occupancy(waves_per_block, by_regs, limits[limited_by], limited_by, cus)


def compile_kernel(builder: str, kwargs: dict[str, Any], args: list[list[Any]], arch: str, threads: int,
                   cache: Path, timeout: float = 300.0) -> CompileReport:
    """Compile ``builder(**kwargs)`` (a "module:function" returning a ``@flyc.jit`` launcher) for
    ``arch`` on arguments described as ``[dtype, shape]`` pairs, in a subprocess."""
    if arch not in ARCHS:
        raise ValueError(f"arch: {arch!r} is not one of {sorted(ARCHS)}")
    root = toolchain_dir(cache)
    readelf, objdump = llvm_tool("llvm-readelf"), llvm_tool("llvm-objdump")
    out = Path(tempfile.mkdtemp(prefix=f"flydsl-{arch}-", dir=cache))
    code_path = out / "kernel.hsaco"
    run = run_worker({"builder": builder, "kwargs": kwargs, "args": args, "code_object": str(code_path)}, arch, root,
                     timeout)
    if run is None:
        raise CompileFailed(f"{builder} for {arch}: no result within {timeout:.0f} s")
    log = run.stdout + run.stderr
    bad = [line for line in log.splitlines() if any(s in line for s in _SILENT_ERRORS)]
    if run.returncode != 0 or bad:
        raise CompileFailed(f"{builder} for {arch}: " + ("\n".join(bad) or log[-2000:]))
    if not code_path.is_file():
        raise CompileFailed(f"{builder} for {arch}: no code object was written")
    res = parse_resources(_read_with(readelf, "--notes", code_path))
    isa = _read_with(objdump, "-d", f"--mcpu={arch}", code_path)
    hsaco, isa_path = out / f"{res.name}.{arch}.hsaco", out / f"{res.name}.{arch}.s"
    code_path.replace(hsaco)
    isa_path.write_text(isa)
    instructions = sum(1 for line in isa.splitlines() if line.startswith("\t"))
    return CompileReport(arch, res, occupancy(res, arch, threads), instructions, isa.count("v_mfma"),
                         str(isa_path), str(hsaco), hsaco.stat().st_size)


def run_worker(spec: dict[str, Any], arch: str, rocm: Path, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """``compile_worker`` run on ``spec`` for ``arch`` (``rocm``: the folder FlyDSL takes for ``$ROCM_PATH``), or None
    past ``timeout``. FlyDSL's own kernel cache is off: it would keep every compile in ~/.flydsl/cache, in the user's
    home behind their back, and a capture handed a kept module would never run the passes it stops."""
    env = {**os.environ, "FLYDSL_RUNTIME_ENABLE_CACHE": "0", "COMPILE_ONLY": "1", "ARCH": arch,
           "FLYDSL_GPU_ARCH": arch, "ROCM_PATH": str(rocm)}
    try:
        return subprocess.run([sys.executable, "-m", "kerneltune.kernels.drafter_wide.compile_worker"],
                              input=json.dumps(spec), capture_output=True, text=True, env=env, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return None


def _read_with(tool: str, *args: Any) -> str:
    """``tool``'s output on a code object; a failure is the compile's, with the tool's words."""
    run = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise CompileFailed(f"{Path(tool).name} could not read the code object: {run.stderr.strip()[-500:]}")
    return run.stdout
