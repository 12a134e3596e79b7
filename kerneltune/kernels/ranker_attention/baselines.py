"""What a user could run instead of the ranker kernel, on the same inputs (GPU only).

Each baseline returns ``(Runnable, out)``: the call to time, in its framework, and ``out``, its
result as ``[B, T, Hq, D]`` float32 NumPy, for the correctness check. Mask-aware baselines compute
the ranker function; the dense ones (cuDNN / flash SDPA, JAX ``attention_mgpu``) compute plain
attention over all T keys and only bound what a dense kernel reaches. ``cudnn_varlen`` is the
vendor's ragged path: the ranker's history work with sequence lengths, a yardstick for ragged batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cap import CapMethod
from .inputs import on_history_rows


@dataclass(frozen=True)
class Runnable:
    """``fn(*args)`` launches the implementation once; ``framework`` says how to time it."""

    framework: str  # "torch" (CUDA events) or "jax" (CUPTI)
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


Baseline = tuple[Runnable, np.ndarray]


def _torch_qkv(q: Any, k: Any, v: Any, dtype: Any) -> tuple[Any, Any, Any]:
    import torch

    def conv(x: Any) -> Any:
        return torch.from_numpy(np.array(x.astype("float32"))).to("cuda", dtype).transpose(1, 2).contiguous()

    return conv(q), conv(k), conv(v)


def _back(out: Any) -> np.ndarray:
    return out.transpose(1, 2).float().cpu().numpy()


def flex_attention(q: Any, k: Any, v: Any, bounds: np.ndarray, scale: float, method: CapMethod,
                   cap: float | None) -> Baseline:
    """PyTorch FlexAttention, compiled; the block mask built once, outside the timed region; the
    cap as a score_mod."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    tq, tk, tv = _torch_qkv(q, k, v, torch.bfloat16)
    b = torch.from_numpy(np.asarray(bounds)).to("cuda")
    hl, hu, cl, cu = b[:, 0], b[:, 1], b[:, 2], b[:, 3]

    def mask_mod(bi: Any, h: Any, qi: Any, ki: Any) -> Any:
        q_hist = (qi >= hl[bi]) & (qi < hu[bi])
        q_cand = (qi >= cl[bi]) & (qi < cu[bi])
        return ((q_hist | q_cand) & (ki >= hl[bi]) & (ki < hu[bi])) | (q_cand & (qi == ki))

    def score_mod(s: Any, bi: Any, h: Any, qi: Any, ki: Any) -> Any:
        match method:
            case CapMethod.TANH | CapMethod.TANH_APPROX:
                return cap * torch.tanh(s / cap)
            case CapMethod.SOFTSIGN:
                return s / (1 + torch.abs(s) / cap)
            case CapMethod.CLAMP:
                return torch.clamp(s, -cap, cap)
        return s

    batch, _, t, _ = tq.shape
    block_mask = create_block_mask(mask_mod, batch, None, t, t, device="cuda")
    # A fresh compile per call: Dynamo recompiles flex_attention for every new score_mod closure and,
    # past its recompile limit (8), would run the ninth shape and cap eagerly (measured: 18 ms for 0.3).
    torch._dynamo.reset()
    fa = torch.compile(flex_attention)
    gqa = tq.shape[1] != tk.shape[1]

    def run() -> Any:
        return fa(tq, tk, tv, score_mod=None if method is CapMethod.NONE else score_mod, block_mask=block_mask,
                  scale=scale, enable_gqa=gqa)

    out = run()
    torch.cuda.synchronize()
    return Runnable("torch", run), _back(out)


