"""The megakernel's health buffer: where a wait that passed its deadline says what it waited for.

Each rank's buffer holds ``WORDS`` int32: a nonzero ``site`` when a block gave up, the block id,
the tag it wanted, and the number of flags it was still missing. The first block to miss wins
(the kernel writes with a compare-and-swap on ``site``); the launch then exits instead of hanging.
"""

from __future__ import annotations

from collections.abc import Sequence

WORDS = 4
SITE, BLOCK, TAG, MISSING = range(WORDS)  # word indices, as the kernel writes them

# Site numbers as the kernel passes them to its waits.
SITES = {
    1: "G blocks wait the all-gathered input rows (x8f) before QKV",
    2: "G blocks wait the merged attention rows (attf) before o_proj",
    3: "G blocks wait the all-gathered post-norm rows (h8f) before gate/up",
    4: "G blocks wait every block's activations (actf) before down",
    5: "L blocks wait the QKV rows (qkvf)",
    6: "L merges wait a request's attention partials (apf)",
    7: "N blocks wait the down partials of their row (reduce-scatter)",
    8: "N blocks wait the o_proj partials of their row (reduce-scatter)",
    9: "N blocks wait the last layer's down partials before the final norm",
    10: "N blocks wait a peer's all-gathered input row",
    11: "N blocks wait a peer's all-gathered post-norm row",
    12: "N blocks wait a peer's final row for h_out",
}


class DeadlineMissed(RuntimeError):
    """A block of ``rank`` gave up at ``site``: reported from the health buffer, not a hang."""

    def __init__(self, rank: int, site: int, block: int, tag: int, missing: int):
        what = SITES.get(site, f"unknown site {site}")
        super().__init__(f"rank {rank}, site {site} ({what}): block {block} missed its deadline waiting for "
                         f"tag {tag}, {missing} flag(s) short")
        self.rank, self.site, self.block, self.tag, self.missing = rank, site, block, tag, missing


def check_health(per_rank: Sequence[Sequence[int]]) -> None:
    """Raise :class:`DeadlineMissed` for the first rank whose health buffer records a miss."""
    for rank, words in enumerate(per_rank):
        if len(words) != WORDS:
            raise ValueError(f"health: rank {rank} has {len(words)} words, expected {WORDS}")
        site, block, tag, missing = (int(words[i]) for i in (SITE, BLOCK, TAG, MISSING))
        if site:
            raise DeadlineMissed(rank, site, block, tag, missing)
