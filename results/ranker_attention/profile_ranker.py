"""Launch the tuned ranker kernel of one bucket twice (compile, then the profiled launch), for Nsight
Compute: `ncu --kernel-name regex:... python results/ranker_attention/profile_ranker.py BUCKET [CAP]`.
CAP overrides the bucket's cap method (same tiles), e.g. `none` next to `tanh`."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

from kerneltune.kernels.ranker_attention import ranker_attention
from kerneltune.kernels.ranker_attention.api import choose_config
from kerneltune.kernels.ranker_attention.cap import CapMethod
from kerneltune.kernels.ranker_attention.config import KernelConfig, Problem
from kerneltune.kernels.ranker_attention.inputs import make_device_tensors, ranker_bounds
from kerneltune.kernels.ranker_attention.plugin import PLUGIN
from kerneltune.tuning.space import load_space

space = load_space("search_spaces/ranker_attention.toml", set(PLUGIN.tunables), set(PLUGIN.problem_fields))
bucket = space.bucket(sys.argv[1])
fields = dict(bucket.problem)
tuned = choose_config(Problem(**fields), None)  # the table's tiles for the bucket's own cap
if len(sys.argv) > 2:
    method = CapMethod.parse(sys.argv[2])
    fields.update(cap_method=method, cap=fields.get("cap") if method.needs_cap else None)
problem = Problem(**fields)
bounds = jnp.asarray(ranker_bounds(problem.batch, problem.seq_len, tuple(bucket.bounds["history"]),
                                   int(bucket.bounds["candidates"]), np.random.default_rng(0)))
q, k, v = make_device_tensors(problem, 0)
config = KernelConfig.for_problem(problem, **tuned.tile())
fn = jax.jit(lambda a, b, c, d: ranker_attention(a, b, c, d, cap_method=problem.cap_method, cap=problem.cap,
                                                 config=config))
for _ in range(2):
    fn(q, k, v, bounds)[0].block_until_ready()
print(problem, tuned.tile())
