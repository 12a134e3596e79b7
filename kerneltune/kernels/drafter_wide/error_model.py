"""The formats' error model per element: for every element of h_out and of every K/V cache row a step
writes, the standard deviation ``σ`` its rounding errors may have against the float64 model, so that a check
can judge each element by its own bound instead of one global Frobenius ratio.

The model is ``numerics.error_bound``'s, carried per element instead of per norm (first order, roundings
independent, each given its largest variance ``u²·v²``, ``u8 = 2**-4``, ``u16 = 2**-8``, float32 left out):

- an 8-bit or bf16 rounding of ``v`` adds ``u²·v²`` to ``v``'s variance;
- a GEMV ``y = W x`` with 8-bit ``W`` and ``x`` has ``var y_j = Σ_k W_jk²·var x_k + u8²·Σ_k W_jk²·x_k²``
  (``var x`` already holds ``x``'s own 8-bit rounding);
- RMSNorm ``y = w·x / rms(x)`` passes ``(w/rms)²·(var x_j + x_j²·Σ_k x_k² var x_k / (H² rms⁴))`` (the
  normaliser's share, its negative covariance dropped) plus its bf16 weight's ``u16²·y²``;
- RoPE rotates variances with ``cos²`` and ``sin²``; the clamped SwiGLU passes ``g``'s and ``u``'s through
  its derivatives (zero where clamped);
- attention ``o = Σ_t p_t v_t``, ``p = softmax(s·q·k_t)``: this step's keys and values carry errors, cached
  ones are exact bf16. With ``a_t = p_t (v_t - o)``: ``var o_d = Σ_t p_t² var v_td
  + s²·Σ_t a_td²·Σ_e q_e² var k_te + s²·Σ_e (Σ_t a_td k_te)² var q_e + u16²·Σ_t a_td²`` (q's error is
  shared by every key, so its term is the exact one of a common perturbation; the last is P's bf16).

Where the kernel rounds (``numerics.Formats``): the 8-bit rows x8, h8, a8 and act (and the weights), the bf16
qkv, q, k, g, u, act and reduce-scatter partials, the norm weights and h_out. The 8-bit formats' subnormal
floor is left out (a value below ``amax·2**-14`` is rare in these rows and its absolute error tinier still).

Two checks follow from it (``ElementCheck``): every element within ``z_limit(N)`` of its ``σ`` (a Gaussian's
largest of ``N`` draws stays below it but for a chance of 1e-6), and the mean of ``(error/σ)²`` at most 1 (the
model's variance is an upper bound on each element's: the worst case ``u²`` where a uniform rounding has
``u²/3``), which a bug that adds error evenly everywhere cannot meet even where every element is within
its own bound."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .master_weights import gemv32
from .numerics import U8, U16
from .reference import Dims, StepInputs, Weights, rms_norm, rope, rope_angles, swiglu_clamped

FALSE_ALARM = 1e-6  # the chance that ``z_limit`` fails a correct kernel, for any number of elements


@dataclass
class ElementModel:
    """The float64 model's outputs with each element's ``σ`` under the formats' error model."""

    h_out: np.ndarray  # [n_rows, hidden]
    h_sigma: np.ndarray
    cache: list[list[np.ndarray]]  # [rank][layer]: the rank's K/V cache after the step, [2, pages, BLOCK, D]
    cache_sigma: list[list[np.ndarray]]  # the same shape; 0 at every slot the step does not write
    written: np.ndarray  # [2, pages, BLOCK, D] bool: the slots the step writes (every layer and rank alike)


def z_limit(n: int) -> float:
    """The largest ``|error| / σ`` of ``n`` Gaussian draws but for a chance of ``FALSE_ALARM``:
    ``P(|z| > t) ≤ exp(-t²/2)`` for each, so ``t = sqrt(2 ln(n / FALSE_ALARM))``."""
    return math.sqrt(2 * math.log(max(n, 1) / FALSE_ALARM))


def rms_limit(n: int) -> float:
    """The bound on ``sqrt(mean((error/σ)²))`` over ``n`` elements: 1 (the model's variance bounds each
    element's), plus five standard deviations of the mean of ``n`` squared unit Gaussians (``sqrt(2/n)``)."""
    return math.sqrt(1 + 5 * math.sqrt(2 / max(n, 1)))


