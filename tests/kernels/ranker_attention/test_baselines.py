"""The vendor's ragged path (cuDNN with sequence lengths) computes the ranker function on the history rows;
checked on CPU through XLA's implementation of the same call."""

import jax.numpy as jnp
import numpy as np
import pytest

from kerneltune.kernels.ranker_attention.baselines import cudnn_varlen, varlen_lengths
from kerneltune.kernels.ranker_attention.inputs import kept_pairs, ranker_bounds, varlen_pairs
from kerneltune.kernels.ranker_attention.reference import reference_f32

RNG = np.random.default_rng(0)


def test_lengths_of_a_serving_batch():
    b = np.array([[0, 3, 3, 5], [0, 100, 100, 128]], np.int32)
    q_len, kv_len = varlen_lengths(b)
    np.testing.assert_array_equal(q_len, [5, 128])
    np.testing.assert_array_equal(kv_len, [3, 100])
    # Queries [0, 5) against keys [0, 3): the ranker's pairs less each candidate's own key.
    assert varlen_pairs(b[:1]) == 15 == kept_pairs(b[:1]) - 2


@pytest.mark.parametrize("row", [[1, 3, 3, 5], [0, 3, 4, 6], [2, 4, 0, 2]])
def test_rows_it_cannot_express_are_refused(row):
    with pytest.raises(ValueError, match="cudnn_varlen: needs rows whose history starts at key 0"):
        varlen_lengths(np.array([[0, 3, 3, 5], row], np.int32))


def test_it_agrees_with_the_ranker_on_the_history_rows_only():
    b = ranker_bounds(3, 128, (20, 90), 17, RNG)
    q, k, v = (RNG.standard_normal((3, 128, h, 32)).astype(np.float32) for h in (4, 2, 2))
    ranker, _ = reference_f32(q, k, v, jnp.asarray(b), sm_scale=0.2)
    call, out = cudnn_varlen(q, k, v, b, 0.2, implementation="xla")
    history = np.arange(128)[None, :] < b[:, 1:2]
    np.testing.assert_allclose(out[history], np.asarray(ranker)[history], atol=1e-5)
    assert np.all(out[~history] == 0)
    # On a candidate row the ranker adds the row's own key, which the vendor's call leaves out.
    full = np.asarray(call.fn(q, k, v))
    candidates = ~history & (np.arange(128)[None, :] < b[:, 3:4])
    assert not np.allclose(full[candidates], np.asarray(ranker)[candidates], atol=1e-3)
