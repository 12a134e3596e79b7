"""How long measuring may take: the time caps of sampling and the timeouts of a candidate, one place each.

A sweep's candidate and a bench's shape sample for up to ``CANDIDATE_MAX_SECONDS`` (the noise rule usually stops
them far sooner: 0.1 s a candidate on the H200, results/engine/2026-12-04-compile-workers/); verify re-measures
every config of an entry beside its rivals, where a ratio in one run matters more than a tight median; the
ceilings' reference kernels are long and steady. A candidate that compiles or runs past its timeout is killed
and journaled as a timeout. The user's cache keeps compiled builds up to ``BUILD_CACHE_BYTES`` (``build_cache``).
"""

CANDIDATE_MAX_SECONDS = 2.0
REMEASURE_MAX_SECONDS = 1.0
CEILING_MAX_SECONDS = 1.0

COMPILE_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 300.0

BUILD_CACHE_BYTES = 4 << 30
