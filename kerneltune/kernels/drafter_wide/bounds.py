"""Every comparison the drafter's kernel makes against a bound, as a table checked against the source: the window,
a block's rows, the last block, the number of rows, cache slots, a role's blocks, a flag's tag.

``found()`` reads the comparisons (``<``, ``<=``, ``==``, ... and the clamps ``smin``/``smax``) of ``indexing.py``,
the role modules, ``device.py`` and ``kernel.py`` from their syntax trees; ``TABLE`` must list exactly those
(``tests/kernels/drafter_wide/test_bounds.py``), so a new comparison fails the tests until it is entered here with
the sides its index must be met on. Each entry's ``kind``:

- ``bound``: an index against a bound, in the compiled program: the quick tests must meet ``index - bound`` at each
  of ``sides`` (just below, at and just above: -1, 0, 1), which the interpreter records for every integer
  comparison and clamp it runs (``interpreter.ops.COMPARED``); a side a layout cannot reach is left out with its
  reason (``why``), and must then never be met (a change that reaches it asks for its cases);
- ``select``: an equality that picks a lane, a case or a guard: met equal and not equal (float guards by their
  outcomes, true and false);
- ``trace``: decided while the kernel is traced (Python values: no op in the program); its cases are the layouts'
  and shapes' own;
- ``merged``: an op the captured program merged with an identical one before it (common subexpressions), whose
  cases are that one's.

The index functions themselves (``indexing.py``) are also run on integers, each bound below, at and above
(``test_bounds.py``)."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FILES = ("indexing.py", "gemv_role.py", "norm_role.py", "attention_role.py", "merge_role.py", "block.py", "device.py",
         "kernel.py")
CLAMPS = ("smin", "smax", "ix.smin", "ix.smax", "min", "max", "fx.min", "fx.max")
# The clamp helpers' own bodies: the dispatch between ints and FlyDSL values, not comparisons of the kernel.
HELPERS = {("indexing.py", "smin"), ("indexing.py", "smax"), ("indexing.py", "select")}
ALL = frozenset({-1, 0, 1})


@dataclass(frozen=True)
class Bound:
    file: str
    function: str
    text: str  # ``ast.unparse`` of the comparison or clamp call
    kind: str  # "bound", "select" or "trace"
    what: str  # the index and the bound, in words
    sides: frozenset[int] = ALL  # bound: the values of index - bound the quick tests meet (clipped to -2..2)
    why: str = ""  # a side left out of ``sides``: why no layout or shape reaches it
    count: int = 1  # how many times ``text`` appears in ``function``
    flipped: bool = False  # a Python int on the left (``pair < cnt``): FlyDSL traces the reflected ``cnt > pair``

    @property
    def recorded(self) -> frozenset:
        """``sides`` as the interpreter records them: ``lhs - rhs`` of the op, negated where the op is reflected."""
        return frozenset(-x for x in self.sides) if self.flipped else self.sides

    @property
    def key(self) -> tuple[str, str, str]:
        return self.file, self.function, self.text


def _b(file: str, function: str, text: str, what: str, sides: frozenset[int] = ALL, why: str = "",
       count: int = 1, flipped: bool = False) -> Bound:
    return Bound(file, function, text, "bound", what, sides, why, count, flipped)


EQUAL_AND_NOT = frozenset({0, 1})  # an integer equality met equal (0) and not (1: any other difference)
BOTH = frozenset({False, True})  # a float guard met both ways


def _s(file: str, function: str, text: str, what: str, sides: frozenset = EQUAL_AND_NOT, why: str = "",
       count: int = 1) -> Bound:
    return Bound(file, function, text, "select", what, sides, why, count)


def _t(file: str, function: str, text: str, what: str, count: int = 1) -> Bound:
    return Bound(file, function, text, "trace", what, count=count)


STRIDE = frozenset({-2, 0, 2})  # an index that steps by more than one: its neighbours of the bound are +-a step
TILE_WHY = ("em spans a tile's 16 rows and GU_R is 16 at the quick step's 512-thread small model (3072 intermediate "
            "rows a rank over NG 192), as at the full model: em never reaches it there; at 256 threads (1536 a rank, "
            "GU_R 8: verify's test shape) it is met on both sides")
TABLE: tuple[Bound, ...] = (
    # indexing.py: a tile's rows, the window, the edge blocks' mask (also run on integers: test_bounds.py)
    _b("indexing.py", "tile_row", "smin(l16, smax(n_rows - TILE * t, 1) - 1)", "a lane's row in its token tile "
       "against the tile's last row (a partial last tile repeats it)"),
    _b("indexing.py", "tile_row", "smax(n_rows - TILE * t, 1)", "the rows left from tile t against one",
       frozenset({1, 2}), "a tile is traced only where rows are left (n_rows > 16 t): the clamp guards a tile past "
       "the rows, which no launch runs; on integers, test_a_tile_row_repeats_the_last_row_from_the_bound_on"),
    _b("indexing.py", "window", "smax(p_first - layout.WINDOW + 1, 0)", "the window's first key against key 0",
       frozenset({0, 1, 2}), "the compiled shape's contexts are 511, 512 and 526 (at and above); below (510) on "
       "integers, test_the_window_starts_at_key_zero_below_and_at_its_bound"),
    _b("indexing.py", "interior", "first > p_last - layout.WINDOW", "a block's first key against the last row's "
       "window start", frozenset({-2, 2}), "block-aligned against p_last - 512: one context a residue; below, at and "
       "above on integers, test_interior_at_each_of_its_four_bounds"),
    _b("indexing.py", "interior", "first >= lo", "a block's first key against the window's first key"),
    _b("indexing.py", "interior", "last <= hi", "a block's last key against the request's last key",
       frozenset({-2, 2}), "block-aligned against seq_len - 1: one context a residue; on integers, "
       "test_interior_at_each_of_its_four_bounds"),
    _b("indexing.py", "interior", "last <= p_first", "a block's last key against the first row's position"),
    _b("indexing.py", "key_seen", "key >= lo", "a key against the window's first key"),
    _b("indexing.py", "key_seen", "key <= hi", "a key against the request's last key"),
    _b("indexing.py", "key_seen", "key > p - layout.WINDOW", "a key against a row's window start"),
    _b("indexing.py", "key_seen", "key <= p", "a key against a row's own position (causal)"),
    # gemv_role.py: a tile's token rows against n_rows, its weight rows against the block's
    _b("gemv_role.py", "push_pairs", "self.tid < 128", "a thread against the 128 that push a tile's pairs"),
    _b("gemv_role.py", "push_pairs", "row < self.args.n_rows", "a pushed token row against the rows"),
    _t("gemv_role.py", "to_owners", "tt == 0", "the first token tile (a traced loop)"),
    _b("gemv_role.py", "run", "ix.smin(l16, L.QKV_R - 1)", "a lane's weight row against the block's last QKV row"),
    _b("gemv_role.py", "run", "ix.smin(l16, L.GU_R - 1)", "a lane's weight row against the block's last gate/up "
       "row", frozenset({-2, -1, 0}), TILE_WHY, count=2),
    _b("gemv_role.py", "run", "tid < 256", "a thread against the 256 that store a tile's values", count=2),
    _b("gemv_role.py", "run", "em < L.QKV_R", "a stored weight row against the block's QKV rows"),
    _b("gemv_role.py", "run", "em < L.GU_R", "a stored weight row against the block's gate/up rows",
       frozenset({-2, -1}), TILE_WHY),
    _b("gemv_role.py", "run", "row < n_rows", "a stored token row against the rows", count=2),
    # norm_role.py: a norm block's own row and its gathered rows against n_rows
    _b("norm_role.py", "of", "t_own < b.args.n_rows", "a norm block's own row against the rows"),
    _b("norm_role.py", "of", "ix.smin(t_own, b.args.n_rows - 1)", "the row it reads against the last row"),
    _s("norm_role.py", "put_x8", "self.tid == 0", "the thread that stores the scale and the tag"),
    _b("norm_role.py", "gather_x8", "t < n_rows", "a gathered row against the rows"),
    _b("norm_role.py", "gather_x8", "w8 < hidden", "a thread's 8 bytes against the row's", STRIDE,
       "w8 steps by 8 bytes: just below and above the bound are -8 and +8"),
    Bound("norm_role.py", "gather_x8", "tid == 0", "merged", "the thread that copies a gathered row's scale: the "
          "same comparison of the same value as one before it, which the captured program keeps (common "
          "subexpressions merged), so its cases are that one's"),
    _t("norm_role.py", "run", "layer > 0", "a layer after the first (a traced loop)"),
    _b("norm_role.py", "run", "t < a.n_rows", "a row of the final gather against the rows"),
    # attention_role.py: the window's keys, this step's keys, a chunk's blocks, a request's rows, idle blocks
    _t("attention_role.py", "head_vec", "norm_w is None", "a head vector without a norm (traced)"),
    _t("attention_role.py", "q_operand", "ks < half", "the rotated half of a head (traced)"),
    _b("attention_role.py", "piece_of", "ix.smin(self.tid + e * L.threads, pieces_total(L) - 1)", "a thread's "
       "piece against the last piece of a K|V tile pair", frozenset({-2, -1, 0}), "the pieces are whole multiples "
       "of the threads at 256 and 512 threads, so the clamp is met at its bound, never past it"),
    _b("attention_role.py", "fill_cached", "ix.smax(blk * L.BLOCK + kk, lo)", "a cached key against the window's "
       "first key"),
    _b("attention_role.py", "fill_cached", "ix.smin(ix.smax(blk * L.BLOCK + kk, lo), hi)", "a cached key against "
       "the last key"),
    _b("attention_role.py", "fill_fresh", "ix.smax(key - p_first, 0)", "a key's staging row against the first"),
    _b("attention_role.py", "fill_fresh", "ix.smin(ix.smax(key - p_first, 0), L.QPR - 1)", "a key's staging row "
       "against the request's last"),
    _b("attention_role.py", "fill_fresh", "key >= lo", "a key against the window's first key"),
    _b("attention_role.py", "fill_fresh", "key <= hi", "a key against the request's last key"),
    _b("attention_role.py", "fill_fresh", "key >= p_first", "a key against this step's first key (fresh)"),
    _s("attention_role.py", "fill_store", "value == 0", "K (0) or V (1)"),
    _s("attention_role.py", "block_acc", "m_new == F32(float('-inf'))", "a row whose every key so far is masked",
       BOTH),
    _b("attention_role.py", "request_length", "ix.smin((self.bid - L.ATT0) // ix.chunks_per_request(L, n_rows), "
       "n_rows // L.QPR - 1)", "an attention block's request against the last request"),
    _b("attention_role.py", "run", "pidx < cpr * n_req", "an attention block against the busy ones (idle blocks)"),
    _s("attention_role.py", "run", "c == 0", "a request's first chunk (it stages the new rows)"),
    _b("attention_role.py", "run", "pair < cnt", "a tile pair against the chunk's blocks", frozenset({-2}),
       "the compiled shape's chunks all hold two or more blocks; a chunk of one block: the matrix's 'one request, "
       "three layers' (16 chunks of about 2 blocks)", flipped=True),
    _b("attention_role.py", "run", "ix.smin(wave + waves * t, L.QPR - 1)", "a wave's token row against the "
       "request's last"),
    _b("attention_role.py", "run", "it + 2 < cnt", "the block two ahead against the chunk's blocks (the prefetch)",
       frozenset({-2, -1, 0, 1}), "it + 2 runs up to cnt + 1: +1 is its last trip, +2 would be a trip past the end"),
    _b("attention_role.py", "run", "wave + waves * t < L.QPR", "a wave's token row against the request's rows",
       frozenset({-2, -1, 0, 1}), "at 512 threads (8 waves) and 6 rows: waves 5, 6, 7 are below, at and above; +2 "
       "for none"),
    _s("attention_role.py", "run", "g4 == 0", "the lane group that stores m and l"),
    # merge_role.py
    _b("merge_role.py", "run", "ix.smin(wave, heads_per_task - 1)", "a wave's head against the task's last"),
    _s("merge_role.py", "run", "mc == F32(float('-inf'))", "a chunk with no key seen", frozenset({False}),
       "a chunk whose keys are all masked: the matrix's 'three requests at a block's end' (context 1039)"),
    _b("merge_role.py", "run", "wave < heads_per_task", "a wave against the task's 4 heads (512 threads: 8 waves)"),
    _s("merge_role.py", "run", "tid == 0", "the thread that stores the scale"),
    # block.py, device.py, kernel.py: roles by block id, flags by tag
    _t("block.py", "most_flags", "max(self.L.NG, 4 * MAX_ROWS, self.L.W_NA)", "the most flags a wait reads "
       "(traced)"),
    _s("block.py", "block_reduce", "self.lane == 0", "a wave's first lane"),
    _s("device.py", "publish", "tid == 0", "the thread that releases the flag"),
    _b("device.py", "_poll", "realtime() < deadline", "the clock against a wait's deadline", frozenset({-2, 0}),
       "the clock moves by many ticks a poll; past the deadline (+) is a missed wait, which test_drafter_races and "
       "the health tests plant"),
    _b("device.py", "_poll", "v < tag", "a flag's tag against the one waited for", frozenset({-2, 0}),
       "a flag of the launch before holds tag - 8 (one layer: no tag - 1); a newer tag (+) than the waiter's "
       "cannot be written before the waiter's layer is done"),
    _b("device.py", "_poll", "v != tag", "a tagged word against the tag (an exact wait)", frozenset({-2, 0}),
       "as v < tag"),
    _b("device.py", "wait_flags", "i < count", "a flag index against the count waited for"),
    _b("device.py", "wait_flags", "v < tag", "a flag already up against the tag", frozenset({0}),
       "read after the poll: every flag it reads is up (v = tag)"),
    _s("device.py", "wait_tagged", "v != tag", "a tagged word already up", frozenset({0}),
       "read after the poll: the word is up (v = tag)"),
    _t("kernel.py", "build_wide", "arch not in F8_MAX", "an arch without an 8-bit format (traced)"),
    _t("kernel.py", "build_wide", "m.head_dim != 2 * WAVE", "the head shape the kernel is written for (traced)"),
    _t("kernel.py", "build_wide", "ix.merge_max_word(L, L.waves, 0) > ix.reduce_word(L, 0)", "LDS words (traced)"),
    _t("kernel.py", "build_wide", "ix.red_word(L, 2, 0, 0, 0) > ix.reduce_word(L, 0)", "LDS words (traced)"),
    _t("kernel.py", "build_wide", "L.BLOCK != 16", "the KV block the kernel is written for (traced)"),
    _t("kernel.py", "build_wide", "m.q_heads != 16", "the heads the kernel is written for (traced)"),
    _b("kernel.py", "drafter_wide", "b.bid < L.NG", "a block id against the first attention block (G or L)"),
    _b("kernel.py", "drafter_wide", "b.bid < L.NORM0", "a block id against the first norm block (L or N)"),
)


def _comparisons(tree: ast.AST) -> list[tuple[str, str, int, str]]:
    """(enclosing function, text, line, kind) of every comparison and clamp call in ``tree``, in the order Python
    evaluates them (an argument's before its call's): the order their ops are traced in."""
    out: list[tuple[str, str, int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        for child in ast.iter_child_nodes(node):
            visit(child, function)
        if isinstance(node, ast.Compare):
            out.append((function, ast.unparse(node), node.lineno, "compare"))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in CLAMPS:
            kind = "smin" if "min" in ast.unparse(node.func) else "smax"
            out.append((function, ast.unparse(node), node.lineno, kind))
    visit(tree, "<module>")
    return out


def found(files: tuple[str, ...] = FILES, here: Path = HERE) -> Counter[tuple[str, str, str]]:
    """Each (file, function, text) comparison of ``files``, counted: what ``TABLE`` must list."""
    out: Counter[tuple[str, str, str]] = Counter()
    for f in files:
        for function, text, _, _ in _comparisons(ast.parse((here / f).read_text(encoding="utf-8"))):
            if (f, function) not in HELPERS:
                out[(f, function, text)] += 1
    return out


OP_KIND = {"arith.cmpi": "compare", "arith.cmpf": "compare", "arith.minsi": "smin", "arith.maxsi": "smax"}


def met(ops: Iterable[Any], compares: dict[int, set], files: tuple[str, ...] = FILES, here: Path = HERE
        ) -> dict[tuple[str, str, str], set]:
    """What each (file, function, text) comparison met in a launch that recorded ``compares`` (``Launch.compares``)
    of a program whose ``ops`` (``Program.ops()``, in program order) are given: an op belongs to the comparison at
    the innermost line of its call chain in ``files``, the k-th op of a kind at a line to the (k mod n)-th of the n
    comparisons of that kind there (a line traced again, in a loop unrolled while tracing, repeats them in order).
    A comparison no op belongs to is absent: decided while tracing."""
    at: dict[tuple[str, int, str], list[tuple[str, str, str]]] = {}
    for f in files:
        for function, text, line, kind in _comparisons(ast.parse((here / f).read_text(encoding="utf-8"))):
            if (f, function) not in HELPERS:
                at.setdefault((f, line, kind), []).append((f, function, text))
    seen: dict[tuple[str, int, str], int] = {}
    out: dict[tuple[str, str, str], set] = {}
    for op in ops:
        kind = OP_KIND.get(op.name)
        if kind is None:
            continue
        site = next(((f, line, kind) for f, line in op.lines if (f, line, kind) in at), None)
        if site is None:
            continue
        k = seen.get(site, 0)
        seen[site] = k + 1
        key = at[site][k % len(at[site])]
        out.setdefault(key, set()).update(compares.get(id(op), set()))
    return out