def dense_sdpa(q: Any, k: Any, v: Any, scale: float, backend: str) -> Baseline:
    """Dense non-causal SDPA over all keys, no mask, no cap: ``backend`` is "cudnn" or "flash"."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tq, tk, tv = _torch_qkv(q, k, v, torch.bfloat16)
    chosen = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    gqa = tq.shape[1] != tk.shape[1]

    def run() -> Any:
        with sdpa_kernel([chosen]):
            return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, scale=scale, enable_gqa=gqa)

    out = run()
    torch.cuda.synchronize()
    return Runnable("torch", run), _back(out)


def composite(q: Any, k: Any, v: Any, bounds: np.ndarray, scale: float) -> Baseline:
    """What a careful user builds for cap ``none`` when every row has the same segments: one dense
    flash attention of all rows over the history keys with its LSE, merged with the candidates'
    own key; padding rows zeroed."""
    import torch

    hl, hu, cl, cu = (int(x) for x in np.asarray(bounds)[0])
    if not np.all(np.asarray(bounds) == np.asarray(bounds)[0]):
        raise ValueError("the composite needs the same bounds on every batch row")
    tq, tk, tv = _torch_qkv(q, k, v, torch.bfloat16)
    group = tq.shape[1] // tk.shape[1]
    kh = tk[:, :, hl:hu].repeat_interleave(group, 1).contiguous()
    vh = tv[:, :, hl:hu].repeat_interleave(group, 1).contiguous()
    t = tq.shape[2]
    rows = torch.arange(t, device="cuda")
    valid = (((rows >= hl) & (rows < hu)) | ((rows >= cl) & (rows < cu)))[None, None, :, None]

    def run() -> Any:
        o_h, lse = torch.ops.aten._scaled_dot_product_flash_attention(tq, kh, vh, 0.0, False, False,
                                                                        scale=scale)[:2]
        qc = tq[:, :, cl:cu].float()
        kc = tk[:, :, cl:cu].repeat_interleave(group, 1).float()
        vc = tv[:, :, cl:cu].repeat_interleave(group, 1).float()
        s_self = (qc * kc).sum(-1) * scale
        lse_c = lse[:, :, cl:cu]
        m = torch.maximum(lse_c, s_self)
        wh, ws = torch.exp(lse_c - m), torch.exp(s_self - m)
        merged = (wh[..., None] * o_h[:, :, cl:cu].float() + ws[..., None] * vc) / (wh + ws)[..., None]
        out = o_h.float()
        out[:, :, cl:cu] = merged
        return torch.where(valid, out, 0.0).to(torch.bfloat16)

    out = run()
    torch.cuda.synchronize()
    return Runnable("torch", run), _back(out)


def varlen_lengths(bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per batch row, the query and key lengths of attention with sequence lengths that does a ranker
    row's history work: queries ``[0, candidate_upper)``, keys ``[0, history_upper)``. Only rows whose
    history starts at key 0 and whose candidates follow it have that form (a serving batch's rows)."""
    b = np.asarray(bounds)
    if not (np.all(b[:, 0] == 0) and np.all(b[:, 2] == b[:, 1])):
        raise ValueError("cudnn_varlen: needs rows whose history starts at key 0 with the candidates right after it")
    return b[:, 3].astype(np.int32), b[:, 1].astype(np.int32)


def cudnn_varlen(q: Any, k: Any, v: Any, bounds: np.ndarray, scale: float,
                 implementation: str = "cudnn") -> Baseline:
    """cuDNN through ``jax.nn.dot_product_attention`` with sequence lengths: each row's queries against its
    history keys, no cap. It leaves out each candidate's own key, so it does less than the ranker (its
    output agrees with the ranker's on the history rows only; ``out`` is zero elsewhere, for the check).
    ``implementation="xla"`` runs the same call on any device (the CPU tests)."""
    import jax
    import jax.numpy as jnp

    q_len, kv_len = (jnp.asarray(x) for x in varlen_lengths(bounds))
    fn = jax.jit(lambda a, b, c: jax.nn.dot_product_attention(
        a, b, c, scale=scale, query_seq_lengths=q_len, key_value_seq_lengths=kv_len, implementation=implementation))
    return Runnable("jax", fn, (q, k, v)), on_history_rows(np.asarray(fn(q, k, v).astype(jnp.float32)), bounds)


def jax_attention_mgpu(q: Any, k: Any, v: Any, scale: float) -> Baseline:
    """JAX's own Mosaic GPU flash attention on the dense problem (f16: its SMEM is f16). It applies
    no softmax scale, so q is scaled once, outside the timed call."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    config = attention_mgpu.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2)
    args = (jnp.asarray(q.astype(jnp.float32) * scale, jnp.float16), *(jnp.asarray(x, jnp.float16) for x in (k, v)))
    fn = jax.jit(lambda a, b, c: attention_mgpu.attention(a, b, c, config))
    out = fn(*args)
    return Runnable("jax", fn, args), np.asarray(out.astype(jnp.float32))
