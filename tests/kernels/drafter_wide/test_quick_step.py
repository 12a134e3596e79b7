"""The kernel's own compiled program in the quick loop (issue 98): one small step of all four ranks through the CPU
interpreter, judged as ``verify --interpret`` judges (every element of h_out and of the K/V rows written against the
float64 model, no other slot touched, the ranks equal), and every comparison it runs met just below, at and just
above its bound (``bounds.TABLE``). A bug costs a minute to find here, not a verify.

The shape reaches what a bound needs on both sides: 512 threads (8 waves over 6 rows a request: waves 5, 6, 7 below,
at and past the rows; 8 waves over a merge task's 4 heads), 18 rows (a second token tile: rows 17, 18, 19 against
n_rows), three requests over 32 attention blocks (30 busy: idle blocks 30 and 31), contexts 511, 512 and 526 (the
window's first key at 0 and 1; block edges one before, at and after the first key and the first row)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kerneltune.kernels.drafter_wide import bounds

pytestmark = pytest.mark.xdist_group("drafter-interpret")

ARCH = "gfx942"
SHAPE = {"requests": 3, "qpr": 6, "context": (511, 512, 526), "layers": 1, "w_na": 32, "threads": 512}


@pytest.fixture(scope="module")
def run():
    from kerneltune.kernels.drafter_wide import interpret_check as ic
    from kerneltune.kernels.drafter_wide.error_model import element_model
    from kerneltune.kernels.drafter_wide.interpreted import run_step

    key = ic._key(SHAPE)
    layout, dims, weights, inputs = ic._setup(key)
    program = ic._program(Path(os.environ["KERNELTUNE_CACHE"]) / "interpret", key, ARCH)
    compares: dict[int, set] = {}
    result = run_step(program, layout, dims, weights, inputs, ARCH, compares=compares)
    return {"result": result, "model": element_model(dims, weights, inputs), "dims": dims, "weights": weights,
            "inputs": inputs, "layout": layout, "met": bounds.met(program.ops(), compares), "ops": program.ops()}


def test_the_step_ends_with_every_health_word_clear(run):
    assert run["result"].health == [[0, 0, 0, 0]] * 4


def test_h_out_and_the_cache_rows_against_the_float64_model_as_verify_judges_them(run):
    from kerneltune.kernels.drafter_wide.error_model import judge_step

    judged = judge_step(run["result"].h_out, run["result"].caches, run["model"])
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]


def test_every_bound_is_met_on_the_sides_the_table_names_and_no_other(run):
    """A bound's index just below (-1), at (0) and just above (+1) (a stride's: -2, 0, +2); a select equal and not
    (0, 1); a float guard both ways. A side the table leaves out must not be met either: the table is then stale."""
    met, missing, stale = run["met"], [], []
    for b in bounds.TABLE:
        if b.kind not in ("bound", "select"):
            continue
        got = met.get(b.key, set())
        if b.kind == "select" and not b.sides <= {False, True}:
            got = {min(abs(x), 1) for x in got}  # equal, or not
        want = b.recorded
        if not want <= got:
            missing.append(f"{b.key}: wants {sorted(want)}, met {sorted(got)}")
        elif b.kind == "bound" and (got & {-1, 0, 1}) - want:
            stale.append(f"{b.key}: met {sorted(got)} beyond its sides {sorted(want)} ({b.why})")
    assert not missing, missing
    assert not stale, stale


def test_a_traced_comparison_leaves_no_op_and_a_bound_one(run):
    """The table's kinds hold: every ``bound`` and ``select`` entry is an op of the program, no ``trace`` or
    ``merged`` entry is."""
    met = run["met"]
    assert not [b.key for b in bounds.TABLE if b.kind in ("trace", "merged") and b.key in met]
    assert not [b.key for b in bounds.TABLE if b.kind in ("bound", "select") and b.key not in met]


def test_the_edge_rows_make_eps_and_the_clamps_matter(run, monkeypatch):
    """The step's token row 0 is scaled by 2**-10 and every 61st gate and up row by 8 (``interpreted.setup``): the
    float64 model with RMSNorm's eps off by ten, or without the SwiGLU's clamps, no longer passes the kernel's
    outputs (without those rows, neither constant would decide any check)."""
    import dataclasses

    import torch

    from kerneltune.kernels.drafter_wide import error_model
    from kerneltune.kernels.drafter_wide.error_model import element_model, judge_step

    def failed(model) -> list[str]:
        return [str(j) for j in judge_step(run["result"].h_out, run["result"].caches, model) if not j.ok]

    wrong_eps = element_model(dataclasses.replace(run["dims"], eps=1e-5), run["weights"], run["inputs"])
    assert failed(wrong_eps)
    monkeypatch.setattr(error_model, "swiglu_clamped", lambda g, u: g * torch.sigmoid(1.702 * g) * (u + 1.0))
    assert failed(element_model(run["dims"], run["weights"], run["inputs"]))


def _stored(launch, name: str):
    """Each byte of allocation ``name`` that the launch stored (the weak memory model stamps every store)."""
    import numpy as np

    a = next(a for a in launch.memory.allocations if a.name == name)
    return np.zeros(a.data.size, bool) if a.sid is None else a.sid != 0


def test_no_row_past_the_steps_rows_is_written(run):
    """Every buffer kept a row a token (the scratch's qkv, act, x8 and h8 rows, the reduce-scatter pairs and the
    all-gathered rows in the symmetric regions) is written for the step's rows only: a comparison against the row
    count moved by one (``row <= n_rows``) writes row n_rows, which only 64 rows would otherwise show (past the
    region's end)."""
    from kerneltune.kernels.drafter_wide import indexing as ix
    from kerneltune.kernels.drafter_wide.layout import MAX_ROWS, TP

    L, launch = run["layout"], run["result"].launch
    n, m = int(run["inputs"].x.shape[0]), L.model
    spans = {"qkv": 2 * L.QKV_N, "act": 2 * L.IR, "x8": m.hidden, "h8": m.hidden}
    past = []
    for r in range(TP):
        scratch, sym = _stored(launch, f"rank {r} scratch"), _stored(launch, f"rank {r} sym")
        for layer in range(m.layers):
            for name, span in spans.items():
                at = ix.scratch_at(L, layer, name)
                rows = [row for row in range(n, MAX_ROWS) if scratch[at + row * span:at + (row + 1) * span].any()]
                past += [f"rank {r} layer {layer} {name} rows {rows}"] if rows else []
        for row in range(n, MAX_ROWS):
            for region in (L.Y_RSO, L.Y_RSD):
                if ix.owner_rank(row) == r and any(sym[ix.rs_pair(L, region, src, row, 0, 0):
                                                       ix.rs_pair(L, region, src, row, 0, L.ROW_PAIRS)].any()
                                                   for src in range(TP)):
                    past.append(f"rank {r} reduce-scatter row {row}")
            for region in (L.Y_AGX, L.Y_AGH):
                if sym[ix.ag_x8_row(L, region, row):ix.ag_x8_row(L, region, row + 1)].any():
                    past.append(f"rank {r} all-gathered row {row}")
    assert n < MAX_ROWS and not past, past
