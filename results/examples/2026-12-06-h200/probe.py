"""Each example's tuned config against its heuristic and the framework's own op, same inputs, one process:
`python3 probe.py EXAMPLE BUCKET` from the repository root (the tuned table installed in KERNELTUNE_TABLES)."""
import json
import sys

sys.path.insert(0, "examples")
name, bucket = sys.argv[1], sys.argv[2]
module = __import__(name)
K = module.KERNEL
problem = K.problem(K.buckets[bucket])
inputs = K.make_inputs(problem, {}, 1234).args
tuned, heuristic = dict(K.tuned(problem)), dict(K.heuristic(problem))
rows = {}
if K.backend == "cuda-jax":
    import jax
    import jax.numpy as jnp

    from kerneltune.backends.cuda_jax import time_jax as time_it
    baseline = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype))
else:
    import torch

    from kerneltune.backends.torch_device import BACKEND
    from kerneltune.measure import MeasureSettings, sample_until_quiet

    def time_it(fn, args):
        return sample_until_quiet(BACKEND.sampler(fn, args, False), MeasureSettings(), BACKEND.clocks)
    baseline = lambda x, y: torch.softmax(x, dim=1)  # noqa: E731
for label, fn in (("tuned", K.build(problem, tuned)), ("heuristic", K.build(problem, heuristic)),
                  ("framework", baseline)):
    check = K.check(fn, problem, K.make_inputs(problem, {}, 99)) if label != "framework" else None
    t = time_it(fn, inputs)
    rows[label] = {"median_us": t.median_us, "spread": t.spread, "samples": t.samples, "converged": t.converged,
                   "check": None if check is None else (check.error or f"ok, error {check.rel_error:.2e}")}
out = {"example": name, "bucket": bucket, "tuned": tuned, "heuristic": heuristic, "rows": rows,
       "tuned_over_framework": rows["tuned"]["median_us"] / rows["framework"]["median_us"],
       "tuned_over_heuristic": rows["tuned"]["median_us"] / rows["heuristic"]["median_us"]}
print(json.dumps(out, indent=1))
