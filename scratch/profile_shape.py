"""One user call of ranker_attention on a bench shape (the runtime's config from the shipped table), run
twice: the second launch is the one Nsight Compute profiles (--launch-skip 1)."""
import sys

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import ranker_attention
from kerneltune.kernels.ranker_attention.accuracy import budget_for
from kerneltune.kernels.ranker_attention.api import choose_config
from kerneltune.kernels.ranker_attention.bench.spec import load_spec
from kerneltune.kernels.ranker_attention.config import Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.paths import SPACES

shape_name, cap_name = sys.argv[1], sys.argv[2]
spec = load_spec(SPACES / "bench_ranker_attention.toml")
shape = next(s for s in spec.shapes if s.name == shape_name)
cap = spec.caps[cap_name] or None
problem = Problem(**shape.problem, cap_method=cap_name, cap=cap)
bounds = ranker_bounds(problem.batch, problem.seq_len, shape.history, shape.candidates, np.random.default_rng(0))
if not shape.ragged:
    bounds[:] = bounds[0]
q, k, v = make_device_tensors(problem, 0)
print("config:", choose_config(problem, None, budget_for(problem.cap_method, False, None)), flush=True)
f = jax.jit(lambda q, k, v, b: ranker_attention(q, k, v, b, cap_method=cap_name, cap=cap))
for _ in range(2):
    out = f(q, k, v, jnp.asarray(bounds))
    out.block_until_ready()
print("ok", float(jnp.abs(out.astype(jnp.float32)).mean()))
