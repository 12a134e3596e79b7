"""Naming timings that did not settle, and what this host shows of why.

A timing settles when its median's 95% interval narrows under ``--rel-noise`` before ``--max-seconds``
(``measure.sample_until_quiet``). One that does not is still a median, but a wide one: two sweeps may then pick
two winners. The sweep says how many did not, with the likely cause it can see (the host's load, clocks held
below their maximum, throttling), rather than let a noisy answer pass as a settled one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

LOADED = 0.75  # load average per core above which the host is busy enough to disturb timings
SLOW_CLOCK = 0.9  # an SM clock under this share of its maximum is held down


def _number(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def causes(unsettled: Sequence[Mapping[str, Any]], load: float | None = None, cores: int | None = None) -> list[str]:
    """What the unsettled timings' clock readings and this host's load show: each a phrase, likeliest first."""
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    found = []
    if load > LOADED * cores:
        found.append(f"the host's load average is {load:.1f} on {cores} cores")
    after = [t.get("clocks", {}).get("after", {}) for t in unsettled]
    throttled = sum(1 for t, a in zip(unsettled, after, strict=True) if t.get("clocks", {}).get("throttled")
                    or a.get("throttle_active"))
    if throttled:
        found.append(f"the device was throttling after {throttled} of them")
    slow = [(_number(a.get("sm_mhz")), _number(a.get("sm_max_mhz"))) for a in after]
    held = [now for now, top in slow if now and top and now < SLOW_CLOCK * top]
    if held:
        found.append(f"the SM clock was below {100 * SLOW_CLOCK:.0f}% of its maximum after {len(held)} of them")
    return found


def unsettled_line(timings: Sequence[Mapping[str, Any]], load: float | None = None,
                   cores: int | None = None) -> str | None:
    """One line naming the timings that did not settle, or None. Those stopped early (``stopped_early``) count
    with the others: a busy host's sweep once said "3 of 4" where a fifth, stopped on a batch at 100% noise, had
    been the true winner."""
    judged = [t for t in timings if "converged" in t]
    bad = [t for t in judged if not t["converged"]]
    if not bad:
        return None
    why = causes(bad, load, cores)
    stopped = sum(1 for t in bad if t.get("stopped_early"))
    early = (f", or until it was stopped early, clearly slower than the best beyond its own noise: {stopped} of "
             f"them" if stopped else "")
    return (f"{len(bad)} of {len(judged)} timings did not settle (the median's noise stayed above --rel-noise "
            f"until --max-seconds{early}); likely cause: {'; '.join(why) if why else 'none this host shows'}. "
            f"Their medians are wide: the table says settled: false where a winner's did not; re-run on a quieter "
            f"machine or with a longer --max-seconds.")
