"""References of one drafter step: a float64 unsharded model, and the TP4 computation as the
megakernel does it (8-bit weights and activations with scales, bf16 where it rounds, partial
sums reduce-scattered to row owners and summed).

A step runs ``n_rows`` draft rows (``qpr`` per request) through every layer: input RMSNorm →
QKV → per-head q/k RMSNorm → RoPE at the row's position → K/V written to the paged cache →
sliding-window attention over the request's cached keys (each row sees keys at positions
``(p - window, p]``, the drafts before it included) → o_proj → residual → post RMSNorm →
gate/up → clamped SwiGLU ``g·sigmoid(1.702 g)·(u + 1)`` with ``g ≤ 7`` and ``u ∈ [-7, 7]`` →
down → residual; then the final RMSNorm gives ``h_out``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

F8_MAX = {"gfx942": 240.0, "gfx950": 448.0}  # e4m3fnuz / e4m3fn
F8_DTYPE = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}


@dataclass(frozen=True)
class Dims:
    hidden: int = 6144
    q_heads: int = 64  # all ranks
    kv_heads: int = 4
    head_dim: int = 128
    intermediate: int = 12288
    layers: int = 1
    window: int = 4096
    kv_block: int = 16
    tp: int = 4
    eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.q_heads % self.tp or self.kv_heads % self.tp or self.intermediate % self.tp:
            raise ValueError("q_heads, kv_heads and intermediate must split over the TP ranks")


@dataclass
class Weights:
    """float64 master weights, per layer: ``in_ln, qkv [rows, H], q_norm, k_norm, o [H, Hq*D],
    post_ln, gate, up [I, H], down [H, I]``; ``final_ln``."""

    layers: list[dict[str, torch.Tensor]]
    final_ln: torch.Tensor


@dataclass
class StepInputs:
    x: torch.Tensor  # [n_rows, H] float64 (bf16-representable)
    positions: torch.Tensor  # [n_rows] int64, the position of each draft row
    context: torch.Tensor  # [n_reqs] tokens already cached per request
    block_table: torch.Tensor  # [n_reqs, max_blocks] int64
    k_cache: list[torch.Tensor] = field(default_factory=list)  # per layer [blocks, kv_block, Hkv, D]
    v_cache: list[torch.Tensor] = field(default_factory=list)

    @property
    def qpr(self) -> int:
        return self.x.shape[0] // self.context.shape[0]


def make_weights(d: Dims, seed: int) -> Weights:
    """Random weights with realistic scales: ~1/sqrt(fan_in) GEMV rows, norms near 1."""
    g = torch.Generator().manual_seed(seed)
    qkv_rows = (d.q_heads + 2 * d.kv_heads) * d.head_dim

    def w(rows: int, cols: int) -> torch.Tensor:
        # Drawn and scaled in float32 (3x faster than float64 draws: the full model is 330M weights), held
        # in float64.
        return torch.randn(rows, cols, generator=g, dtype=torch.float32).mul_(cols ** -0.5).to(torch.float64)

    def norm(n: int) -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)

    layers = [{
        "in_ln": norm(d.hidden), "qkv": w(qkv_rows, d.hidden), "q_norm": norm(d.head_dim),
        "k_norm": norm(d.head_dim), "o": w(d.hidden, d.q_heads * d.head_dim), "post_ln": norm(d.hidden),
        "gate": w(d.intermediate, d.hidden), "up": w(d.intermediate, d.hidden), "down": w(d.hidden, d.intermediate),
    } for _ in range(d.layers)]
    return Weights(layers, norm(d.hidden))


def make_inputs(d: Dims, requests: int, qpr: int, context: list[int], seed: int) -> StepInputs:
    """Draft rows of ``requests`` requests after ``context`` cached tokens each, with a random
    block table and a cache filled with bf16-representable keys and values."""
    if len(context) != requests:
        raise ValueError("context: one length per request")
    g = torch.Generator().manual_seed(seed)
    blocks_per_req = max(-(-(c + qpr) // d.kv_block) for c in context)
    total_blocks = requests * blocks_per_req + 3
    table = torch.randperm(total_blocks, generator=g)[: requests * blocks_per_req].view(requests, blocks_per_req)
    n = requests * qpr
    positions = torch.tensor([context[r] + i for r in range(requests) for i in range(qpr)])
    shape = (total_blocks, d.kv_block, d.kv_heads, d.head_dim)
    inputs = StepInputs(
        x=_bf16(torch.randn(n, d.hidden, generator=g, dtype=torch.float64)), positions=positions,
        context=torch.tensor(context), block_table=table,
        k_cache=[_bf16(torch.randn(shape, generator=g, dtype=torch.float64)) for _ in range(d.layers)],
        v_cache=[_bf16(torch.randn(shape, generator=g, dtype=torch.float64)) for _ in range(d.layers)],
    )
    return inputs


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(t.dtype)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_angles(positions: torch.Tensor, head_dim: int, theta: float) -> torch.Tensor:
    """[n, D/2] rotation angles of each row's position (float64): the kernel's cos/sin table too."""
    half = head_dim // 2
    inv = theta ** (-torch.arange(half, dtype=torch.float64) / half)
    return positions.to(torch.float64)[:, None] * inv[None, :]


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half RoPE over the last dim of [n, heads, D] at each row's position."""
    half = x.shape[-1] // 2
    ang = rope_angles(positions, x.shape[-1], theta)
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def swiglu_clamped(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    g = torch.clamp(g, max=7.0)
    u = torch.clamp(u, -7.0, 7.0)
    return g * torch.sigmoid(1.702 * g) * (u + 1.0)


def _cache_index(d: Dims, inputs: StepInputs, req: int, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return inputs.block_table[req, pos // d.kv_block], pos % d.kv_block


def _attend(d: Dims, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, inputs: StepInputs,
            heads: range, kv_of: callable) -> torch.Tensor:
    """Sliding-window attention of each row over its request's cached keys (positions written)."""
    n = q.shape[0]
    out = torch.zeros(n, len(heads), d.head_dim, dtype=q.dtype)
    scale = d.head_dim ** -0.5
    shared = {}  # the KV head of each query head, and the query heads on each KV head
    for j, h in enumerate(heads):
        shared.setdefault(kv_of(h), []).append(j)
    for row in range(n):
        req = row // inputs.qpr
        p = int(inputs.positions[row])
        keys = torch.arange(max(p - d.window + 1, 0), p + 1)
        blk, off = _cache_index(d, inputs, req, keys)
        kr, vr = k_cache[blk, off], v_cache[blk, off]  # [keys, kv heads, D]
        for g, js in shared.items():  # every query head on KV head g at once
            s = (q[row, js] @ kr[:, g].T) * scale  # [query heads, keys]
            out[row, js] = torch.softmax(s, dim=1) @ vr[:, g]
    return out


def forward_f64(d: Dims, weights: Weights, inputs: StepInputs, norms: list[dict[str, float]] | None = None,
                caches: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> torch.Tensor:
    """The unsharded model in float64: h_out [n_rows, H]. ``norms`` receives each layer's Frobenius norms
    of the residual ``x``, the attention branch ``o``, ``h`` = x + o and the MLP branch ``d``, then
    ``{"x": ‖final residual‖}``: the sizes ``numerics.error_bound`` weighs the roundings by. ``caches``
    receives each layer's K and V cache after the step."""
    x = inputs.x.clone()
    group = d.q_heads // d.kv_heads
    k_cache = [c.clone() for c in inputs.k_cache]
    v_cache = [c.clone() for c in inputs.v_cache]
    for layer, w in enumerate(weights.layers):
        h = rms_norm(x, w["in_ln"], d.eps)
        qkv = h @ w["qkv"].T
        nq = d.q_heads * d.head_dim
        q = qkv[:, :nq].view(-1, d.q_heads, d.head_dim)
        k = qkv[:, nq:nq + d.kv_heads * d.head_dim].view(-1, d.kv_heads, d.head_dim)
        v = qkv[:, nq + d.kv_heads * d.head_dim:].view(-1, d.kv_heads, d.head_dim)
        q = rope(rms_norm(q, w["q_norm"], d.eps), inputs.positions, d.rope_theta)
        k = rope(rms_norm(k, w["k_norm"], d.eps), inputs.positions, d.rope_theta)
        for row in range(x.shape[0]):
            blk, off = _cache_index(d, inputs, row // inputs.qpr, inputs.positions[row])
            k_cache[layer][blk, off] = k[row]
            v_cache[layer][blk, off] = v[row]
        att = _attend(d, q, k_cache[layer], v_cache[layer], inputs, range(d.q_heads), lambda h: h // group)
        if caches is not None:
            caches.append((k_cache[layer], v_cache[layer]))
        o = att.reshape(x.shape[0], -1) @ w["o"].T
        h2 = rms_norm(x + o, w["post_ln"], d.eps)
        mlp = swiglu_clamped(h2 @ w["gate"].T, h2 @ w["up"].T) @ w["down"].T
        if norms is not None:
            norms.append({"x": float(x.norm()), "o": float(o.norm()), "h": float((x + o).norm()),
                          "d": float(mlp.norm())})
        x = x + o + mlp
    if norms is not None:
        norms.append({"x": float(x.norm())})
    return rms_norm(x, weights.final_ln, d.eps)


def f8_codes(t: torch.Tensor, arch: str) -> tuple[torch.Tensor, torch.Tensor]:
    """8-bit codes (the arch's format) of each row with its float32 scale, amax / the format's max.

    Computed in float32: for float32 values (the weights are drawn in float32) the same codes and
    scales as in float64, since one float32 division rounded from float64 is the float32 division."""
    t32 = t.to(torch.float32)
    scale = t32.abs().amax(-1, keepdim=True).clamp(min=1e-12) / F8_MAX[arch]
    return (t32 / scale).to(F8_DTYPE[arch]), scale


def quantize_rows(t: torch.Tensor, arch: str) -> tuple[torch.Tensor, torch.Tensor]:
    """8-bit rows with a per-row float32 scale (amax / the format's max), both as float64."""
    q, scale = f8_codes(t, arch)
    return q.to(torch.float64), scale.to(torch.float64)


def _dequantized(t: torch.Tensor, arch: str) -> torch.Tensor:
    q, s = quantize_rows(t, arch)
    return q * s


def forward_tp4(d: Dims, weights: Weights, inputs: StepInputs, arch: str | None) -> torch.Tensor:
    """The step as the megakernel computes it on ``d.tp`` ranks: h_out [n_rows, H] (bf16 values).

    ``arch=None`` keeps every value in float64 (no 8-bit or bf16 rounding): the sharding,
    reduce-scatter and gather arithmetic alone, which must equal :func:`forward_f64` exactly.
    """
    exact = arch is None

    def dequantized(t: torch.Tensor, _arch: str | None) -> torch.Tensor:
        return t if exact else _dequantized(t, arch)

    def bf16(t: torch.Tensor) -> torch.Tensor:
        return t if exact else _bf16(t)

    tp, n = d.tp, inputs.x.shape[0]
    qh, kvh = d.q_heads // tp, d.kv_heads // tp
    inter = d.intermediate // tp
    group = d.q_heads // d.kv_heads
    x = inputs.x.clone()  # the residual, f32 in the kernel
    k_cache = [c.clone() for c in inputs.k_cache]
    v_cache = [c.clone() for c in inputs.v_cache]
    for layer, w in enumerate(weights.layers):
        x8 = dequantized(rms_norm(x, w["in_ln"], d.eps), arch)  # all-gathered 8-bit rows
        o_sum = torch.zeros_like(x)
        d_sum = torch.zeros_like(x)
        att_rows = []
        for r in range(tp):
            nq = d.q_heads * d.head_dim
            rows_q = torch.arange(r * qh * d.head_dim, (r + 1) * qh * d.head_dim)
            rows_k = nq + torch.arange(r * kvh * d.head_dim, (r + 1) * kvh * d.head_dim)
            rows_v = rows_k + d.kv_heads * d.head_dim
            wq = dequantized(w["qkv"][torch.cat([rows_q, rows_k, rows_v])], arch)
            qkv = bf16(x8 @ wq.T)  # stored as bf16
            q = qkv[:, : qh * d.head_dim].view(n, qh, d.head_dim)
            k = qkv[:, qh * d.head_dim: (qh + kvh) * d.head_dim].view(n, kvh, d.head_dim)
            v = qkv[:, (qh + kvh) * d.head_dim:].view(n, kvh, d.head_dim)
            q = bf16(rope(rms_norm(q, w["q_norm"], d.eps), inputs.positions, d.rope_theta))
            k = bf16(rope(rms_norm(k, w["k_norm"], d.eps), inputs.positions, d.rope_theta))
            for row in range(n):
                blk, off = _cache_index(d, inputs, row // inputs.qpr, inputs.positions[row])
                k_cache[layer][blk, off, r * kvh:(r + 1) * kvh] = k[row]
                v_cache[layer][blk, off, r * kvh:(r + 1) * kvh] = v[row]
            heads = range(r * qh, (r + 1) * qh)
            att_rows.append(_attend(d, q, k_cache[layer], v_cache[layer], inputs, heads, lambda h: h // group))
        for r in range(tp):
            a8 = dequantized(att_rows[r].reshape(n, -1), arch)
            cols = torch.arange(r * qh * d.head_dim, (r + 1) * qh * d.head_dim)
            o_sum += bf16(a8 @ dequantized(w["o"][:, cols], arch).T)  # bf16 partials, reduce-scattered
        x = x + o_sum
        h8 = dequantized(rms_norm(x, w["post_ln"], d.eps), arch)
        for r in range(tp):
            rows = torch.arange(r * inter, (r + 1) * inter)
            g = bf16(h8 @ dequantized(w["gate"][rows], arch).T)
            u = bf16(h8 @ dequantized(w["up"][rows], arch).T)
            act = dequantized(bf16(swiglu_clamped(g, u)), arch)
            d_sum += bf16(act @ dequantized(w["down"][:, rows], arch).T)
        x = x + d_sum
    return bf16(rms_norm(x, weights.final_ln, d.eps))
