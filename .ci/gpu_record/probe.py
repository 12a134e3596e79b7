"""An example's run-time lookup and its tuned config timed beside its heuristic and the framework's own op, on the
same inputs in one process: ``python3 .ci/gpu_record/probe.py EXAMPLE BUCKET`` from the repository root, after
its table is installed (``KERNELTUNE_TABLES``). Prints one JSON object."""

import json
import sys
import time

sys.path.insert(0, "examples")


def framework_op(name: str):
    """What a user would call instead: cuBLAS through ``jnp.dot``, or ``torch.softmax``."""
    if name == "triton_softmax":
        import torch

        return lambda x, y: torch.softmax(x, dim=1)
    import jax
    import jax.numpy as jnp

    if name == "pallas_matmul":  # bf16 in and out, float32 accumulation, as the kernel does
        return jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype))
    return jax.jit(jnp.dot)


def main(name: str, bucket: str) -> None:
    from kerneltune.seams.measure import MeasureSettings, sample_until_quiet
    from kerneltune.seams.registry import load_backend

    K = __import__(name).KERNEL
    problem = K.problem(K.buckets[bucket])
    started = time.perf_counter()
    tuned = dict(K.tuned(problem))
    lookup_us = 1e6 * (time.perf_counter() - started)
    heuristic = dict(K.heuristic(problem))
    backend = load_backend(K.backend)
    inputs = K.make_inputs(problem, {}, 1234).args
    rows = {}
    for label, fn in (("tuned", K.build(problem, tuned)), ("heuristic", K.build(problem, heuristic)),
                      ("framework", framework_op(name))):
        check = K.check(fn, problem, K.make_inputs(problem, {}, 99))  # poisoned outputs, float64 reference
        t = sample_until_quiet(backend.sampler(fn, inputs, False), MeasureSettings(), backend.clocks)
        rows[label] = {"median_us": t.median_us, "spread": t.spread, "samples": t.samples, "converged": t.converged,
                       "check": check.error or "ok"}
    print(json.dumps({"example": name, "bucket": bucket, "device": backend.stamps().get("device"),
                      "tuned": tuned, "heuristic": heuristic, "first_lookup_us": lookup_us, "rows": rows,
                      "tuned_over_framework": rows["tuned"]["median_us"] / rows["framework"]["median_us"],
                      "tuned_over_heuristic": rows["tuned"]["median_us"] / rows["heuristic"]["median_us"]},
                     indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:3])
