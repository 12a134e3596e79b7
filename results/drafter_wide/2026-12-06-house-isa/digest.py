"""Digest the final ISA (comments, .loc/.file directives dropped) and the code object of a set of layouts."""
import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path

from kerneltune.kernels.drafter_wide.kernel import KERNEL_ARG_SPEC
from kerneltune.kernels.drafter_wide.offline_compile import compile_kernel

CASES = [
    {"arch": "gfx942", "ng": 192, "threads": 512, "w_na": 32, "qpr": 7, "layers": 1},
    {"arch": "gfx942", "ng": 384, "threads": 256, "w_na": 16, "qpr": 4, "layers": 1},
    {"arch": "gfx950", "ng": 192, "threads": 256, "w_na": 64, "qpr": 1, "layers": 1},
    {"arch": "gfx950", "ng": 384, "threads": 512, "w_na": 96, "qpr": 8, "layers": 2},
    {"arch": "gfx942", "ng": 192, "threads": 256, "w_na": 32, "qpr": 2, "layers": 2,
     "model": {"hidden": 3072, "intermediate": 1536, "window": 512}},
]
out = {}
for case in CASES:
    with tempfile.TemporaryDirectory() as tmp:
        rep = compile_kernel("kerneltune.kernels.drafter_wide.kernel:build_wide_for", case, KERNEL_ARG_SPEC,
                             case["arch"], case["threads"], Path(tmp))
        isa = Path(rep.isa_path).read_text()
        skip = (";", ".loc", ".file")
        lines = [line for line in isa.splitlines() if line.strip() and not line.lstrip().startswith(skip)]
        lines = [re.sub(r"\s*;.*$", "", line) for line in lines]
        key = json.dumps(case, sort_keys=True)
        out[key] = {"isa": hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16],
                    "code": hashlib.sha256(Path(rep.code_object_path).read_bytes()).hexdigest()[:16],
                    "vgpr": rep.resources.vgpr, "isa_lines": rep.isa_lines}
        print(key, out[key], flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1, sort_keys=True))
