"""The TP4 launch emulated block by block on the CPU against the float64 model: every pair of layout
values of the default space, several shapes, two layers; a wrong flag tag and a wrong peer offset, each
caught (a reported deadlock, never a hang), and a wrong LDS offset caught in h_out. In each arch's
8-bit and bf16 formats, h_out within the derived bound, and an operand's scale left out caught."""

import dataclasses

import numpy as np
import pytest

from kerneltune.kernels.drafter_wide import indexing as ix
from kerneltune.kernels.drafter_wide.emulation import Deadlock, Launch, max_relative_error, shard_weights
from kerneltune.kernels.drafter_wide.layout import DrafterLayout, LayoutError, ModelDims
from kerneltune.kernels.drafter_wide.numerics import bounded_reference, frobenius_error
from kerneltune.kernels.drafter_wide.reference import Dims, forward_f64, make_inputs, make_weights
from kerneltune.tuning.space import load_space

from ...pairwise import pairwise_cover
from ...paths import SPACES

# One worker at a time runs the full-size model (GBs of float64 weights): `-n 2 --dist loadgroup`.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drafter-full-model")]
EXACT = 1e-12  # float64 on both sides, summed in a different order


@pytest.fixture(scope="module")
def weights():
    w = make_weights(Dims(layers=1), seed=0)
    return w, shard_weights(Dims(layers=1), w)


def emulate(layout, dims, weights, requests, qpr, context, seed=1, faults=None):
    w, shards = weights
    inputs = make_inputs(dims, requests=requests, qpr=qpr, context=context, seed=seed)
    result = Launch(layout, dims, w, inputs, faults=faults, shards=shards).run()
    return result, forward_f64(dims, w, inputs).numpy()


