"""kernel.py itself, run by the CPU interpreter on the small model: all four ranks of a two-layer step
against the float64 model and the emulation, the KV cache it writes, and the same bits in another
interleaving of the blocks. One capture and one step are shared by the module (about a minute)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drafter-interpret")]

ARCH = "gfx942"
# Two layers (a stale tag of the previous layer shows), two rows per request (this step's causal keys),
# contexts that end inside a paged block (30, 5), span several blocks per chunk (700: 32 window blocks
# over 8 chunks, so a chunk prefetches), and pass the window's edge (700 > 512).
REQUESTS, QPR, CONTEXT, LAYERS, W_NA = 4, 2, [30, 100, 5, 700], 2, 32


@pytest.fixture(scope="module")
def run():
    from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation
    from kerneltune.kernels.drafter_wide.error_model import element_model
    from kerneltune.kernels.drafter_wide.interpreted import capture_program, run_step, small_dims, small_layout
    from kerneltune.kernels.drafter_wide.numerics import bounded_reference
    from kerneltune.kernels.drafter_wide.reference import make_inputs, make_weights

    layout, dims = small_layout(qpr=QPR, layers=LAYERS, w_na=W_NA), small_dims(LAYERS)
    program = capture_program(layout, ARCH, Path(os.environ["KERNELTUNE_CACHE"]) / "interpret")
    weights = make_weights(dims, 0)
    inputs = make_inputs(dims, REQUESTS, QPR, CONTEXT, 1)
    result = run_step(program, layout, dims, weights, inputs, ARCH)
    emulated = Emulation(layout, dims, weights, inputs, numbers=ARCH).run()
    ref, bound = bounded_reference(dims, weights, inputs)
    return {"program": program, "layout": layout, "dims": dims, "weights": weights, "inputs": inputs,
            "result": result, "emulated": emulated, "ref": ref.numpy(), "bound": bound,
            "model": element_model(dims, weights, inputs)}


def test_the_launch_ends_with_every_health_word_clear(run):
    assert run["result"].health == [[0, 0, 0, 0]] * 4


def _judged(run, emulated: bool) -> list:
    from kerneltune.kernels.drafter_wide.error_model import judge_step

    e = (run["emulated"].h_out, run["emulated"].caches) if emulated else None
    return judge_step(run["result"].h_out, run["result"].caches, run["model"], e)


def test_every_rank_holds_the_float64_models_rows_and_cache_within_each_elements_bound(run):
    """``verify --interpret``'s checks (``error_model.judge_step``): h_out and every K/V row the step writes,
    each element within the formats' bound of the float64 model's, every rank's copy the same, no other slot
    touched; the old global bound kept beside them."""
    from kerneltune.kernels.drafter_wide.numerics import frobenius_error

    judged = _judged(run, emulated=False)
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]
    assert max(frobenius_error(h, run["ref"]) for h in run["result"].h_out) <= run["bound"]


def test_the_kernel_and_the_emulation_differ_only_by_tie_breaking(run):
    """Their float32 sums differ in order, so an 8-bit or bf16 rounding at a tie may go the other way and the
    flips carry on: every element within ``error_model.TIE_Z`` of its σ, and the rms over all and each row within
    ``tie_rms`` / ``tie_row_rms`` of the layers before (h_out after both, each layer's cache rows)."""
    judged = [j for j in _judged(run, emulated=True) if "emulation" in j.what]
    assert len(judged) == 3 * (1 + LAYERS) and all(j.ok for j in judged), [str(j) for j in judged if not j.ok]


def test_this_steps_keys_and_values_land_in_their_slots_and_nowhere_else(run):
    import torch

    from kerneltune.kernels.drafter_wide import indexing as ix
    from kerneltune.kernels.drafter_wide.host_inputs import host_arrays

    layout, inputs = run["layout"], run["inputs"]
    host = host_arrays(layout, inputs, run["dims"].rope_theta)
    hd = layout.model.head_dim
    for rank in range(4):
        for layer in range(LAYERS):
            got = run["result"].caches[rank][layer].ravel()
            want = run["emulated"].caches[rank][layer].ravel()
            kv = torch.stack([inputs.k_cache[layer][:, :, rank], inputs.v_cache[layer][:, :, rank]])
            before = kv.to(torch.bfloat16).double().numpy().ravel()
            written = np.zeros(got.size, bool)
            nblk = inputs.k_cache[layer].shape[0]
            for slot in host.slots:
                for value in (0, 1):
                    at = ix.cache_at(layout, int(slot), nblk, value, 0) // 2
                    written[at:at + hd] = True
            np.testing.assert_array_equal(got[~written], before[~written])
            assert np.isfinite(got[written]).all() and np.isfinite(want[written]).all()


def test_another_interleaving_of_the_blocks_gives_the_same_bits(run):
    """A random order of the fixed order's batches (seed 7), the weak model on: a third of the time of every block
    on its own, which verify's PCT and random orders run (``interpret_check``)."""
    from kerneltune.kernels.drafter_wide.interpreted import BATCH, run_step

    again = run_step(run["program"], run["layout"], run["dims"], run["weights"], run["inputs"], ARCH, seed=7,
                     batch=BATCH)
    assert again.launch.resumes != run["result"].launch.resumes  # the blocks did run in another order
    for a, b in zip(again.h_out, run["result"].h_out, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_interpreter_reaches_the_kernels_lines(run):
    from kerneltune.kernels.drafter_wide.kernel import KERNEL_FILES

    every, ran, missed = 0, 0, []
    for file in KERNEL_FILES:
        lines, hit = run["program"].coverage(file)
        every, ran = every + len(lines), ran + len(hit)
        missed += [f"{file}:{n}" for n in sorted(lines - hit)]
    print(f"the kernel's files: {ran} of {every} lines that emit IR ran; not run: {missed}")
    assert ran >= 0.95 * every, f"{ran}/{every} of the kernel's lines ran; missed {missed}"


def test_seven_rows_a_request_the_seeds_case():
    """QPR = 7 does not divide the 64-row maximum: requests of 7 rows, merged and owned as any other."""
    from kerneltune.kernels.drafter_wide.emulation import Launch as Emulation
    from kerneltune.kernels.drafter_wide.error_model import element_model, judge_step
    from kerneltune.kernels.drafter_wide.interpreted import capture_program, run_step, small_dims, small_layout
    from kerneltune.kernels.drafter_wide.reference import make_inputs, make_weights

    layout, dims = small_layout(qpr=7, layers=1, w_na=16), small_dims(1)
    program = capture_program(layout, ARCH, Path(os.environ["KERNELTUNE_CACHE"]) / "interpret")
    weights = make_weights(dims, 0)
    inputs = make_inputs(dims, 2, 7, [30, 300], 1)
    got = run_step(program, layout, dims, weights, inputs, ARCH)
    assert got.health == [[0, 0, 0, 0]] * 4
    emulated = Emulation(layout, dims, weights, inputs, numbers=ARCH).run()
    judged = judge_step(got.h_out, got.caches, element_model(dims, weights, inputs), (emulated.h_out, emulated.caches))
    assert all(j.ok for j in judged), [str(j) for j in judged if not j.ok]
