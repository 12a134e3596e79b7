"""How long measuring may take: the time caps of sampling and the timeouts of a candidate, one place each.

A sweep's candidate and a bench's shape sample for up to ``CANDIDATE_MAX_SECONDS`` (the noise rule usually stops
them far sooner: 0.1 s a candidate on the H200, results/engine/2026-12-04-compile-workers/); verify re-measures
every config of an entry beside its rivals, where a ratio in one run matters more than a tight median; the
ceilings' reference kernels are long and steady. A candidate that compiles or runs past its timeout is killed
and journaled as a timeout. The user's cache keeps compiled builds up to ``BUILD_CACHE_BYTES`` (``build_cache``).

A strategy that learns nothing from a result (exhaustive, random) keeps up to ``COMPILE_QUEUE`` candidates a route
handed over to its compile workers, so that no worker waits on the slowest compile at the head of the line and the
workers go on compiling while a bucket's first candidate computes its references (10-17 s on the H200). The one-entry
record's cold sweeps, their compile and measure times replayed in a model of the queue that reproduces their walls
within 2% (results/engine/2026-12-05-one-entry/queue_model.py), take 73.9 s for both buckets with 14 workers one round
ahead (as measured: 75.5 s) and 63.9 s with 42 or more ahead; with 8 workers 103.2 s (104.6 s measured) and 74.2 s
with 64. It also bounds the builds loaded in the timing worker while they wait for their measurement.
"""

CANDIDATE_MAX_SECONDS = 2.0
REMEASURE_MAX_SECONDS = 1.0
CEILING_MAX_SECONDS = 1.0

COMPILE_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 300.0

BUILD_CACHE_BYTES = 4 << 30

COMPILE_QUEUE = 64
