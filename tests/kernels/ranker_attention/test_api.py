import jax.numpy as jnp
import numpy as np
import pytest

from kerneltune.kernels.ranker_attention import KernelConfig, ranker_attention
from kerneltune.kernels.ranker_attention.reference import reference_f64

B, T, HQ, HKV, D = 2, 128, 2, 1, 64


def args(**over):
    rng = np.random.default_rng(0)
    a = dict(q=jnp.asarray(rng.standard_normal((B, T, HQ, D)), jnp.bfloat16),
             k=jnp.asarray(rng.standard_normal((B, T, HKV, D)), jnp.bfloat16),
             v=jnp.asarray(rng.standard_normal((B, T, HKV, D)), jnp.bfloat16),
             bounds=jnp.asarray([[0, 50, 50, 70], [3, 90, 100, 128]], jnp.int32))
    a.update(over)
    return a


@pytest.mark.parametrize(("over", "match"), [
    (dict(q=jnp.zeros((B, T, HQ), jnp.bfloat16)), "q: expected rank 4"),
    (dict(q=jnp.zeros((B, T, HQ, D), jnp.float32)), "q: dtype"),
    (dict(k=jnp.zeros((B, T, HKV, D), jnp.float16)), "k: dtype"),
    (dict(q=jnp.zeros((B, T, 3, D), jnp.bfloat16), k=jnp.zeros((B, T, 2, D), jnp.bfloat16),
          v=jnp.zeros((B, T, 2, D), jnp.bfloat16)), "GQA"),
    (dict(q=jnp.zeros((B, T, HQ, 96), jnp.bfloat16), k=jnp.zeros((B, T, HKV, 96), jnp.bfloat16),
          v=jnp.zeros((B, T, HKV, 96), jnp.bfloat16)), "head_dim"),
    (dict(bounds=jnp.zeros((B, 3), jnp.int32)), "bounds: expected shape"),
    (dict(bounds=jnp.asarray([[0, 50, 50, 70], [3, 90, 80, 128]], jnp.int32)), "overlap"),
    (dict(bounds=jnp.asarray([[0, 50, 50, 170], [0, 0, 0, 0]], jnp.int32)), "candidate_upper"),
    (dict(bounds=jnp.asarray([[60, 50, 70, 80], [0, 0, 0, 0]], jnp.int32)), "history_lower must be <="),
])
def test_bad_input_names_the_argument(over, match):
    with pytest.raises(ValueError, match=match):
        ranker_attention(**args(**over), interpret=True)


def test_tile_that_does_not_divide_t():
    with pytest.raises(ValueError, match="config: seq_len 128 is not a multiple of 2 \\* block_q = 256"):
        ranker_attention(**args(), config=KernelConfig(block_q=128, block_kv=64), interpret=True)


@pytest.mark.slow
def test_launch_api_in_interpret_mode_returns_out_and_natural_lse():
    a = args()
    out, lse = ranker_attention(**a, cap_method="clamp", cap=4.0, return_lse=True, interpret=True)
    assert out.shape == (B, T, HQ, D) and lse.shape == (B, HQ, T) and lse.dtype == jnp.float32
    f = [np.asarray(a[n].astype(jnp.float32)) for n in ("q", "k", "v")]
    ro, rl = reference_f64(*f, np.asarray(a["bounds"]), sm_scale=D ** -0.5, cap_method="clamp", cap=4.0)
    np.testing.assert_allclose(np.asarray(out.astype(jnp.float32)), ro, atol=3e-2)
    fin = np.isfinite(rl)
    np.testing.assert_allclose(np.asarray(lse)[fin], rl[fin], atol=1e-3)
