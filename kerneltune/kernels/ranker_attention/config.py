"""The problem and the compile-time configuration of the ranker-attention kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .cap import CapImpl, CapMethod, CapParams, cap_bound

SUPPORTED_HEAD_DIMS = (64, 128, 256)
SUPPORTED_DTYPES = ("bfloat16", "float16")

# Hopper's opt-in shared memory per block (227 KiB) and the register file a
# compute warpgroup may raise itself to with setmaxnreg.
HOPPER_SMEM_BYTES = 232_448
COMPUTE_WG_REGISTERS = 232
_REGISTER_OVERHEAD = 40  # indices, softmax state, addresses: measured slack
_MOSAIC_RESERVED_SMEM = 2048
# The largest cap ``static_max`` takes: exp2 of every logit (|logit| * log2(e) <= 64) then lies in
# [2^-64, 2^64], normal in float32 and bfloat16, and a row's sum stays finite.
STATIC_MAX_CAP = 64 / math.log2(math.e)


@dataclass(frozen=True)
class Problem:
    """One ranker-attention call's static shape and semantics."""

    batch: int
    seq_len: int
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"
    cap_method: CapMethod = CapMethod.NONE
    cap: float | None = None
    sm_scale: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cap_method", CapMethod.parse(self.cap_method))
        for name in ("batch", "seq_len", "q_heads", "kv_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"head_dim: {self.head_dim} is not one of {SUPPORTED_HEAD_DIMS}")
        if self.q_heads % self.kv_heads:
            raise ValueError(
                f"q_heads: {self.q_heads} must be a multiple of kv_heads={self.kv_heads} (GQA)"
            )
        if self.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype: {self.dtype!r} is not one of {SUPPORTED_DTYPES}")
        CapParams.checked(self.cap_method, self.cap)

    @property
    def scale(self) -> float:
        return self.sm_scale if self.sm_scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def cap_params(self) -> CapParams:
        return CapParams(self.cap)

    @property
    def heads_per_kv_head(self) -> int:
        return self.q_heads // self.kv_heads

    # Bucket fields a tuned entry must share to be used at all.
    HARD_BUCKET_FIELDS = ("head_dim", "dtype")

    def bucket(self) -> dict[str, object]:
        """The tuned-table bucket: exact categorical fields, sizes rounded up to powers of 2."""
        return {
            "head_dim": self.head_dim,
            "dtype": self.dtype,
            "cap_method": self.cap_method.value,
            "group": self.heads_per_kv_head,
            "seq_len": _pow2_ceil(self.seq_len),
            "batch_heads": _pow2_ceil(self.batch * self.q_heads),
        }


def _pow2_ceil(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class KernelConfig:
    """What one compiled kernel is specialised on; validated on construction.

    The tile fields (``block_q`` … ``lazy_rescale``) are the tuning space;
    the cap and scale come from the problem (``for_problem``).
    """

    block_q: int = 64
    block_kv: int = 128
    num_stages: int = 2
    # wgmma reads P straight from registers (FA3 style); False stages it through SMEM.
    p_in_registers: bool = True
    # Ping-pong the two compute warpgroups so one's softmax overlaps the other's wgmma.
    schedule_barrier: bool = True
    # False skips mask arithmetic on history KV blocks that lie wholly inside the history.
    mask_interior: bool = False
    # One CTA per SM walking many tiles: the K/V ring runs on across tiles and the next tile's Q
    # loads under the current one (a second Q/O buffer), instead of one CTA per tile.
    persistent: bool = False
    # Special-function approximations (ex2, lg2, rsqrt, tanh built from ex2 and rsqrt) instead of
    # libdevice's precise functions; both pass the same verification, the tuner keeps the faster.
    fast_math: bool = True
    # The softmax without a running max, p = exp2(logit), under a bounding cap of at most
    # STATIC_MAX_CAP: takes the row max and the rescale of O and l off each KV step's dependent chain
    # (0.86-0.91x the time at D=128 with tanh caps, 0.98-1.02x at D=64:
    # 1371b475c129:results/ranker_attention/2026-11-30-h200-run-h/).
    static_max: bool = False
    # How the cap is evaluated (``CapImpl``): the tanh instruction is faster and less accurate in the
    # LSE; the runtime launches it only for a call whose error budget the entry's measured errors meet.
    cap_impl: str = CapImpl.EXACT.value
    # Of every eight registers of logits a compute thread holds, this many take the softmax's exp2 on the
    # FMA pipe (``exp2_fma``), the rest on the special-function unit: the two pipes share the chain.
    exp2_fma_eighths: int = 0
    # Without a cap: the row max taken on the raw logits and the scale folded into the exp2 argument's FMA,
    # instead of a multiply per logit that only fed the max (0.95x the time at D=64, 0.98x at D=128:
    # 1371b475c129:results/ranker_attention/2026-12-03-h200-run-ag/).
    # The same function up to rounding; under a cap the kernel is the same either way.
    scale_in_exp2: bool = False
    # Where the kernel keeps a running max (no static_max): a row keeps it while a block's logits stay within 8
    # above it (log2 units, p < 2**8), and O's rescale is skipped by a branch for the rows that kept it
    # (FlashAttention-4; 0.92-0.99x the time at D=128, 1.13x at D=64, the branch's own cost:
    # results/ranker_attention/2026-12-04-h200-run-ai/).
    # The same function up to rounding; under static_max the kernel is the same either way.
    lazy_rescale: bool = False
    cap_method: CapMethod = CapMethod.NONE
    cap_params: CapParams = field(default_factory=CapParams)
    sm_scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "cap_method", CapMethod.parse(self.cap_method))
        if self.block_q not in (64, 128):
            raise ValueError(f"block_q: {self.block_q} must be 64 or 128 (one wgmma M per warpgroup)")
        if self.block_kv % 64 or not 64 <= self.block_kv <= 256:
            raise ValueError(f"block_kv: {self.block_kv} must be 64, 128, 192 or 256")
        if not 2 <= self.num_stages <= 4:
            raise ValueError(f"num_stages: {self.num_stages} must be in [2, 4]")
        if not (math.isfinite(self.sm_scale) and self.sm_scale > 0):
            raise ValueError(f"sm_scale: must be a finite number > 0, got {self.sm_scale}")
        CapParams.checked(self.cap_method, self.cap_params.cap)
        if not 0 <= self.exp2_fma_eighths <= 8:
            raise ValueError(f"exp2_fma_eighths: {self.exp2_fma_eighths} must be in [0, 8]")
        if self.exp2_fma_eighths and not self.fast_math:
            raise ValueError("exp2_fma_eighths: shares the exp2 with ex2.approx; it needs fast_math=True")
        impl = CapImpl.parse(self.cap_impl)
        if impl is CapImpl.TANH_INSTR and not self.cap_method.is_tanh:
            raise ValueError(f"cap_impl: 'tanh_instr' evaluates a tanh cap; cap_method is {self.cap_method.value!r}")
        if impl is CapImpl.TANH_INSTR and not self.fast_math:
            raise ValueError("cap_impl: 'tanh_instr' is the approximate tanh instruction; it needs fast_math=True")

    TILE_FIELDS = ("block_q", "block_kv", "num_stages", "p_in_registers", "schedule_barrier",
                   "mask_interior", "persistent", "fast_math", "static_max", "cap_impl",
                   "exp2_fma_eighths", "scale_in_exp2", "lazy_rescale")

    def tile(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.TILE_FIELDS}

    @classmethod
    def for_problem(cls, problem: Problem, **tile: object) -> KernelConfig:
        return cls(
            **tile,  # type: ignore[arg-type]
            cap_method=problem.cap_method,
            cap_params=problem.cap_params,
            sm_scale=problem.scale,
        )


def smem_bytes(config: KernelConfig, head_dim: int, itemsize: int = 2) -> int:
    """Shared memory the kernel allocates, as Mosaic GPU lays it out: every buffer
    rounded up to 1 KiB, 2 KiB reserved, 8 B per barrier (matches its lowering's count)."""
    q_buffers = 2 if config.persistent else 1
    buffers = [
        2 * q_buffers * config.block_q * head_dim * itemsize,  # Q, then O, per compute warpgroup
        config.num_stages * config.block_kv * head_dim * itemsize,  # K ring
        config.num_stages * config.block_kv * head_dim * itemsize,  # V ring
        2 * q_buffers * config.block_q * 4,  # LSE
        0 if config.p_in_registers else 2 * config.block_q * config.block_kv * itemsize,
        3 * 4 if config.persistent else 0,  # the tile handed to the compute warpgroups (2) and the claim
    ]
    barriers = 8 * (4 * config.num_stages + 1 + 2 * q_buffers + (6 if config.persistent else 0))
    return sum(-(-b // 1024) * 1024 for b in buffers) + _MOSAIC_RESERVED_SMEM + barriers


def compute_registers(config: KernelConfig, head_dim: int) -> int:
    """Per-thread registers of a compute warpgroup: accumulator, logits, P and overhead."""
    acc = config.block_q * head_dim // 128
    logits = config.block_q * config.block_kv // 128
    p = logits // 2 if config.p_in_registers else 0
    return acc + logits + p + _REGISTER_OVERHEAD


def static_max_refusal(config: KernelConfig) -> str | None:
    """Why ``config`` may not skip the softmax's running max under its cap, or None."""
    bound = cap_bound(config.cap_method, config.cap_params)
    if config.static_max and (bound is None or bound > STATIC_MAX_CAP):
        return (f"static_max: needs a bounding cap of at most {STATIC_MAX_CAP:.2f}, got "
                f"cap_method={config.cap_method.value!r} cap={config.cap_params.cap}")
    return None


def infeasibility(config: KernelConfig, problem: Problem, smem_limit: int = HOPPER_SMEM_BYTES) -> str | None:
    """Why ``config`` cannot run ``problem`` (before anything compiles), or None."""
    why = static_max_refusal(config)
    if why is not None:
        return why
    tile_rows = 2 * config.block_q
    if problem.seq_len % tile_rows:
        return f"seq_len {problem.seq_len} is not a multiple of 2 * block_q = {tile_rows}"
    if problem.seq_len % config.block_kv:
        return f"seq_len {problem.seq_len} is not a multiple of block_kv = {config.block_kv}"
    used = smem_bytes(config, problem.head_dim)
    if used > smem_limit:
        return f"shared memory {used} B exceeds the device's {smem_limit} B"
    regs = compute_registers(config, problem.head_dim)
    if regs > COMPUTE_WG_REGISTERS:
        return f"estimated {regs} registers per compute thread exceed {COMPUTE_WG_REGISTERS}"
    return None
