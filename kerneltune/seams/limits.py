"""How long measuring may take and how much is kept ahead: one place for each limit (a house rule keeps these
numbers out of every other file)."""

CANDIDATE_MAX_SECONDS = 2.0  # a candidate (or a bench shape) samples at most this long; the noise rule stops sooner
REMEASURE_MAX_SECONDS = 1.0  # verify's re-measure: a ratio within one run matters more than a tight median
CEILING_MAX_SECONDS = 1.0  # the ceilings' reference kernels are long and steady

COMPILE_TIMEOUT_S = 600.0  # a candidate's compile killed past this is journaled as a timeout
RUN_TIMEOUT_S = 300.0  # ... and its check and timing past this

BUILD_CACHE_BYTES = 4 << 30  # the user's cache of compiled builds (``build_cache``)

# Candidates a route keeps handed to its compile workers when the strategy learns nothing from a result
# (exhaustive, random), so no worker waits on the slowest compile at the head of the line; it bounds the loaded
# builds a timing worker holds. A model of the H200's cold sweeps gains nothing past 42
# (results/engine/2026-12-05-one-entry/queue_model.py).
COMPILE_QUEUE = 64

# A lock held by another process (a table's, a journal's): a waiter says what it waits on after LOCK_NOTICE_S and
# gives up after LOCK_WAIT_S. A table write holds its lock for milliseconds; a minute means a holder that is stopped
# (Ctrl-Z) or frozen, not one that is busy.
LOCK_NOTICE_S = 2.0
LOCK_WAIT_S = 60.0

# A worker stopped (SIGSTOP, a frozen cgroup) this long is killed, instead of after its whole timeout.
FROZEN_WORKER_S = 10.0
