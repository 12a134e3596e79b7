"""What a config compiles to, as a digest that ignores the source text (paths, lines, comments).

The forward is lowered for CUDA (on any host: lowering needs no GPU) and its StableHLO printed without
locations; the Mosaic GPU module that the custom call carries as bytecode is parsed and printed without
locations too. Two kernel sources that give a config the same digest launch the same program under the
same JAX, so a tuned entry measured under one still describes the other (``kerneltune rekey``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .config import KernelConfig, Problem

# The custom call's Mosaic GPU module: MLIR bytecode in a string attribute, bytes escaped as \XX; and the
# call's hash of that bytecode, which covers its locations.
_MODULE = re.compile(r'module = "((?:[^"\\]|\\.)*)"')
_MODULE_HASH = re.compile(r'kernel_hash = "(?:[^"\\]|\\.)*"')
# A counter of the modules lowered in the process, for dump file names.
_DUMP_NAME = re.compile(r'mosaic_gpu\.dump_basename = "[^"]*"')
_ESCAPE = re.compile(rb"\\([0-9A-Fa-f]{2})|\\(.)", re.DOTALL)


def unescape(raw: str) -> bytes:
    """The bytes of an MLIR string attribute as printed (``\\XX`` hex escapes, ``\\"`` and ``\\\\``)."""
    return _ESCAPE.sub(lambda m: bytes([int(m[1], 16)]) if m[1] else m[2], raw.encode("latin-1"))


def _module_asm(bytecode: bytes) -> str:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import mosaic_gpu_dialect
    from jax._src.lib.mlir import ir

    with jax_mlir.make_ir_context() as ctx, ir.Location.unknown():
        mosaic_gpu_dialect.register_dialect(ctx)
        ctx.allow_unregistered_dialects = True
        return ir.Module.parse(bytecode).operation.get_asm(enable_debug_info=False)


def canonical_text(lowered_text: str) -> str:
    """The lowered program with each embedded Mosaic GPU module replaced by its text without locations
    (the bytecode's hash and the dump file's name left out)."""
    text = _MODULE_HASH.sub("kernel_hash = <>", lowered_text)
    text = _MODULE.sub(lambda m: "module = <<" + _module_asm(unescape(m[1])) + ">>", text)
    return _DUMP_NAME.sub("mosaic_gpu.dump_basename = <>", text)


def arg_specs(problem: Problem, *, poisoned: bool = False) -> tuple[Any, ...]:
    """The forward's argument shapes for ``problem``: (q, k, v, bounds), plus the poisoned out and lse
    buffers when ``poisoned``."""
    import jax
    import jax.numpy as jnp

    b, t, hq, hkv, d = problem.batch, problem.seq_len, problem.q_heads, problem.kv_heads, problem.head_dim
    s, dt = jax.ShapeDtypeStruct, jnp.dtype(problem.dtype)
    specs = (s((b, t, hq, d), dt), s((b, t, hkv, d), dt), s((b, t, hkv, d), dt), s((b, 4), jnp.int32))
    return (*specs, s((b, t, hq, d), dt), s((b, hq, t), jnp.float32)) if poisoned else specs


def lower_for_cuda(problem: Problem, config: KernelConfig, num_ctas: int | None = None) -> Any:
    """The timed entry point (q, k, v, bounds) lowered for CUDA on any host; ``num_ctas`` as ``build_forward``
    takes it (default: this device's SM count, or a Hopper's where there is no GPU)."""
    from .kernel import build_forward

    return build_forward(problem, config, num_ctas=num_ctas).trace(*arg_specs(problem)).lower(
        lowering_platforms=("cuda",))


def program_digest(problem: Problem, tiles: dict[str, Any], sm_count: int | None) -> str:
    """The digest of the timed entry point for ``problem`` at ``tiles``, lowered for a GPU of ``sm_count`` SMs
    (a persistent grid's size is part of the program; None: as ``lower_for_cuda`` defaults)."""
    lowered = lower_for_cuda(problem, KernelConfig.for_problem(problem, **tiles), sm_count)
    text = canonical_text(lowered.as_text(debug_info=False))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
