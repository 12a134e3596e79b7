"""The drafter's planted bugs (issue 57): each edit to the kernel's own code must fail a test of the quick
loop or the interpreted kernel's test (``tests/kernels/drafter_wide/test_interpreted.py``).

Each bug is applied alone to the working tree; the drafter's quick tests run first, then (if they pass)
the interpreted kernel's; the file is restored. The record names the first test that failed.

Usage: .venv/bin/python .ci/interpret_mutants.py [OUT [NUMBERS]]  (default mutants/interpret-results.txt, every
bug; NUMBERS: some of them, as 12,13); run it in a worktree of its own (it edits the sources). Exit 0 when every
bug tried is caught.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
D = "kerneltune/kernels/drafter_wide"
QUICK = ["-m", "not slow and not gpu", "tests/kernels/drafter_wide"]
INTERPRET = ["tests/kernels/drafter_wide/test_interpreted.py"]

# (the bug, file, exact text, its replacement)
BUGS: list[tuple[str, str, str, str]] = [
    ("V tile pair swapped", f"{D}/attention_role.py", "ix.tile_v(L, pair, 4 * g4, 16 * dt + l16)",
     "ix.tile_v(L, 1 - pair, 4 * g4, 16 * dt + l16)"),
    ("RoPE angle index from the wrong half", f"{D}/attention_role.py", "d = 16 * lo + 4 * g4 + j",
     "d = 16 * hi + 4 * g4 + j"),
    ("edge blocks unmasked", f"{D}/attention_role.py",
     "state = self.block_acc(pair, blk, qs[t], state, p, lo, hi, True)",
     "state = self.block_acc(pair, blk, qs[t], state, p, lo, hi, False)"),
    ("fresh-key rule off by one", f"{D}/attention_role.py", "fresh = key >= p_first", "fresh = key > p_first"),
    ("K tile row padding dropped (the store)", f"{D}/attention_role.py",
     "pool + ix.tile_k_word(L, pair, kk, 8 * d8 + 4 * h)",
     "pool + (pair * L.PAIR_ELEMENTS + kk * L.model.head_dim + 8 * d8 + 4 * h) // 2"),
    ("MFMA lane map transposed (the GEMV tile's rows and columns)", f"{D}/device.py",
     "ix.red_element(layout, slot, w, m, n)", "ix.red_element(layout, slot, w, n, m)"),
    ("the merge reading another chunk's partial", f"{D}/merge_role.py", "part = r * cpr + c",
     "part = r * cpr + ix.smin(c + 1, cpr - 1)"),
    ("a reduce-scatter pair sent to the wrong rank", f"{D}/gemv_role.py", "peer(ix.owner_rank(row))",
     "peer(ix.owner_rank(row + 1))"),
    ("a flag tag of the previous layer", f"{D}/gemv_role.py", 'self.wait_flags(self.flag("x8f", 0), n_rows, tag,',
     'self.wait_flags(self.flag("x8f", 0), n_rows, tag - 1,'),
    ("the prefetch loading block it + 1 instead of it + 2", f"{D}/attention_role.py",
     "ahead = self.fill_load(r, blk - 2,", "ahead = self.fill_load(r, blk - 1,"),
    ("cpr computed as W_NA // (n_reqs + 1)", f"{D}/indexing.py", "return layout.W_NA // (n_rows // layout.QPR)",
     "return layout.W_NA // (n_rows // layout.QPR + 1)"),
    ("a peer's all-gathered row read with plain loads (a stale L2 line)", f"{D}/norm_role.py",
     "ix.ag_x8_byte(L, region, t, w8)), I64, 8, coherent=True)", "ix.ag_x8_byte(L, region, t, w8)), I64, 8)"),
    ("a peer's all-gather scale read with a plain load", f"{D}/norm_role.py",
     "ix.ag_x8_scale(L, region, t)), F32, coherent=True)", "ix.ag_x8_scale(L, region, t)), F32)"),
]


def _pytest(args: list[str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", r.stdout, re.M)
    why = re.findall(r"^E\s+(\S.{0,200})", r.stdout, re.M)
    return r.returncode, (failed[0] if failed else "") + (f"\n       {why[0]}" if why else "")


def run(bug: tuple[str, str, str, str]) -> tuple[str, str, float]:
    _, file, old, new = bug
    path = ROOT / file
    text = path.read_text()
    if text.count(old) != 1:
        return f"not applied: the text is found {text.count(old)} times", "", 0.0
    t0 = time.monotonic()
    path.write_text(text.replace(old, new))
    try:
        for where, args in (("quick loop", QUICK), ("interpret test", INTERPRET)):
            rc, test = _pytest(args)
            if rc == 1:
                return f"caught by the {where}", test, time.monotonic() - t0
            if rc != 0:
                return f"error {rc} in the {where}", test, time.monotonic() - t0
        return "survived", "", time.monotonic() - t0
    finally:
        path.write_text(text)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "mutants/interpret-results.txt"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    lines, caught = [f"commit {commit.stdout.strip()}"], 0
    chosen = [int(n) for n in sys.argv[2].split(",")] if len(sys.argv) > 2 else range(1, len(BUGS) + 1)
    tried = [(n - 1, BUGS[n - 1]) for n in chosen]
    for n, bug in tried:
        verdict, test, seconds = run(bug)
        caught += verdict.startswith("caught")
        name, file, old, new = bug
        lines.append(f"{n + 1:2d} {name}: {verdict} ({seconds:.0f} s){' - ' + test if test else ''}\n"
                     f"     {file}\n     - {old}\n     + {new}")
        print(lines[-1], flush=True)
    lines.append(f"score: {caught} of {len(tried)} caught")
    print(lines[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return 0 if caught == len(tried) else 1


if __name__ == "__main__":
    sys.exit(main())