@dataclass(frozen=True)
class ElementCheck:
    """``got`` against the model, element by element: the largest ``|error|/σ``, its root mean square over
    every element and over each row (the last axis: an h_out row, a K or V row) at its worst."""

    what: str
    elements: int
    z_max: float
    z_rms: float
    worst: tuple[int, ...]  # the index of the element of ``z_max``
    row_rms: float = 0.0
    worst_row: int = 0
    row_length: int = 1

    @property
    def z_bound(self) -> float:
        return z_limit(self.elements)

    @property
    def rms_bound(self) -> float:
        return rms_limit(self.elements)

    @property
    def row_bound(self) -> float:
        return rms_limit(self.row_length)

    @property
    def ok(self) -> bool:
        return self.z_max <= self.z_bound and self.z_rms <= self.rms_bound and self.row_rms <= self.row_bound

    def __str__(self) -> str:
        return (f"{self.what}: largest error {self.z_max:.2f} σ at {self.worst} (bound {self.z_bound:.2f}), "
                f"rms {self.z_rms:.3f} σ (bound {self.rms_bound:.3f}) over {self.elements} elements, row "
                f"{self.worst_row}'s {self.row_rms:.3f} σ (bound {self.row_bound:.3f})")


def compare(what: str, got: np.ndarray, want: np.ndarray, sigma: np.ndarray) -> ElementCheck:
    """``got`` against ``want`` in units of ``σ`` (NaN is infinitely far); rows along the last axis."""
    z = np.abs(np.asarray(got, np.float64) - want) / sigma
    z = np.where(np.isnan(z), np.inf, z)
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(z)), z.shape))
    rows = np.sqrt(np.mean((z * z).reshape(-1, z.shape[-1]), axis=1))
    worst = int(np.argmax(rows))
    return ElementCheck(what, int(z.size), float(z[at]), float(np.sqrt(np.mean(z * z))), at, float(rows[worst]),
                        worst, int(z.shape[-1]))


