"""The drafter's planted bugs (issues 57 and 80): each edit to the kernel's own code must fail the quick loop or
``verify drafter-wide --interpret`` (``interpret_check.check_interpreted``, run here as verify runs it).

Each bug is applied alone to the working tree; verify's interpreted checks run first, one run at a time as verify
makes them (``CHECK_RUNS``, then ``CHECK_EXTRA``), stopping at the first that fails, then (if they pass) the
drafter's quick tests; a bug that passes them all is tried on the shape of the matrix (``shape_matrix.MATRIX``)
its entry names, if any, and is then "caught by the matrix only". The file is restored. The record names the
first check that failed.

Usage: .venv/bin/python .ci/interpret_mutants.py [OUT [NUMBERS [--quick-only]]]  (default
mutants/interpret-results.txt, the unedited tree then every bug; NUMBERS: some of them, as 12,13, and 0 for the
unedited tree, or "all"; ``--quick-only``: the drafter's quick loop alone, no verify: what it catches by itself,
issue 98); run it in a worktree of its own (it edits the sources; the worktree's package is imported, not the
installed one). Exit 0 when every bug tried is caught by the quick loop or verify.
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

# (the bug, file, exact text, its replacement[, the matrix shape to try when verify does not catch it])
BUGS: list[tuple[str, ...]] = [
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
    # Issue 80: bugs of the classes its audit found the checks blind to. Each is argued non-equivalent: on the
    # hardware (and under the interpreter's model) it changes h_out or the cache at some shape users run.
    # Class 1, a barrier between waves sharing LDS. Waves run apart: a wave done with block it's products refills
    # its tile pair with block it + 2 while a slower wave still multiplies block it's keys out of it.
    ("attention: no barrier between consuming a tile pair and refilling it", f"{D}/attention_role.py",
     "                    states[t] = state\n                gpu.barrier()\n                if it + 2 < cnt:",
     "                    states[t] = state\n                if it + 2 < cnt:"),
    # A block reduction right after another (the norm's rms then amax; the merge's amax task after task): a fast
    # wave overwrites its reduce word while a slow wave still sums the previous reduction's words.
    ("block_reduce: no barrier before the reduce words are written again", f"{D}/block.py",
     "        v = self.wave_max(v) if is_max else self.wave_sum(v)\n        gpu.barrier()\n",
     "        v = self.wave_max(v) if is_max else self.wave_sum(v)\n"),
    # o_proj and down: push_pairs sums every wave's partials of the tile; without the barrier a wave reads the
    # partials of waves that have not stored them yet.
    ("GEMV: no barrier between a tile's partial sums and their reduction", f"{D}/gemv_role.py",
     "                self.gemv(held, chunks, scales, 0)\n                gpu.barrier()\n",
     "                self.gemv(held, chunks, scales, 0)\n"),
    # QKV's second barrier: the next token tile's partials overwrite the pool while a wave still reads this
    # tile's; with one token tile (16 rows or fewer) the publish's barrier follows instead: rows > 16 only.
    ("QKV: the barrier after a tile's stores dropped (rows > 16)", f"{D}/gemv_role.py",
     "                          self.tile_value(0, em, en, qkv_s, bid * L.QKV_R))\n            gpu.barrier()\n",
     "                          self.tile_value(0, em, en, qkv_s, bid * L.QKV_R))\n", "64 rows at 512 threads"),
    # Class 2, ordering. A flag published with no fence and no barrier: thread 0's release orders its own writes
    # only; the other waves' (the qkv values, the partials, the codes) may be unwritten or unseen behind the tag.
    ("publish without its fence and barrier", f"{D}/device.py",
     '    """After the whole block\'s writes: one release store of ``tag`` into the block\'s flag word."""\n'
     "    release_block()\n",
     '    """After the whole block\'s writes: one release store of ``tag`` into the block\'s flag word."""\n'),
    # The all-gather's tag released before its scale is stored: a reader that sees the tag may read the old scale
    # (the previous layer's, or none).
    ("the all-gather's tag published before its scale", f"{D}/norm_role.py",
     "            dev.st(dev.at(sym, yw + ix.ag_x8_scale(L, region, row.t_own)), amax / F32(self.f8_max), F32)\n"
     "            dev.st(dev.at(sym, yw + ix.ag_x8_tag(L, region, row.t_own)), I32(tag), I32, 4, release=True)\n",
     "            dev.st(dev.at(sym, yw + ix.ag_x8_tag(L, region, row.t_own)), I32(tag), I32, 4, release=True)\n"
     "            dev.st(dev.at(sym, yw + ix.ag_x8_scale(L, region, row.t_own)), amax / F32(self.f8_max), F32)\n"),
    # Release stores at agent scope: the reduce-scatter pairs, the all-gather tags and h_out's pairs go into other
    # GPUs' memory, and an agent-scope release makes a store visible to this GPU's agents only. (A fence at agent
    # scope before publish's system-scope release store, tried first, is equivalent: the barrier and the system
    # release after it order every wave's writes for the peers by the scoped model's transitivity; it survived.)
    ("release stores at agent scope, not system", f"{D}/device.py",
     "memory_order=fx.AtomicOrdering.Release, syncscope=SYSTEM)",
     'memory_order=fx.AtomicOrdering.Release, syncscope="agent")'),
    # Class 3, a narrow window. A poll whose first read is plain: when the flag is up already at the first read
    # (no spin), nothing orders the data reads after it; only schedules where the writer ran first show it.
    ("a poll's first read without acquire", f"{D}/device.py",
     "    v = ld(addr, fx.Int32, 4, acquire=True)\n    while", "    v = ld(addr, fx.Int32, 4)\n    while"),
    # The reduce-scatter wait covers 3 of every 4 pair words: the last quarter of a thread's pairs is read without
    # its tag seen, stale when their G block pushes late.
    ("row_sum4 waits for three quarters of its pairs", f"{D}/norm_role.py",
     "            for k in range(self.per_thread() * 4):", "            for k in range(self.per_thread() * 3):"),
    # Class 4, shapes. The merge waits for min(cpr, W_NA - 1) chunks: cpr = W_NA only with a single request,
    # whose last chunk's partials are then read unwaited (zeros, or stale, when its block runs late).
    ("the merge not waiting for a single request's last chunk", f"{D}/merge_role.py",
     'self.wait_flags(self.flag("apf", r * cpr), cpr, tag, 6)',
     'self.wait_flags(self.flag("apf", r * cpr), ix.smin(cpr, L.W_NA - 1), tag, 6)'),
    # The final gather copies 3 of its 4 rows: rows 48-63 of h_out stay poisoned; only more than 48 rows show it.
    ("the final gather skipping rows 48-63", f"{D}/norm_role.py",
     "        for c in range(4):\n            t = ix.gathered_row(row.j, c)\n            if t < a.n_rows:\n"
     "                for k in range(self.per_thread()):",
     "        for c in range(3):\n            t = ix.gathered_row(row.j, c)\n            if t < a.n_rows:\n"
     "                for k in range(self.per_thread()):", "64 rows at 512 threads"),
    # QKV values of token tile t stored at tile 0's rows: the second tile's overwrite the first's (rows > 16).
    ("QKV stored at the first token tile's rows", f"{D}/gemv_role.py",
     "            row = 16 * t + en\n            if (tid < 256) & (em < L.QKV_R) & (row < n_rows):",
     "            row = en\n            if (tid < 256) & (em < L.QKV_R) & (row < n_rows):", "64 rows at 512 threads"),
    # The attention's token rows counted with 4 waves (256 threads') stride: at 512 threads with more than 8 rows
    # a request, rows 4-11 are accumulated twice and rows 12-15 never.
    ("attention rows strided by 4 waves (512 threads, > 8 rows a request)", f"{D}/attention_role.py",
     "            rows = [ix.smin(wave + waves * t, L.QPR - 1) for t in range_constexpr(tokens_per_wave)]",
     "            rows = [ix.smin(wave + 4 * t, L.QPR - 1) for t in range_constexpr(tokens_per_wave)]"),
    # The third layer normed with the first layer's input-norm weights (random, different per layer).
    ("the third layer's input norm with the first layer's weights", f"{D}/norm_role.py",
     "self.put_x8(row, self.norm_pairs(res, self.table(layer, L.T_IN_LN)), L.Y_AGX, tag)",
     "self.put_x8(row, self.norm_pairs(res, self.table(layer % 2, L.T_IN_LN)), L.Y_AGX, tag)"),
    # A row whose every key so far is masked (m = -inf: the newest block holds only later rows' keys, when a
    # request's first position ends a block) gets exp(-inf - -inf) = NaN; only at that block edge.
    ("no guard for a fully masked block (the first row's causal edge on a block boundary)",
     f"{D}/attention_role.py", "m_use = (m_new == F32(float(\"-inf\"))).select(F32(0.0), m_new)", "m_use = m_new"),
    # The 256-thread full model's path (weights read per token tile, not held): lane groups read each other's
    # weight bytes. Held weights (every small-model layout, 512 threads) do not run it.
    ("unheld weights: lane groups read the mirrored chunk (full model, 256 threads)", f"{D}/gemv_role.py",
     "dev.row_chunk(self.L, *w, c, self.wave, self.g4)", "dev.row_chunk(self.L, *w, c, self.wave, 3 - self.g4)",
     "full model at 256 threads"),
    # Class 5, errors a global bound lets through. The last head quarter's 8-bit values read with the third
    # quarter's scale: heads 12-15 of o_proj's input off by the ratio of two amax (a few to 20% each row).
    ("o_proj's input: the last head quarter with the third's scale", f"{D}/gemv_role.py",
     "            quarter = ix.k_quarter(L, c, self.wave, o_in)",
     "            quarter = ix.smin(ix.k_quarter(L, c, self.wave, o_in), 2)"),
    # The down input's chunk amax over 2 of its 4 lane groups: where the chunk's largest values sit in the other
    # half they saturate at the 8-bit maximum (about half the chunks, their largest few values clipped).
    ("down input: each chunk's amax over half the chunk", f"{D}/gemv_role.py",
     "            a = a.maximumf(a.shuffle_xor(I32(32), I32(WAVE)))\n", ""),
]


