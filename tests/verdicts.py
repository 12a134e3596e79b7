"""What a `kerneltune verify` run from a shell printed, as the tests that run it judge it."""

import re


def only_slower(stdout: str) -> bool:
    """Every entry correct, and some judged slower than a rival: a timing verdict, which the other test worker's bursts
    on two cores can make (an interpreted winner once 73% slower than its runner-up, noise 13.7%; alone 6% apart).
    The tests time such a run once more, and the second must not be slower."""
    return "slower than" in stdout and set(re.findall(r"\(correctness: (\w+)", stdout)) == {"ok"}