def default_layouts(qpr):
    space = load_space(SPACES / "drafter_wide.toml", {"ng", "threads", "w_na"},
                       {"arch", "requests", "qpr", "context", "layers"})
    for tiles in space.configs({"arch": "gfx942", "requests": 64 // qpr, "qpr": qpr, "context": 0, "layers": 1}):
        try:
            yield tiles, DrafterLayout(**tiles, qpr=qpr)
        except LayoutError:
            continue


def test_every_pair_of_layout_values_of_the_default_space_matches_the_model(weights):
    dims = Dims(layers=1)
    w, shards = weights
    # Three requests: one young, one straddling a page edge, one past the 4096-token window.
    inputs = make_inputs(dims, requests=3, qpr=4, context=[5, 94, 4500], seed=1)
    ref = forward_f64(dims, w, inputs).numpy()
    # Each parameter addresses one role's index arithmetic (NG and THREADS the GEMV rows and K split, W_NA the
    # attention tasks) and the roles meet two at a time (the block ids: NORM0 = NG + W_NA): pairs of the tiles'
    # values catch a fault in one role or where two meet, at half the full-size emulations of the whole product
    # (the suite's critical path).
    chosen = pairwise_cover(list(default_layouts(qpr=4)), lambda layout: layout[0])
    assert len(chosen) >= 12, [t for t, _ in chosen]
    for tiles, layout in chosen:
        result = Launch(layout, dims, w, inputs, shards=shards).run()
        for rank, h in enumerate(result.h_out):
            assert max_relative_error(h, ref) < EXACT, (tiles, rank)


@pytest.mark.parametrize(("requests", "qpr", "context"), [
    (1, 1, [0]),  # one token, empty cache
    (16, 4, [4096 + 16 * i for i in range(16)]),  # the 64-row maximum, every window full
    (8, 8, [3, 17, 33, 250, 1000, 4095, 4097, 6000]),
    (9, 7, [0, 5, 15, 16, 300, 4095, 4096, 4100, 6000]),  # the seed's 7 rows a request: 63 rows, not a divisor of 64
])
def test_shapes_match_the_model(weights, requests, qpr, context):
    result, ref = emulate(DrafterLayout(qpr=qpr), Dims(layers=1), weights, requests, qpr, context)
    assert all(max_relative_error(h, ref) < EXACT for h in result.h_out)


def test_two_layers_reuse_the_flags_by_tag():
    dims = Dims(hidden=3072, layers=2)
    layout = DrafterLayout(qpr=2, model=ModelDims(hidden=3072, layers=2))
    w = make_weights(dims, seed=3)
    result, ref = emulate(layout, dims, (w, shard_weights(dims, w)), requests=3, qpr=2, context=[7, 60, 200])
    assert all(max_relative_error(h, ref) < EXACT for h in result.h_out)


def test_a_wrong_flag_tag_is_a_reported_deadlock(weights):
    with pytest.raises(Deadlock) as e:
        emulate(DrafterLayout(qpr=2), Dims(layers=1), weights, 2, 2, [30, 100], faults={"tag:x8f": -1})
    # The G blocks wait at the site the kernel's health buffer would name for them.
    assert any(w.startswith("rank 0 block 0 (G): site 1 ") and "x8f" in w and "for tag 9" in w for w in e.value.waits)


def test_a_wrong_peer_offset_is_caught(weights):
    # Reduce-scatter pairs written one pair off: the owner's tagged words never arrive where it
    # polls, so the norm blocks wait forever — reported, with where they wait.
    with pytest.raises(Deadlock) as e:
        emulate(DrafterLayout(qpr=2), Dims(layers=1), weights, 2, 2, [30, 100], faults={"offset:rs": 8})
    assert any("(N): site 8 " in w and "reduce-scatter" in w for w in e.value.waits)


def test_a_wrong_lds_offset_is_caught(weights):
    # The GEMV tiles' partial sums read one LDS word off: other lanes' values (and, past the last
    # wave's tile, unwritten NaN words) end up in h_out.
    result, ref = emulate(DrafterLayout(qpr=2), Dims(layers=1), weights, 2, 2, [30, 100], faults={"offset:lds": 1})
    assert all(max_relative_error(h, ref) > 1e-3 for h in result.h_out)


@pytest.fixture(scope="module")
def small():
    """Half the hidden size: the schedule tests emulate many launches."""
    dims = Dims(hidden=3072, layers=1)
    w = make_weights(dims, seed=4)
    inputs = make_inputs(dims, requests=3, qpr=2, context=[7, 60, 200], seed=5)
    return dims, DrafterLayout(qpr=2, model=ModelDims(hidden=3072)), w, shard_weights(dims, w), inputs, \
        forward_f64(dims, w, inputs).numpy()


def schedules_caught(small, faults, seeds=range(3)):
    """For the fixed order, then each seeded schedule: was the fault caught (a deadlock or a wrong h_out)?"""
    dims, layout, w, shards, inputs, ref = small
    caught = []
    for seed in (None, *seeds):
        try:
            result = Launch(layout, dims, w, inputs, faults=faults, shards=shards, schedule_seed=seed).run()
        except Deadlock:
            caught.append(True)
            continue
        caught.append(not all(max_relative_error(h, ref) < EXACT for h in result.h_out))
    return caught[0], caught[1:]


def test_seeded_schedules_interleave_differently_and_all_match(small):
    dims, layout, w, shards, inputs, ref = small
    orders = set()
    for seed in (None, 0, 1):
        result = Launch(layout, dims, w, inputs, shards=shards, schedule_seed=seed).run()
        assert all(max_relative_error(h, ref) < EXACT for h in result.h_out), seed
        orders.add(result.schedule)
    assert len(orders) == 3  # three different interleavings of the blocks


def test_a_missing_wait_is_caught_in_every_schedule(small):
    # Attention blocks that read qkv without waiting for its flags read it before the G blocks wrote it.
    fixed, seeded = schedules_caught(small, {"nowait:qkvf": 1})
    assert fixed and all(seeded), seeded


def test_a_publish_ahead_of_its_data_is_caught_by_seeded_schedules_only(small):
    # A flag published before its values are stored: in the fixed order the publisher always stores
    # before anyone else runs, so only another interleaving lets a reader in between.
    fixed, seeded = schedules_caught(small, {"early:qkvf": 1})
    assert not fixed and all(seeded), seeded


@pytest.fixture(scope="module")
def small_formats(small):
    """The small model's launch in each arch's formats, and the bound on its error."""
    dims, _, w, _, inputs, _ = small
    ref, bound = bounded_reference(dims, w, inputs)
    shards = {arch: shard_weights(dims, w, arch) for arch in ("gfx942", "gfx950")}
    return shards, ref.numpy(), bound


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_kernels_formats_stay_within_the_derived_bound(small, small_formats, arch):
    dims, layout, w, _, inputs, _ = small
    shards, ref, bound = small_formats
    result = Launch(layout, dims, w, inputs, shards=shards[arch], numbers=arch).run()
    errors = [frobenius_error(h, ref) for h in result.h_out]
    # Rounded (8-bit: percents, where float64 is exact), and within the bound written before it was measured.
    assert all(1e-2 < e < bound for e in errors), (errors, bound)
    assert len(set(errors)) == 1  # every rank gathers the same bf16 h_out


@pytest.mark.parametrize("operand", ["w", "x8", "a8", "act"])
def test_an_8_bit_operand_read_without_its_scale_is_caught(small, small_formats, operand):
    dims, layout, w, _, inputs, _ = small
    shards, ref, bound = small_formats
    result = Launch(layout, dims, w, inputs, shards=shards["gfx942"], numbers="gfx942",
                    faults={f"noscale:{operand}": 1}).run()
    assert all(frobenius_error(h, ref) > bound for h in result.h_out)


def _caught(small, expect_cache):
    """Run the small launch in float64: was the mutation caught (a deadlock, a wrong h_out, or a KV cache
    that differs from the reference's after the step)?"""
    dims, layout, w, shards, inputs, ref = small
    try:
        result = Launch(layout, dims, w, inputs, shards=shards).run()
    except Deadlock:
        return True
    if not all(max_relative_error(h, ref) < EXACT for h in result.h_out):
        return True
    for rank, per_layer in enumerate(result.caches):
        for flat, (k, v) in zip(per_layer, expect_cache, strict=True):
            want = np.stack([k[:, :, rank].numpy(), v[:, :, rank].numpy()]).ravel()
            if not np.allclose(flat, want, rtol=0, atol=EXACT):
                return True
    return False


@pytest.fixture(scope="module")
def small_caches(small):
    dims, _, w, _, inputs, _ = small
    caches = []
    forward_f64(dims, w, inputs, caches=caches)
    return caches


def test_the_unmutated_launch_leaves_the_references_kv_cache(small, small_caches):
    assert not _caught(small, small_caches)


# One mutation per family of indexing.py's addresses; each must make the emulation fail.
MUTANTS = {
    "page table": ("page_at", lambda f: lambda L, r, width, key: f(L, r, width, key) - 4),  # the entry before
    "slot in page": ("page_slot", lambda f: lambda L, page, key: f(L, page, key) + 1),
    "new key's slot": ("slot_at", lambda f: lambda row: f(row ^ 1)),  # the neighbouring row's slot
    "cos_sin": ("rope_at", lambda f: lambda L, row, sin, j: f(L, row, 1 - sin, j)),  # cos and sin swapped
    "peer offset": ("rs_pair", lambda f: lambda L, reg, src, row, c0, p: f(L, reg, src, row, c0, p) - 4 * p),
    "flag index": ("flag_word", lambda f: lambda L, name, index: f(L, name, 2 * index)),
    "request length": ("seq_len_at", lambda f: lambda r: f(max(r - 1, 0))),  # the previous request's seq_lens
    "LDS tile": ("tile_v", lambda f: lambda L, pair, key, dim: f(L, pair, key, dim) - L.BLOCK * L.K_ROW),  # V on K
    "staged row": ("staged", lambda f: lambda L, i, value, dim: f(L, i, 0, dim)),  # the new V over the new K
}
# (A mutation the kernel's writer and reader share consistently, e.g. K and V swapped in both, is no bug:
# the LDS mutants alias two regions.)


@pytest.mark.parametrize("family", MUTANTS)
def test_a_mutated_address_is_caught(small, small_caches, monkeypatch, family):
    name, mutant = MUTANTS[family]
    monkeypatch.setattr(ix, name, mutant(getattr(ix, name)))
    assert _caught(small, small_caches)


def test_interior_blocks_need_no_mask_and_edge_blocks_do(small, monkeypatch):
    """Masking every block changes nothing (the interior rule is exact); masking none counts keys outside
    a row's window or past its position. The small shape has both kinds (cached blocks, the new rows')."""
    dims, layout, w, shards, inputs, ref = small
    kinds = set()
    interior = ix.interior

    def recorded(*args):
        kinds.add(bool(interior(*args)))
        return interior(*args)

    monkeypatch.setattr(ix, "interior", recorded)
    plain = Launch(layout, dims, w, inputs, shards=shards).run().h_out
    assert kinds == {True, False}
    masked = Launch(layout, dims, w, inputs, shards=shards, faults={"mask": 1}).run().h_out
    assert all(np.array_equal(a, b) for a, b in zip(plain, masked, strict=True))
    unmasked = Launch(layout, dims, w, inputs, shards=shards, faults={"mask": -1}).run().h_out
    assert all(max_relative_error(h, ref) > 1e-3 for h in unmasked)


def test_the_request_length_comes_from_seq_lens(small):
    """A seq_lens one short hides each request's newest key from the last row: the output changes."""
    dims, layout, w, shards, inputs, ref = small
    launch = Launch(layout, dims, w, inputs, shards=shards)
    launch.host = dataclasses.replace(launch.host, seq_lens=launch.host.seq_lens - 1)
    assert all(max_relative_error(h, ref) > 1e-6 for h in launch.run().h_out)


def test_a_chunk_of_many_blocks_streams_them_all_through_the_two_tile_pairs(small):
    """Long requests: each chunk spans several 16-key blocks, so block it + 2 loads into the pair block it used
    (the small shapes' chunks hold one or two blocks, which the first two fills cover)."""
    dims, layout, w, shards, _, _ = small
    context = [3000, 3600, 4500]  # past the 4096-key window too
    inputs = make_inputs(dims, requests=3, qpr=2, context=context, seed=6)
    cpr = ix.chunks_per_request(layout, 3 * 2)
    counts = []
    for ctx in context:
        *_, b0, b1 = ix.window(layout, ctx, ctx + 2)
        counts += [ix.chunk(c, b1 - b0 + 1, cpr)[1] for c in range(cpr)]
    assert min(counts) >= 3, counts
    result = Launch(layout, dims, w, inputs, shards=shards).run()
    ref = forward_f64(dims, w, inputs).numpy()
    assert all(max_relative_error(h, ref) < EXACT for h in result.h_out)
