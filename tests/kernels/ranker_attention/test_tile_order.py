"""The longest-first ticket order deals out every tile exactly once: valid tiles of the longest rows
first, padding tiles last, on the adversarial bounds and on ragged batches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.inputs import adversarial_bounds, ranker_bounds
from kerneltune.kernels.ranker_attention.tile_order import TABLE_START, rank_table, tile_of_ticket


def valid_tiles(bounds, q_heads, n_q_tiles, rows_per_tile):
    """``plan``'s rule, tile by tile: a tile is valid if it overlaps the history or the candidates."""
    out = set()
    for b, (hl, hu, cl, cu) in enumerate(bounds):
        for q in range(n_q_tiles):
            base, end = q * rows_per_tile, (q + 1) * rows_per_tile
            if (hl < hu and base < hu and end > hl) or (cl < cu and base < cu and end > cl):
                out |= {(b * q_heads + h) * n_q_tiles + q for h in range(q_heads)}
    return out


def order(bounds, q_heads, seq_len, rows_per_tile=128, block_kv=128):
    batch, n_q_tiles = len(bounds), seq_len // rows_per_tile
    bj = jnp.asarray(bounds, jnp.int32)
    table = jnp.concatenate([jnp.zeros((TABLE_START,), jnp.int32),
                             rank_table(bj, q_heads=q_heads, rows_per_tile=rows_per_tile, block_kv=block_kv)])
    tiles = jax.vmap(lambda t: tile_of_ticket(t, table, bj, batch=batch, q_heads=q_heads, n_q_tiles=n_q_tiles,
                                              rows_per_tile=rows_per_tile, block_kv=block_kv))(
        jnp.arange(batch * q_heads * n_q_tiles, dtype=jnp.int32))
    return np.asarray(tiles), n_q_tiles


def check(bounds, q_heads, seq_len, block_kv=128):
    tiles, n_q_tiles = order(bounds, q_heads, seq_len, block_kv=block_kv)
    n = len(bounds) * q_heads * n_q_tiles
    assert sorted(tiles.tolist()) == list(range(n)), "a tile dealt twice or never"
    valid = valid_tiles(bounds, q_heads, n_q_tiles, 128)
    assert set(tiles[:len(valid)].tolist()) == valid, "a padding tile before a valid one"
    steps = [(-(-hu // block_kv) - hl // block_kv) if hl < hu else 0 for hl, hu, _, _ in bounds]
    first = [steps[t // (q_heads * n_q_tiles)] for t in tiles[:len(valid)]]
    assert first == sorted(first, reverse=True), "a shorter row's tile before a longer row's"


@pytest.mark.parametrize("seed", range(3))
def test_every_adversarial_row_dealt_once(seed):
    rng = np.random.default_rng(seed)
    bounds = adversarial_bounds(1024, rng)
    check(bounds, 2, 1024)
    check(bounds, 3, 1024, block_kv=64)


def test_ragged_batches_and_odd_rows():
    rng = np.random.default_rng(7)
    check(ranker_bounds(64, 1024, (256, 896), 128, rng), 4, 1024)
    # Candidates before the history, a gap between them, an empty row, spans sharing a tile.
    check(np.array([[600, 900, 100, 200], [0, 0, 0, 0], [0, 300, 300, 301], [5, 6, 1000, 1024],
                    [0, 1024, 0, 0], [130, 250, 250, 260]], np.int32), 2, 1024)


def test_a_single_row():
    check(np.array([[0, 700, 700, 828]], np.int32), 1, 1024)