def _pytest(args: list[str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", r.stdout, re.M)
    why = re.findall(r"^E\s+(\S.{0,200})", r.stdout, re.M)
    return r.returncode, (failed[0] if failed else "") + (f"\n       {why[0]}" if why else "")


# verify --interpret's runs one at a time (a run that fails ends the stage); argv: the cache folder, then the runs
# to make: "run N" (CHECK_RUNS[N]), "fixed N" (its fixed order only), "extra N" (CHECK_EXTRA[N]) or "matrix NAME"
# (shape_matrix.MATRIX's NAME).
VERIFY = """
import sys
from pathlib import Path
from kerneltune.kernels.drafter_wide.interpret_check import check_interpreted
from kerneltune.kernels.drafter_wide.interpreted import CHECK_EXTRA, CHECK_RUNS
from kerneltune.kernels.drafter_wide.shape_matrix import MATRIX
assert Path(check_interpreted.__code__.co_filename).is_relative_to(Path.cwd()), "not the worktree's package"
cache = Path(sys.argv[1])
for what in sys.argv[2:]:
    kind, key = what.split(" ", 1)
    if kind == "run":
        checks = check_interpreted(cache, (CHECK_RUNS[int(key)],), extra=())
    elif kind == "fixed":
        arch, plans = CHECK_RUNS[int(key)]
        checks = check_interpreted(cache, ((arch, plans[:1]),), extra=())
    elif kind == "extra":
        checks = check_interpreted(cache, (), extra=(CHECK_EXTRA[int(key)],))
    else:
        shape = next(s for s in MATRIX if s.name == key)
        checks = check_interpreted(cache, ((shape.arch, (None,)),), shape.as_check(), extra=())
    bad = [c for c in checks if not c.ok]
    if bad:
        c = bad[0]
        print(f"FAILED {what}: {c.numbers} {c.schedule} {c.shape}: {c.worst_error:.3g} (bound {c.tolerance:.3g})"
              f"{': ' + c.error[:300] if c.error else ''}")
        sys.exit(1)
    print(f"passed {what}", flush=True)
"""


def _verify(runs: list[str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-c", VERIFY, str(ROOT / "mutants" / "cache"), *runs], cwd=ROOT,
                       capture_output=True, text=True, timeout=3600)
    failed = re.findall(r"^FAILED (.*)$", r.stdout, re.M)
    return r.returncode, failed[0] if failed else (r.stdout + r.stderr)[-300:] if r.returncode else ""


def _verify_runs() -> list[str]:
    from kerneltune.kernels.drafter_wide.interpreted import CHECK_EXTRA, CHECK_RUNS

    # cheapest first: the default shape's fixed order on the first arch (one step), the extra shape (one step that
    # reaches what the default's do not), then every run as verify makes it
    return (["fixed 0"] + [f"extra {i}" for i in range(len(CHECK_EXTRA))]
            + [f"run {i}" for i in range(len(CHECK_RUNS))])


def run(bug: tuple[str, ...]) -> tuple[str, str, float]:
    _, file, old, new, *shape = bug
    path = ROOT / file
    text = path.read_text()
    if text.count(old) != 1:
        return f"not applied: the text is found {text.count(old)} times", "", 0.0
    t0 = time.monotonic()
    path.write_text(text.replace(old, new))
    try:
        # verify first: no quick test runs the role modules, so for most bugs it is the one that can catch them
        stages = (("verify --interpret", lambda: _verify(_verify_runs())), ("quick loop", lambda: _pytest(QUICK)),
                  ("matrix", lambda: _verify([f"matrix {shape[0]}"]) if shape else (0, "")))
        if "--quick-only" in sys.argv:
            stages = (("quick loop", lambda: _pytest(QUICK)),)
        for where, stage in stages:
            rc, test = stage()
            if rc == 1:
                return f"caught by the {where}{' only' if where == 'matrix' else ''}", test, time.monotonic() - t0
            if rc != 0:
                return f"error {rc} in the {where}", test, time.monotonic() - t0
        return "survived", "", time.monotonic() - t0
    finally:
        path.write_text(text)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "mutants/interpret-results.txt"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    lines, caught = [f"commit {commit.stdout.strip()}"], 0
    numbers = sys.argv[2] if len(sys.argv) > 2 else "all"
    chosen = range(len(BUGS) + 1) if numbers == "all" else [int(n) for n in numbers.split(",")]
    tried = [(n - 1, BUGS[n - 1]) for n in chosen if n > 0]
    t0 = time.monotonic()
    baseline = (("quick loop", lambda: _pytest(QUICK)), ("verify --interpret", lambda: _verify(_verify_runs())))
    for where, stage in baseline if 0 in chosen else ():  # 0: the tree as it is, unedited
        rc, test = stage()
        lines.append(f"the tree as it is: the {where} {'passes' if rc == 0 else 'FAILS'} {test}".rstrip())
        print(lines[-1], flush=True)
        if rc != 0:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("\n".join(lines) + "\n")
            return 2
    if 0 in chosen:
        lines[-1] += f" ({time.monotonic() - t0:.0f} s both)"
    for n, bug in tried:
        verdict, test, seconds = run(bug)
        caught += verdict.startswith("caught") and not verdict.endswith("only")
        name, file, old, new, *_ = bug
        lines.append(f"{n + 1:2d} {name}: {verdict} ({seconds:.0f} s){' - ' + test if test else ''}\n"
                     f"     {file}\n     - {old}\n     + {new}")
        print(lines[-1], flush=True)
    lines.append(f"score: {caught} of {len(tried)} caught by the quick loop"
                 f"{'' if '--quick-only' in sys.argv else ' or verify --interpret'}")
    print(lines[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return 0 if caught == len(tried) else 1


if __name__ == "__main__":
    sys.exit(main())
