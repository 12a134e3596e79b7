"""Every comparison the kernel makes against a bound (``bounds.TABLE``, checked against the source here), and its
index placed just below, at and just above the bound: on integers for ``indexing.py``'s functions (quick), and in
the compiled program for every comparison it runs (the interpreter records what each met:
``test_bounds_compiled.py``)."""

from __future__ import annotations

from collections import Counter

import pytest

from kerneltune.kernels.drafter_wide import bounds
from kerneltune.kernels.drafter_wide import indexing as ix
from kerneltune.kernels.drafter_wide.layout import DrafterLayout

L = DrafterLayout(qpr=4)
W, B = L.WINDOW, L.BLOCK


def test_the_table_lists_every_comparison_of_the_kernels_source_and_nothing_else():
    table = Counter({b.key: b.count for b in bounds.TABLE})
    found = bounds.found()
    new = sorted(k for k in found if found[k] != table.get(k))
    gone = sorted(k for k in table if k not in found)
    assert not new, f"comparisons not in bounds.TABLE (enter each with its kind and sides): {new}"
    assert not gone, f"bounds.TABLE entries no longer in the source: {gone}"
    assert len({b.key for b in bounds.TABLE}) == len(bounds.TABLE)


def test_the_table_reader_sees_a_new_comparison(tmp_path):
    """The check above can fail: a comparison added to a copy of a role is found, with its function."""
    src = (bounds.HERE / "merge_role.py").read_text(encoding="utf-8")
    (tmp_path / "merge_role.py").write_text(src + "\n\ndef f(a, b):\n    return a <= b\n", encoding="utf-8")
    assert bounds.found(("merge_role.py",), tmp_path) - bounds.found(("merge_role.py",)) == Counter(
        {("merge_role.py", "f", "a <= b"): 1})


def test_every_entry_says_what_it_compares_and_why_a_side_is_left_out():
    for b in bounds.TABLE:
        assert b.kind in ("bound", "select", "trace", "merged") and b.what, b
        assert b.sides <= bounds.ALL | {-2, 2, False, True}, b
        if b.kind == "bound" and not b.sides >= bounds.ALL:
            assert b.why, f"{b.key}: sides {sorted(b.sides)} without a reason for the others"


# indexing.py on integers: each comparison's index just below, at and just above its bound, against its definition.
def test_key_seen_at_each_of_its_four_bounds():
    """A row at ``p`` sees the keys of ``[lo, hi]`` in ``(p - WINDOW, p]``: each bound decides alone (the others wide
    open), the key one before, at and one after it."""
    assert [ix.key_seen(L, k, 60, 50, 10 ** 6) for k in (49, 50, 51)] == [False, True, True]  # key >= lo
    assert [ix.key_seen(L, k, 60, 0, 50) for k in (49, 50, 51)] == [True, True, False]  # key <= hi
    assert [ix.key_seen(L, k, 100 + W, 0, 10 ** 6) for k in (99, 100, 101)] == [False, False, True]  # > p - W
    assert [ix.key_seen(L, k, 100, 0, 10 ** 6) for k in (99, 100, 101)] == [True, True, False]  # key <= p


@pytest.mark.parametrize("edge", ["p_last - W", "lo", "hi", "p_first"])
def test_interior_at_each_of_its_four_bounds(edge):
    """A block is interior iff every key of it is seen by every row: brute force over the block's keys, with the
    compared bound placed one key before, at and after each block edge."""
    outcomes = set()
    for shift in (-1, 0, 1):
        for block in (9, 10):
            first, last = block * B, block * B + B - 1
            p_first, p_last, lo, hi = 200, 203, 0, 10 ** 6  # the others open: every key of blocks 9 and 10 seen
            if edge == "p_last - W":
                p_last = first + W + shift
                p_first = p_last - 3
            elif edge == "lo":
                lo = first + shift
            elif edge == "hi":
                hi = last + shift
            else:
                p_first = last + shift
                p_last = p_first + 3
            rows = range(p_first, p_last + 1)
            want = all(ix.key_seen(L, k, p, lo, hi) for k in range(first, last + 1) for p in rows)
            assert bool(ix.interior(L, block, p_first, p_last, lo, hi)) == want, (edge, shift, block)
            outcomes.add(want)
    assert outcomes == {False, True}  # the bound decides: interior on one side, not on the other


def test_the_window_starts_at_key_zero_below_and_at_its_bound():
    assert [ix.window(L, W - 1 + d, W + 10)[0] for d in (-1, 0, 1)] == [0, 0, 1]
    lo, hi, b0, b1 = ix.window(L, W + B - 1, W + B + 5)
    assert (lo, hi, b0, b1) == (B, W + B + 4, 1, (W + B + 4) // B)
    assert [ix.window(L, W + B - 1 + d, 10 ** 4)[2] for d in (-1, 0, 1)] == [0, 1, 1]  # the first block's edge


@pytest.mark.parametrize("n_rows", [15, 16, 17, 31, 32, 33, 64])
def test_a_tile_row_repeats_the_last_row_from_the_bound_on(n_rows):
    for t in range(ix.tile_count(n_rows)):
        got = [ix.tile_row(t, l16, n_rows) for l16 in range(16)]
        assert got == [min(16 * t + l16, n_rows - 1) for l16 in range(16)], (n_rows, t)