def _rms_norm_var(x: torch.Tensor, vx: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    rms2 = (x * x).mean(-1, keepdim=True) + eps
    n = x.shape[-1]
    shared = (x * x * vx).sum(-1, keepdim=True) / (n * n * rms2 * rms2)
    y = rms_norm(x, w, eps)
    return w * w / rms2 * (vx + x * x * shared) + U16 ** 2 * y * y


def _rope_var(v: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    half = v.shape[-1] // 2
    ang = rope_angles(positions, v.shape[-1], theta)
    c2, s2 = (torch.cos(ang) ** 2)[:, None, :], (torch.sin(ang) ** 2)[:, None, :]
    v1, v2 = v[..., :half], v[..., half:]
    return torch.cat([c2 * v1 + s2 * v2, s2 * v1 + c2 * v2], dim=-1)


def _gemv_var(x: torch.Tensor, vx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` with 8-bit ``w`` and ``x`` (``vx`` holds ``x``'s rounding): its variance, without the store."""
    w2 = w * w
    return vx @ w2.T + U8 ** 2 * ((x * x) @ w2.T)


def element_model(d: Dims, weights: Weights, inputs: StepInputs) -> ElementModel:
    """The float64 step (``reference.forward_f64``'s arithmetic) with each value's error variance beside it."""
    n, tp = inputs.x.shape[0], d.tp
    group, hd, scale = d.q_heads // d.kv_heads, d.head_dim, d.head_dim ** -0.5
    qh, inter = d.q_heads // tp, d.intermediate // tp
    x = inputs.x.clone()
    vx = torch.zeros_like(x)
    shape = (2, *inputs.k_cache[0].shape[:2], hd) if inputs.k_cache else (2, 0, d.kv_block, hd)
    written = np.zeros(shape, bool)
    cache = [[] for _ in range(tp)]
    cache_sigma = [[] for _ in range(tp)]
    blk = inputs.block_table[torch.arange(n) // inputs.qpr, inputs.positions // d.kv_block]
    off = inputs.positions % d.kv_block
    written[:, blk.numpy(), off.numpy()] = True
    for layer, w in enumerate(weights.layers):
        h = rms_norm(x, w["in_ln"], d.eps)
        vh = _rms_norm_var(x, vx, w["in_ln"], d.eps) + U8 ** 2 * h * h  # x8
        qkv = h @ w["qkv"].T
        vqkv = _gemv_var(h, vh, w["qkv"]) + U16 ** 2 * qkv * qkv  # stored bf16
        nq, nk = d.q_heads * hd, d.kv_heads * hd
        q, k, v = (qkv[:, :nq].view(n, -1, hd), qkv[:, nq:nq + nk].view(n, -1, hd), qkv[:, nq + nk:].view(n, -1, hd))
        vq, vk, vv = (vqkv[:, :nq].view(n, -1, hd), vqkv[:, nq:nq + nk].view(n, -1, hd),
                      vqkv[:, nq + nk:].view(n, -1, hd))
        q = rope(rms_norm(q, w["q_norm"], d.eps), inputs.positions, d.rope_theta)
        k = rope(rms_norm(k, w["k_norm"], d.eps), inputs.positions, d.rope_theta)
        vq = _rope_var(_rms_norm_var(qkv[:, :nq].view(n, -1, hd), vq, w["q_norm"], d.eps),
                       inputs.positions, d.rope_theta) + U16 ** 2 * q * q  # the MFMA's bf16 q
        vk = _rope_var(_rms_norm_var(qkv[:, nq:nq + nk].view(n, -1, hd), vk, w["k_norm"], d.eps),
                       inputs.positions, d.rope_theta) + U16 ** 2 * k * k  # stored bf16
        k_cache, v_cache = inputs.k_cache[layer].clone(), inputs.v_cache[layer].clone()
        vk_cache, vv_cache = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
        k_cache[blk, off], v_cache[blk, off] = k, v
        vk_cache[blk, off], vv_cache[blk, off] = vk, vv
        for r in range(tp):
            cache[r].append(torch.stack([k_cache[:, :, r], v_cache[:, :, r]]).numpy())
            cache_sigma[r].append(torch.stack([vk_cache[:, :, r], vv_cache[:, :, r]]).sqrt().numpy())
        att, vatt = _attention(d, inputs, q, vq, k_cache, vk_cache, v_cache, vv_cache, group, scale)
        a = att.reshape(n, -1)
        va = vatt.reshape(n, -1) + U8 ** 2 * a * a  # a8
        o = torch.zeros_like(x)
        vo = torch.zeros_like(x)
        w_o = gemv32(weights, layer, "o")
        for r in range(tp):
            cols = slice(r * qh * hd, (r + 1) * qh * hd)
            o64 = w_o[:, cols].double()
            part = a[:, cols] @ o64.T
            o += part
            vo += _gemv_var(a[:, cols], va[:, cols], o64) + U16 ** 2 * part * part  # bf16 partials
        del w_o, o64
        x, vx = x + o, vx + vo
        h2 = rms_norm(x, w["post_ln"], d.eps)
        vh2 = _rms_norm_var(x, vx, w["post_ln"], d.eps) + U8 ** 2 * h2 * h2  # h8
        dsum = torch.zeros_like(x)
        vd = torch.zeros_like(x)
        slices = [slice(r * inter, (r + 1) * inter) for r in range(tp)]
        # each matrix read once for the four ranks, a rank's rows made float64 at a time (``master_weights``)
        gate = gemv32(weights, layer, "gate")
        gs = [(h2 @ g64.T, _gemv_var(h2, vh2, g64)) for g64 in (gate[rows].double() for rows in slices)]
        up = gemv32(weights, layer, "up")
        us = [(h2 @ u64.T, _gemv_var(h2, vh2, u64)) for u64 in (up[rows].double() for rows in slices)]
        del gate, up
        down = gemv32(weights, layer, "down")
        for rows, (g, vg), (u, vu) in zip(slices, gs, us, strict=True):
            vg = vg + U16 ** 2 * g * g
            vu = vu + U16 ** 2 * u * u
            act = swiglu_clamped(g, u)
            sg = torch.sigmoid(1.702 * g)
            dg = torch.where(g < 7.0, sg * (1 + 1.702 * g * (1 - sg)) * (torch.clamp(u, -7.0, 7.0) + 1), 0.0)
            du = torch.where(u.abs() < 7.0, torch.clamp(g, max=7.0) * torch.sigmoid(1.702 * torch.clamp(g, max=7.0)),
                             0.0)
            vact = dg * dg * vg + du * du * vu + (U16 ** 2 + U8 ** 2) * act * act  # bf16, then 8-bit by chunk
            d64 = down[:, rows].double()
            part = act @ d64.T
            dsum += part
            vd += _gemv_var(act, vact, d64) + U16 ** 2 * part * part
        del down
        x, vx = x + dsum, vx + vd
    h_out = rms_norm(x, weights.final_ln, d.eps)
    vout = _rms_norm_var(x, vx, weights.final_ln, d.eps) + U16 ** 2 * h_out * h_out
    return ElementModel(h_out.numpy(), vout.sqrt().numpy(), cache, cache_sigma, written)


def _attention(d: Dims, inputs: StepInputs, q: torch.Tensor, vq: torch.Tensor, k_cache: torch.Tensor,
               vk_cache: torch.Tensor, v_cache: torch.Tensor, vv_cache: torch.Tensor, group: int,
               scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's sliding-window attention [n, q_heads, D] and its variance (module docstring), every KV head's
    query heads at once. ``Σ_t a_td² c_t`` is expanded as ``(p²c)·v² - 2 o (p²c)·v + o² Σ p²c`` and
    ``Σ_t a_td k_te`` as ``(p v)ᵀ k - o k̄``, so that no [heads, keys, D] product is formed but one."""
    n, hd = q.shape[0], q.shape[-1]
    out, var = torch.zeros_like(q), torch.zeros_like(q)
    for row in range(n):
        req, p = row // inputs.qpr, int(inputs.positions[row])
        keys = torch.arange(max(p - d.window + 1, 0), p + 1)
        blk, off = inputs.block_table[req, keys // d.kv_block], keys % d.kv_block

        kt, vt, vkt, vvt = (c[blk, off].transpose(0, 1) for c in (k_cache, v_cache, vk_cache, vv_cache))
        qg, vqg = q[row].view(d.kv_heads, group, hd), vq[row].view(d.kv_heads, group, hd)
        pr = torch.softmax(qg @ kt.transpose(1, 2) * scale, dim=-1)  # [kv heads, group, keys]
        o = pr @ vt
        p2 = pr * pr

        c = (qg * qg) @ vkt.transpose(1, 2)  # Σ_e q_e² var k_te
        m = torch.einsum("ght,gtd,gte->ghde", pr, vt, kt) - o[..., :, None] * (pr @ kt)[..., None, :]
        v = (p2 @ vvt + scale ** 2 * _spread(p2 * c, vt, o) + scale ** 2 * torch.einsum("ghde,ghe->ghd", m * m, vqg)
             + U16 ** 2 * _spread(p2, vt, o))
        out[row], var[row] = o.reshape(-1, hd), v.reshape(-1, hd)
    return out, var


def _spread(w: torch.Tensor, v: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """``Σ_t w_t (v_td - o_d)²`` for weights ``w`` [kv heads, group, keys], values ``v`` [kv heads, keys, D]."""
    return w @ (v * v) - 2 * o * (w @ v) + o * o * w.sum(-1, keepdim=True)


# The kernel against the emulation. Both round where the formats round, but their float32 sums run in other
# orders, so a value a few float32 ulps from an 8-bit or bf16 rounding boundary rounds the other way in one of
# them, and each flip carries on through the later layers, where it moves other values across boundaries: the two
# drift apart layer by layer towards two independent draws of the formats' error (rms sqrt(2) x 0.42 = 0.59 σ).
# Measured (``results/drafter_wide/2026-12-06-interpret-coverage/``, both archs, 1-3 layers): the first layer's
# cache rows equal but for one element in 2048 (rms 0.006 σ); after k layers rms 0.09 σ (k = 1), 0.10-0.16 σ
# (2), 0.21-0.23 σ (3); a second layer's cache rows up to 0.16 σ, a third's 0.24 σ; any element at most 1.16 σ;
# a row's rms at most 0.32 σ. The bounds are 1.5-2.4 times those, ``tie_rms(k)`` for what k layers' flips came
# before (at three layers and more, near the independent limit, the float64 checks carry the weight).
TIE_Z = 2.5


def tie_rms(k: int) -> float:
    """The bound on the kernel-emulation rms (in σ) of values that ``k`` layers' roundings came before."""
    return 0.1 + 0.15 * k


def tie_row_rms(k: int) -> float:
    """The same for a row's rms (a row holds few flips, or none)."""
    return 2.5 * tie_rms(k)


@dataclass(frozen=True)
class Judgement:
    """One figure of a step against its bound: ``ok`` when ``value`` is at most ``bound``."""

    what: str
    value: float
    bound: float

    @property
    def ok(self) -> bool:
        return self.value <= self.bound

    def __str__(self) -> str:
        return f"{self.what}: {self.value:.3g} (bound {self.bound:.3g}){'' if self.ok else ' FAILED'}"


def _judged(c: ElementCheck, tie: int | None = None) -> list[Judgement]:
    """The check's three figures against the formats' bounds, or (``tie``: the layers before) the
    kernel-emulation ones."""
    return [Judgement(f"{c.what}, largest |error|/σ (at {c.worst})", c.z_max, c.z_bound if tie is None else TIE_Z),
            Judgement(f"{c.what}, rms of |error|/σ", c.z_rms, c.rms_bound if tie is None else tie_rms(tie)),
            Judgement(f"{c.what}, the worst row's rms of |error|/σ (row {c.worst_row})", c.row_rms,
                      c.row_bound if tie is None else tie_row_rms(tie))]


def _worst(checks: list[ElementCheck]) -> ElementCheck:
    return max(checks, key=lambda c: (c.z_max / c.z_bound, c.z_rms, c.row_rms))


def judge_step(h_out: list[np.ndarray], caches: list[list[np.ndarray]], model: ElementModel,
               emulated: tuple[list[np.ndarray], list[list[np.ndarray]]] | None = None) -> list[Judgement]:
    """Every check of one step's outputs (each rank's h_out, each rank's K/V cache per layer as [2, pages,
    BLOCK, D]) against the element model, and, given the emulation's (h_out, flat caches), against it: what
    ``verify --interpret`` and the interpreted tests both judge by."""
    wr, hd = model.written, model.written.shape[-1]
    out: list[Judgement] = []
    out += _judged(_worst([compare(f"h_out of rank {r} against float64", h, model.h_out, model.h_sigma)
                           for r, h in enumerate(h_out)]))
    apart = sum(int(np.sum(~_same(h, h_out[0]))) for h in h_out)
    out.append(Judgement("h_out elements where the ranks' copies differ", apart, 0))
    unwritten = sum(int(np.sum(~_same(c[~wr], m[~wr]))) for rc, rm in zip(caches, model.cache, strict=True)
                    for c, m in zip(rc, rm, strict=True))
    out.append(Judgement("K/V cache elements the step must not write that changed", unwritten, 0))

    def rows(arrays: list[list[np.ndarray]]) -> np.ndarray:  # the written K and V rows, [rows, head_dim]
        return np.concatenate([np.reshape(a, wr.shape)[wr].reshape(-1, hd) for ra in arrays for a in ra])

    got, want, sigma = rows(caches), rows(model.cache), rows(model.cache_sigma)
    out += _judged(compare("the K/V cache rows the step writes, against float64", got, want, sigma))
    if emulated is not None:
        e_h, e_caches = emulated
        layers = len(model.cache[0])
        out += _judged(_worst([compare(f"h_out of rank {r} against the emulation's", h, e, model.h_sigma)
                               for r, (h, e) in enumerate(zip(h_out, e_h, strict=True))]), layers)
        for layer in range(layers):
            def of(arrays: list[list[np.ndarray]], layer: int = layer) -> list[list[np.ndarray]]:
                return [[ra[layer]] for ra in arrays]

            out += _judged(compare(f"layer {layer}'s K/V cache rows written, against the emulation's",
                                   rows(of(caches)), rows(of(e_caches)), rows(of(model.cache_sigma))), layer)
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))
