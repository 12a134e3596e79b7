"""How long measuring may take and how much is kept ahead: one place for each limit.

- ``CANDIDATE_MAX_SECONDS``: a sweep's candidate (or a bench's shape) samples at most this long; the noise rule
  usually stops it far sooner (0.1 s a candidate on the H200).
- ``REMEASURE_MAX_SECONDS``: verify re-measures each config beside its rivals, where a ratio within one run
  matters more than a tight median.
- ``CEILING_MAX_SECONDS``: the ceilings' reference kernels are long and steady.
- ``COMPILE_TIMEOUT_S``, ``RUN_TIMEOUT_S``: a candidate that compiles, or checks and times, past these is killed
  and journaled as a timeout.
- ``BUILD_CACHE_BYTES``: the user's cache keeps compiled builds up to this (``build_cache``).
- ``COMPILE_QUEUE``: candidates a route keeps handed over to its compile workers when the strategy learns nothing
  from a result (exhaustive, random): no worker waits on the slowest compile at the head of the line, and the
  timing worker holds at most this many loaded builds. Why 64: a model of the H200's cold sweeps
  (``results/engine/2026-12-05-one-entry/queue_model.py``) gains nothing past 42.
"""

CANDIDATE_MAX_SECONDS = 2.0
REMEASURE_MAX_SECONDS = 1.0
CEILING_MAX_SECONDS = 1.0

COMPILE_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 300.0

BUILD_CACHE_BYTES = 4 << 30

COMPILE_QUEUE = 64
